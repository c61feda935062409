"""Env-throughput runners of ``bench/peers.py``: gpurl, JaxMARL (two ways), VMAS and PettingZoo mpe2 on
any scenario of the MPE suite (:mod:`.mpe_suite`). (Part of a library: bench/peers.py prints the RESULT line.)

Every runner steps ``num_envs`` copies of one :class:`~.mpe_suite.RunConfig` with uniformly random
Discrete actions, each agent's within its own action space in that library (their spaces differ: see
``spaces``), autoresetting after ``max_cycles`` steps, and answers ``run(steps) -> seconds`` with the
device synchronised at both ends. ``granularity``: the step counts it can time (a JAX scan runs a fixed
number of steps per call). A runner that cannot build the configuration raises
:class:`~.mpe_suite.Unsupported` (the benchmark names the peer and skips it).
"""
from __future__ import annotations

import time

import numpy as np
import torch

from .mpe_suite import RunConfig, Unsupported, make_jaxmarl

#: Random-action tensors cycled through (their drawing is not timed).
POOL = 8


def peer_versions() -> tuple[dict, dict]:
    """``({peer: version string}, {peer: why it could not be imported})`` for the peers."""
    import importlib
    import importlib.metadata as md

    versions, missing = {}, {}
    modules = {"gpurl": ["gpurl"], "jaxmarl": ["jax", "jaxmarl"], "vmas": ["vmas"], "mpe2": ["pettingzoo", "mpe2"]}
    for peer, mods in modules.items():
        try:
            for m in mods:
                importlib.import_module(m)
            versions[peer] = ", ".join(f"{m} {_version(md, m)}" for m in mods)
        except Exception as exc:  # noqa: BLE001 - any import failure means the peer is unavailable
            missing[peer] = f"{type(exc).__name__}: {exc}".splitlines()[0]
    if "jaxmarl" in missing:
        missing["jaxmarl_fused"] = missing["jaxmarl"]
    else:
        versions["jaxmarl_fused"] = versions["jaxmarl"]
    return versions, missing


def _version(md, module: str) -> str:
    try:
        return md.version(module)
    except md.PackageNotFoundError:
        return getattr(__import__(module), "__version__", "?")


def fmt_spaces(rows) -> str:
    """``[(agent, actions n, obs dim)]`` in agent order as ``adversary_0..adversary_2 D5/obs16, agent_0 D5/obs14``
    (consecutive agents with the same space together)."""
    out, i = [], 0
    while i < len(rows):
        j = i
        while j + 1 < len(rows) and rows[j + 1][1:] == rows[i][1:]:
            j += 1
        names = ",".join(r[0] for r in rows[i:j + 1]) if j - i < 2 else f"{rows[i][0]}..{rows[j][0]}"
        out.append(f"{names} D{rows[i][1]}/obs{rows[i][2]}")
        i = j + 1
    return ", ".join(out)


class GpurlRunner:
    """``gpurl.make(name, ...)`` stepped through the public ``env.step`` (validate=False, autoreset,
    global_state=False: no peer computes a global state, and gpurl's trainer asks for one only for an
    algorithm that reads it)."""

    name = "gpurl"
    granularity = 1

    def __init__(self, cfg: RunConfig, num_envs: int, device: torch.device, seed: int = 0):
        import gpurl

        if cfg.name not in gpurl.registered():
            raise Unsupported(f"gpurl has no {cfg.name} yet (registered: {gpurl.registered()})")
        self.device = device
        self.env = env = gpurl.make(cfg.name, num_envs=num_envs, device=device, seed=seed, validate=False,
                                    global_state=False, **cfg.gpurl_kwargs())
        env.reset()
        gen = torch.Generator(device=device).manual_seed(seed)
        groups = list(env.groups.values())
        self.actions = [torch.cat([torch.randint(0, g.action_space.n, (num_envs, g.agents.stop - g.agents.start),
                                                 generator=gen, device=device) for g in groups], dim=1)
                        for _ in range(POOL)]
        self.t = 0
        self.where = str(device)
        self.config = repr(env.params)
        self.spaces = fmt_spaces([(f"{name}[{g.agents.start}:{g.agents.stop}]", g.action_space.n, g.obs_dim)
                                  for name, g in env.groups.items()])

    def _sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def run(self, steps: int) -> float:
        self._sync()
        start = time.perf_counter()
        for _ in range(steps):
            self.env.step(self.actions[self.t % POOL])
            self.t += 1
        self._sync()
        return time.perf_counter() - start


class GpurlGraphRunner(GpurlRunner):
    """``gpurl.make`` as :class:`GpurlRunner`, stepped the way gpurl's trainer steps it on CUDA: ``granularity``
    ``env.step`` calls captured once as one CUDA graph and replayed (no per-step Python or launch cost).
    CUDA only: a graph is a CUDA object."""

    name = "gpurl_graph"
    granularity = 64  # a multiple of POOL: every replay cycles through the same actions

    def __init__(self, cfg: RunConfig, num_envs: int, device: torch.device, seed: int = 0):
        if device.type != "cuda":
            raise Unsupported("CUDA graphs need a CUDA device")
        super().__init__(cfg, num_envs, device, seed)
        self._steps()  # compiles outside the capture and settles the env's buffers
        torch.cuda.synchronize(device)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._steps()
        self.where = f"{device} (CUDA graph of {self.granularity} steps)"

    def _steps(self):
        for i in range(self.granularity):
            self.env.step(self.actions[i % POOL])

    def run(self, steps: int) -> float:
        self._sync()
        start = time.perf_counter()
        for _ in range(max(1, -(-steps // self.granularity))):
            self.graph.replay()
        self._sync()
        return time.perf_counter() - start


def jax_steps_per_call(num_envs: int, num_agents: int) -> int:
    """Steps per jitted call: enough work per dispatch, but a call of the big cells stays well under a second."""
    return int(max(4, min(128, 2 ** int(np.log2(max(1.0, 65536 / (num_envs * num_agents)))))))


def _checksum(obs: dict, rew: dict, dones: dict):
    """Every observation and reward summed, so XLA cannot drop that work (gpurl writes them all too)."""
    import jax.numpy as jnp

    return (sum(o.sum() for o in obs.values()) + sum(r.astype(jnp.float32).sum() for r in rew.values())
            + dones["__all__"].sum())


class JaxMARLRunner:
    """"inputs": ``jit(scan(vmap(env.step)))`` over JaxMARL's port; actions and step keys drawn up front and
    fed to the scan as inputs; a checksum of every observation and reward per step is the scan's output.
    JaxMARL's step autoresets (its episodes last max_cycles steps: see :func:`.mpe_suite.make_jaxmarl`)."""

    name = "jaxmarl"

    def __init__(self, cfg: RunConfig, num_envs: int, device: torch.device, seed: int = 0):
        import jax

        self.jax = jax
        self.env = env = make_jaxmarl(cfg)
        self.agents = list(env.agents)
        self.n = [int(env.action_space(a).n) for a in self.agents]
        self.E, self.N = num_envs, len(self.agents)
        self.granularity = jax_steps_per_call(self.E, self.N)
        self.key, k_reset = jax.random.split(jax.random.PRNGKey(seed))
        obs, self.state = jax.vmap(env.reset)(jax.random.split(k_reset, num_envs))
        self.where = str(jax.devices()[0])
        self.config = f"{type(env).__name__}(max_steps={env.max_steps})"
        # the observations' real widths (JaxMARL's declared spaces keep the default configuration's)
        self.spaces = fmt_spaces([(a, n, int(obs[a].shape[-1])) for a, n in zip(self.agents, self.n)])
        self._build()

    def _vstep(self, keys, state, actions):
        return self.jax.vmap(self.env.step)(keys, state, dict(zip(self.agents, actions)))

    def _build(self):
        jax, T, E = self.jax, self.granularity, self.E
        k_act, k_step = jax.random.split(self.key)
        ks = jax.random.split(k_act, self.N)
        self.actions = [jax.random.randint(k, (T, E), 0, n) for k, n in zip(ks, self.n)]
        self.keys = jax.random.split(k_step, T * E).reshape(T, E, -1)

        def body(state, x):
            actions, keys = x
            obs, state, rew, dones, _ = self._vstep(keys, state, actions)
            return state, _checksum(obs, rew, dones)

        self._rollout = jax.jit(lambda state, actions, keys: jax.lax.scan(body, state, (actions, keys)))

    def run(self, steps: int) -> float:
        calls = max(1, -(-steps // self.granularity))
        start = time.perf_counter()
        for _ in range(calls):
            self.state, check = self._rollout(self.state, self.actions, self.keys)
        self.jax.block_until_ready((self.state, check))
        return time.perf_counter() - start


class JaxMARLFusedRunner(JaxMARLRunner):
    """"fused", as a fused training step would use JaxMARL: ``vmap(env.step)`` inside a jitted
    ``lax.scan`` whose body draws the random actions and step keys from a key carried in the scan and
    reduces observations and rewards into a carried sum, so XLA never writes observations to memory
    (gpurl writes every observation into its buffers)."""

    name = "jaxmarl_fused"

    def _build(self):
        import jax.numpy as jnp

        jax, T, E = self.jax, self.granularity, self.E

        def body(carry, _):
            state, key, acc = carry
            key, k_act, k_step = jax.random.split(key, 3)
            actions = [jax.random.randint(k, (E,), 0, n) for k, n in zip(jax.random.split(k_act, self.N), self.n)]
            obs, state, rew, dones, _ = self._vstep(jax.random.split(k_step, E), state, actions)
            return (state, key, acc + _checksum(obs, rew, dones)), None

        self._rollout = jax.jit(lambda carry: jax.lax.scan(body, carry, None, length=T)[0])
        self.carry = (self.state, self.key, jnp.zeros((), jnp.float32))

    def run(self, steps: int) -> float:
        calls = max(1, -(-steps // self.granularity))
        start = time.perf_counter()
        for _ in range(calls):
            self.carry = self._rollout(self.carry)
        self.jax.block_until_ready(self.carry)
        return time.perf_counter() - start


class VMASRunner:
    """``vmas.make_env(scenario, continuous_actions=False)`` (VMAS's own port, see the notes);
    ``env.reset()`` every max_cycles steps (every env's episode ends together: VMAS has no episode limit
    of its own here). Random actions within each agent's VMAS space (Discrete(9) moves, x dim_c if it talks)."""

    name = "vmas"
    granularity = 1

    def __init__(self, cfg: RunConfig, num_envs: int, device: torch.device, seed: int = 0):
        import vmas

        scenario, kwargs = cfg.vmas()
        self.device = device
        self.max_cycles = cfg.max_cycles
        self.env = env = vmas.make_env(scenario, num_envs=num_envs, device=device, continuous_actions=False,
                                       seed=seed, **kwargs)
        env.reset()
        n = [int(s.n) for s in env.action_space.spaces]
        gen = torch.Generator(device=device).manual_seed(seed)
        self.actions = [[torch.randint(0, k, (num_envs, 1), generator=gen, device=device) for k in n]
                        for _ in range(POOL)]
        self.t = 0
        self.where = str(device)
        self.config = f"vmas.make_env({scenario!r}, {kwargs})"
        self.spaces = fmt_spaces([(a.name, k, int(s.shape[0]))
                                  for a, k, s in zip(env.agents, n, env.observation_space.spaces)])

    def run(self, steps: int) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        start = time.perf_counter()
        for _ in range(steps):
            self.env.step(self.actions[self.t % POOL])
            self.t += 1
            if self.t % self.max_cycles == 0:
                self.env.reset()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter() - start


class MPE2Runner:
    """PettingZoo mpe2 ``<module>.parallel_env``: one Python env object per env, stepped in a loop
    (mpe2 has no vectorised form), reset when its episode is over."""

    name = "mpe2"
    granularity = 1

    def __init__(self, cfg: RunConfig, num_envs: int, device: torch.device, seed: int = 0):
        import importlib

        module = importlib.import_module(f"mpe2.{cfg.scenario.mpe2_module}")
        self.envs = [module.parallel_env(**cfg.mpe2_kwargs()) for _ in range(num_envs)]
        for i, env in enumerate(self.envs):
            env.reset(seed=seed + i)
        env = self.envs[0]
        names = env.possible_agents
        n = [int(env.action_space(a).n) for a in names]
        rng = np.random.default_rng(seed)
        self.actions = [[{a: int(rng.integers(k)) for a, k in zip(names, n)} for _ in range(num_envs)]
                        for _ in range(POOL)]
        self.t = 0
        self.where = "cpu (numpy)"
        self.config = f"mpe2.{cfg.scenario.mpe2_module}.parallel_env(**{cfg.mpe2_kwargs()})"
        self.spaces = fmt_spaces([(a, k, int(env.observation_space(a).shape[0])) for a, k in zip(names, n)])

    def run(self, steps: int) -> float:
        start = time.perf_counter()
        for _ in range(steps):
            acts = self.actions[self.t % POOL]
            for env, a in zip(self.envs, acts):
                env.step(a)
                if not env.agents:  # every agent truncated or terminated: the episode is over
                    env.reset()
            self.t += 1
        return time.perf_counter() - start


RUNNERS = {"gpurl": GpurlRunner, "gpurl_graph": GpurlGraphRunner, "jaxmarl": JaxMARLRunner, "jaxmarl_fused": JaxMARLFusedRunner,
           "vmas": VMASRunner, "mpe2": MPE2Runner}
