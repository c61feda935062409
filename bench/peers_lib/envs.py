"""Env-throughput runners of ``bench/peers.py``: gpurl, JaxMARL, VMAS and PettingZoo mpe2 on simple_tag.
(Part of a library: bench/peers.py prints the RESULT line.)

Every runner steps ``num_envs`` copies of simple_tag with uniformly random discrete actions drawn
up front (a pool cycled through, so drawing them is not timed), autoresetting after 25 steps, and
answers ``run(steps) -> seconds`` with the device synchronised at both ends. ``granularity``: the
step counts it can time (a JAX scan runs a fixed number of steps per call).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

#: Random-action tensors cycled through (their drawing is not timed).
POOL = 8


@dataclass(frozen=True)
class TagConfig:
    name: str
    num_adversaries: int
    num_good: int
    num_obstacles: int
    max_cycles: int = 25

    @property
    def num_agents(self) -> int:
        return self.num_adversaries + self.num_good


CONFIGS = {"3v1v2": TagConfig("3v1v2", 3, 1, 2), "10v30v5": TagConfig("10v30v5", 10, 30, 5)}


def peer_versions() -> tuple[dict, dict]:
    """``({peer: version string}, {peer: why it could not be imported})`` for the four peers."""
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
    return versions, missing


def _version(md, module: str) -> str:
    try:
        return md.version(module)
    except md.PackageNotFoundError:
        return getattr(__import__(module), "__version__", "?")


class GpurlRunner:
    """``gpurl.make("simple_tag", ...)`` stepped through the public ``env.step`` (validate=False)."""

    name = "gpurl"
    granularity = 1

    def __init__(self, cfg: TagConfig, num_envs: int, device: torch.device, seed: int = 0):
        import gpurl

        self.device = device
        self.env = gpurl.make("simple_tag", num_envs=num_envs, device=device, seed=seed, validate=False,
                              num_adversaries=cfg.num_adversaries, num_good=cfg.num_good,
                              num_obstacles=cfg.num_obstacles, max_cycles=cfg.max_cycles)
        self.env.reset()
        gen = torch.Generator(device=device).manual_seed(seed)
        self.actions = [torch.randint(0, 5, (num_envs, cfg.num_agents), generator=gen, device=device)
                        for _ in range(POOL)]
        self.t = 0
        self.where = str(device)

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


class JaxMARLRunner:
    """``jit(scan(vmap(env.step)))`` over JaxMARL's ``MPE_simple_tag_v3`` (25-step episodes, see
    jax_ippo.make_jaxmarl_tag). Actions and step keys are drawn up front and fed to the scan as
    inputs; a checksum of every observation and reward is the scan's output, so XLA cannot drop the
    observation work (gpurl writes every observation too)."""

    name = "jaxmarl"

    def __init__(self, cfg: TagConfig, num_envs: int, device: torch.device, seed: int = 0):
        import jax
        import jax.numpy as jnp

        from .jax_ippo import make_jaxmarl_tag

        self.jax = jax
        env = make_jaxmarl_tag(cfg.num_adversaries, cfg.num_good, cfg.num_obstacles, cfg.max_cycles)
        E, N = num_envs, cfg.num_agents
        # Steps per call: enough work per dispatch, but a call of the big cells stays well under a second.
        self.granularity = T = int(max(4, min(128, 2 ** int(np.log2(max(1.0, 65536 / (E * N)))))))
        key = jax.random.PRNGKey(seed)
        k_reset, k_act, k_step = jax.random.split(key, 3)
        _, self.state = jax.vmap(env.reset)(jax.random.split(k_reset, E))
        self.actions = jax.random.randint(k_act, (T, N, E), 0, 5)
        self.keys = jax.random.split(k_step, T * E).reshape(T, E, -1)
        agents = env.agents

        def body(state, x):
            a, keys = x
            obs, state, rew, dones, _ = jax.vmap(env.step)(keys, state, {n: a[i] for i, n in enumerate(agents)})
            check = (sum(o.sum() for o in obs.values()) + sum(r.astype(jnp.float32).sum() for r in rew.values())
                     + dones["__all__"].sum())
            return state, check

        def rollout(state, actions, keys):
            return jax.lax.scan(body, state, (actions, keys))

        self._rollout = jax.jit(rollout)
        self.where = str(jax.devices()[0])
        self.checksum = 0.0

    def run(self, steps: int) -> float:
        calls = max(1, -(-steps // self.granularity))
        start = time.perf_counter()
        for _ in range(calls):
            self.state, check = self._rollout(self.state, self.actions, self.keys)
        self.jax.block_until_ready((self.state, check))
        return time.perf_counter() - start


class VMASRunner:
    """``vmas.make_env("simple_tag", continuous_actions=False)``; ``env.reset()`` every 25 steps (every
    env's episode ends together). VMAS's simple_tag is its own port: 10 physics substeps, a different
    collision model and a bounded world, so a VMAS step does more work than an MPE step."""

    name = "vmas"
    granularity = 1

    def __init__(self, cfg: TagConfig, num_envs: int, device: torch.device, seed: int = 0):
        import vmas

        self.device = device
        self.cfg = cfg
        self.env = vmas.make_env("simple_tag", num_envs=num_envs, device=device, continuous_actions=False,
                                 seed=seed, num_good_agents=cfg.num_good, num_adversaries=cfg.num_adversaries,
                                 num_landmarks=cfg.num_obstacles)
        self.env.reset()
        gen = torch.Generator(device=device).manual_seed(seed)
        self.actions = [[torch.randint(0, 5, (num_envs, 1), generator=gen, device=device)
                         for _ in range(cfg.num_agents)] for _ in range(POOL)]
        self.t = 0
        self.where = str(device)

    def run(self, steps: int) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        start = time.perf_counter()
        for _ in range(steps):
            self.env.step(self.actions[self.t % POOL])
            self.t += 1
            if self.t % self.cfg.max_cycles == 0:
                self.env.reset()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter() - start


class MPE2Runner:
    """PettingZoo mpe2 ``simple_tag_v3.parallel_env``: one Python env object per env, stepped in a loop
    (mpe2 has no vectorised form), reset when its episode is over."""

    name = "mpe2"
    granularity = 1

    def __init__(self, cfg: TagConfig, num_envs: int, device: torch.device, seed: int = 0):
        from mpe2 import simple_tag_v3

        self.envs = [simple_tag_v3.parallel_env(num_good=cfg.num_good, num_adversaries=cfg.num_adversaries,
                                                num_obstacles=cfg.num_obstacles, max_cycles=cfg.max_cycles,
                                                continuous_actions=False) for _ in range(num_envs)]
        for i, env in enumerate(self.envs):
            env.reset(seed=seed + i)
        names = self.envs[0].possible_agents
        rng = np.random.default_rng(seed)
        self.actions = [[{n: int(a) for n, a in zip(names, rng.integers(0, 5, len(names)))}
                         for _ in range(num_envs)] for _ in range(POOL)]
        self.t = 0
        self.where = "cpu (numpy)"

    def run(self, steps: int) -> float:
        start = time.perf_counter()
        for _ in range(steps):
            acts = self.actions[self.t % POOL]
            for env, a in zip(self.envs, acts):
                env.step(a)
                if not env.agents:  # every agent truncated: the episode is over
                    env.reset()
            self.t += 1
        return time.perf_counter() - start


RUNNERS = {"gpurl": GpurlRunner, "jaxmarl": JaxMARLRunner, "vmas": VMASRunner, "mpe2": MPE2Runner}
