"""The kernels gpurl launches on a GPU, found and sized without one: bench/kernel_report.py's rows and the compile
tier's limit checks (tests/test_compile_kernel_limits.py). A library, not a script: bench/kernel_report.py, which
imports it, prints the RESULT line.

Env kernels are *recorded*, not listed: an env of each configuration is built with the CUDA target over host memory
and its ``EnvKernel.launch`` is replaced by a recorder for one ``reset()`` and one ``step()``, so whatever kernels
an env launches (under whatever names) are found, with their exact arguments, ``constants`` and launch geometry
(``EnvKernel.geometry``, ``gpurl.kernels.program.launch_geometry``), and nothing runs. Triton kernels
(gpurl.fusion) are listed with the signature, constexprs and warps their launchers use. tag_gridworld's CUDA C
build is added when its module is there.

Resources are sm_90's (bench/kernel_resources.py): PTX from NVVM (:func:`~gpurl.kernels.aot.cached_ptx_sm90`), Triton or NVRTC,
assembled by the CUDA toolkit's ``ptxas -v`` (:func:`~gpurl.kernels.aot.ptxas_resources`).
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import torch

import gpurl
from gpurl.envs.random_actions import RandomActions, action_columns
from gpurl.kernels.aot import cached_ptx_sm90, compile_triton_sm90
from gpurl.kernels.program import EnvKernel
from kernel_resources import SPILL_ALLOWANCE, Resources, resources_of_ptx  # noqa: F401 - re-exported

#: H100 SXM HBM3 bandwidth (bytes/s): the ceiling of a kernel that only moves its arrays once.
H100_BYTES_PER_S = 3.35e12
#: SMs of an H100 SXM (the PCIe card has 114): how many blocks one wave of a launch holds.
H100_SMS = 132
#: Rows of the fused actor's launch in the report (the issue's 1e5).
ACTOR_ROWS = 100_000


@dataclass(frozen=True)
class EnvConfig:
    """A named configuration: env ``env`` with ``params`` at ``num_envs`` envs; ``preset``: the training
    preset whose policy (frame stack, widths, activation) and rollout length the Triton rows use."""

    name: str
    env: str
    params: dict
    num_envs: int
    preset: str
    description: str


def _preset_env_params(preset: str) -> dict:
    from gpurl.train.presets import PRESETS

    return dict(PRESETS[preset]["env_params"])


ENV_CONFIGS: dict[str, EnvConfig] = {
    "tag-10v100": EnvConfig("tag-10v100", "tag_continuous", _preset_env_params("tag-10v100"), 1000, "tag-10v100",
                            "tag_continuous, 10 taggers v 100 runners, k=10 partial obs, 1000 envs"),
    "simple-tag-3v1v2": EnvConfig("simple-tag-3v1v2", "simple_tag",
                                  dict(num_adversaries=3, num_good=1, num_obstacles=2), 4096, "simple-tag",
                                  "simple_tag, 3 adversaries, 1 good, 2 obstacles, 4096 envs"),
    "grid-4": EnvConfig("grid-4", "tag_gridworld", _preset_env_params("grid-4"), 2000, "grid-4",
                        "tag_gridworld, WarpDrive's benchmark: 4 taggers, 101 x 101 cells, 2000 envs"),
}


def _scenario_configs() -> dict[str, EnvConfig]:
    from gpurl.envs.mpe import SCENARIOS

    return {f"mpe-{name}": EnvConfig(f"mpe-{name}", name, {}, 4096, "simple-tag", f"{name}, mpe2's defaults, 4096 envs")
            for name in sorted(SCENARIOS) if name != "simple_tag"}  # ENV_CONFIGS has it, at the same config


#: Every MPE scenario of the particle core at mpe2's defaults and 4096 envs (simple_tag is in ENV_CONFIGS):
#: their env kernels are checked like the report's (the compile tier), without the report's Triton rows.
SCENARIO_CONFIGS = _scenario_configs()
#: Every configuration whose env kernel the compile tier checks.
ENV_KERNEL_CONFIGS = {**ENV_CONFIGS, **SCENARIO_CONFIGS}


# ---- env kernels: recorded launches ----------------------------------------------------------------------

@dataclass
class Launch:
    """One recorded ``EnvKernel.launch``: ``phase`` is "reset" or "step" (the env call it came from)."""

    kernel: EnvKernel
    phase: str
    num_envs: int
    num_agents: int
    args: tuple
    constants: tuple = ()

    @property
    def blocks(self) -> int:
        return self.kernel.geometry(self.num_envs, self.num_agents)[0]

    @property
    def threads(self) -> int:
        return self.kernel.geometry(self.num_envs, self.num_agents)[1]

    @property
    def lanes_busy(self) -> float:
        """The fraction of a block's threads that hold an agent (an env's agents beyond its lanes stride)."""
        _, threads, lanes = self.kernel.geometry(self.num_envs, self.num_agents)
        envs_per_block = min(threads // lanes, self.num_envs)
        return envs_per_block * min(self.num_agents, lanes) / threads


@contextlib.contextmanager
def _cuda_build_on_host() -> Iterator[None]:
    """Let an env pick the CUDA build over CPU tensors (what it allows under Numba's simulator), for as long
    as the env is built and its launches recorded. The switch is read at call time by the env; numba.cuda
    is imported first so the real CUDA target, not the simulator, is what this process has."""
    import numba.cuda  # noqa: F401 - imported for its side effect (see the docstring)

    old = os.environ.get("NUMBA_ENABLE_CUDASIM")
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    try:
        yield
    finally:
        if old is None:
            del os.environ["NUMBA_ENABLE_CUDASIM"]
        else:
            os.environ["NUMBA_ENABLE_CUDASIM"] = old


def random_actions(env, generator: torch.Generator) -> torch.Tensor:
    """Uniform actions [E, N, columns] for every group of ``env`` (the dtype ``env.step`` takes)."""
    parts = []
    for group in env.groups.values():
        n = len(range(env.num_agents)[group.agents])
        draw = RandomActions(group.action_space, env.device)
        parts.append(draw((env.num_envs, n, action_columns(group.action_space)), generator))
    return torch.cat(parts, dim=1)


@contextlib.contextmanager
def recording(run_kernels: bool = False) -> Iterator[Callable[[str], list[Launch]]]:
    """Record every ``EnvKernel.launch`` while active; yields ``start(phase)``, which tags the launches that
    follow with ``phase`` and returns the shared list. run_kernels: also launch them (a CPU env)."""
    launches: list[Launch] = []
    phase = ["?"]
    original = EnvKernel.launch

    def record(kernel, target, num_envs, num_agents, *args, **options):
        launches.append(Launch(kernel, phase[0], num_envs, num_agents, args, tuple(options.get("constants", ()))))
        if run_kernels:
            original(kernel, target, num_envs, num_agents, *args, **options)

    def start(name: str) -> list[Launch]:
        phase[0] = name
        return launches

    EnvKernel.launch = record
    try:
        yield start
    finally:
        EnvKernel.launch = original


def record_launches(config: EnvConfig, num_envs: int | None = None) -> tuple[object, list[Launch]]:
    """(env, launches) of one ``reset()`` and one ``step()`` of ``config``'s env with the CUDA target, on
    host memory, at ``num_envs`` (default the configuration's): nothing runs."""
    with _cuda_build_on_host(), recording() as start:
        env = gpurl.make(config.env, num_envs=num_envs or config.num_envs, device="cpu", target="cuda",
                         seed=0, validate=False, **config.params)
        start("reset")
        env.reset()
        launches = start("step")
        env.step(random_actions(env, torch.Generator().manual_seed(0)))
    return env, launches


def arrays(value, path: str = "") -> Iterator[tuple[str, np.ndarray]]:
    """(path, array) of every array in a kernel argument (arrays, scalars, (named) tuples of them)."""
    if isinstance(value, np.ndarray):
        yield path, value
    elif isinstance(value, tuple):
        names = getattr(value, "_fields", None) or [str(k) for k in range(len(value))]
        for name, item in zip(names, value):
            yield from arrays(item, f"{path}.{name}" if path else name)


def distinct_arrays(args: tuple) -> dict[str, np.ndarray]:
    """path -> array of ``args``, each buffer once (the first path that names it)."""
    seen, out = set(), {}
    for path, a in arrays(tuple(args)):
        key = (a.__array_interface__["data"][0], a.nbytes)
        if key not in seen:
            seen.add(key)
            out[path] = a
    return out


# ---- resources -------------------------------------------------------------------------------------------

def launch_resources(launch: Launch, ptxas: str | None = None) -> Resources:
    """sm_90 resources of a recorded env-kernel launch (its exact argument types and constants)."""
    return resources_of_ptx(cached_ptx_sm90(launch.kernel, launch.args, launch.constants), ptxas=ptxas)


# ---- Triton kernels --------------------------------------------------------------------------------------

@dataclass
class TritonLaunch:
    """A Triton kernel as its launcher calls it: ``programs`` blocks of ``num_warps`` warps over ``items``
    agent-steps (actor: rows; GAE: T x E x N), reading ``bytes_read`` and writing ``bytes_written``."""

    name: str
    config: str
    fn: object
    signature: dict
    constexprs: dict
    num_warps: int
    programs: int
    items: int
    bytes_read: int
    bytes_written: int
    detail: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def threads(self) -> int:
        return 32 * self.num_warps


def _policies(config: EnvConfig, env) -> dict[str, object]:
    """Distinct policies (by packed shape) the training preset builds for ``env``'s groups: key -> PPO's
    ActorCritic, built as the trainer builds it."""
    from gymnasium.spaces import Box

    from gpurl.algos.nets import ActorCritic
    from gpurl.train.config import build_config

    cfg = build_config(config.preset)
    out = {}
    for name, group in env.groups.items():
        if isinstance(group.action_space, Box):
            continue  # Box groups act through the compiled torch definition, not the fused kernel
        p = cfg.algo_params
        policy = ActorCritic(group.obs_dim * p.frame_stack, group.action_space, p.hidden, p.activation, p.norm_obs,
                             torch.Generator().manual_seed(0))
        out.setdefault((policy.in_dim, tuple(policy.dist.nvec)), (name, policy))
    return dict(out.values())


def packed_actor_launch(kernel, signature: dict, constexprs: dict, config: EnvConfig, p, rows: int, per_launch: int,
                        written: int, detail: str, extra: dict) -> TritonLaunch:
    """A fused actor's launch over ``rows`` rows of the packed policy ``p``. Each row's input is read once;
    the weights and ``per_launch`` more bytes (step, seed, ...) once per launch (every program reads them; L2
    serves the repeats); ``written`` bytes in all."""
    from gpurl.fusion.actor import launch_warps

    weights = sum(t.numel() * t.element_size() for t in p.tensors() if isinstance(t, torch.Tensor))
    read = rows * p.in_dim * 4 + weights + per_launch
    return TritonLaunch(kernel.__name__, config.name, kernel, signature, constexprs, launch_warps(p),
                        -(-rows // constexprs["BLOCK_B"]), rows, read, written, f"{detail}, {rows:.0e} rows", extra)


def actor_launch(config: EnvConfig, group: str, policy, rows: int = ACTOR_ROWS) -> TritonLaunch:
    """The fused actor over ``rows`` rows of ``policy`` (the preset's policy for ``group``)."""
    from gpurl.fusion.actor import ACTOR_SM90_SIGNATURE, actor_constexprs, actor_fused_kernel
    from gpurl.fusion.packing import PackedPolicy

    p = PackedPolicy(policy, policy.activation)
    # Per row: action (int64 per head), log-prob and value written; per launch: step and seed read.
    return packed_actor_launch(actor_fused_kernel, ACTOR_SM90_SIGNATURE, actor_constexprs(p), config, p, rows, 8 + 16,
                               rows * (8 * p.heads + 4 + 4),
                               f"{group} policy: in {p.in_dim}, heads {p.nvec}, hidden {p.HP} x {p.layers}",
                               dict(policy=policy, packed=p))


def _widths(policy) -> list[int]:
    """The hidden widths of ``policy``'s actor MLP (what the other families build their networks with)."""
    return [m.out_features for m in policy.actor if isinstance(m, torch.nn.Linear)][:-1]


def gru_actor_launch(config: EnvConfig, group: str, policy, rows: int = ACTOR_ROWS) -> TritonLaunch:
    """The fused recurrent actor step over ``rows`` rows of ``policy`` made recurrent (the GRU after its
    first layer, no critic: what a recurrent algorithm's actor runs for ``group``)."""
    from gymnasium.spaces import Discrete, MultiDiscrete

    from gpurl.algos.nets import ActorCritic
    from gpurl.fusion.gru_actor import (GRU_ACTOR_SM90_SIGNATURE, gru_actor_constexprs, gru_actor_fused_kernel,
                                        gru_launch_warps)
    from gpurl.fusion.packing import PackedRecurrentPolicy

    nvec = policy.dist.nvec
    space = MultiDiscrete(nvec) if len(nvec) > 1 else Discrete(nvec[0])
    recurrent = ActorCritic(policy.in_dim, space, _widths(policy), policy.activation, hasattr(policy.obs_norm, "mean"),
                            torch.Generator().manual_seed(0), recurrent=True, critic=False)
    p = PackedRecurrentPolicy(recurrent, recurrent.activation)
    constexprs = gru_actor_constexprs(p)
    weights = sum(t.numel() * t.element_size() for t in p.tensors())
    # Each row: its input and carried state read once, its env's starts flag at most once (a byte), its
    # action, log-prob and new state written once; weights once per launch (L2 serves the repeats).
    read = rows * ((p.in_dim + p.hidden_size) * 4 + 1) + weights + 8 + 16
    written = rows * (8 * p.heads + 4 + 4 * p.hidden_size)
    return TritonLaunch("gru_actor_fused_kernel", config.name, gru_actor_fused_kernel, GRU_ACTOR_SM90_SIGNATURE,
                        constexprs, gru_launch_warps(p), -(-rows // constexprs["BLOCK_B"]), rows, read, written,
                        f"{group} policy made recurrent: in {p.in_dim}, heads {p.nvec}, GRU {p.hidden_size}, "
                        f"hidden {p.HP} x {p.head_layers} after it, {rows:.0e} rows",
                        dict(policy=recurrent, packed=p))


def q_actor_launch(config: EnvConfig, group: str, policy, rows: int = ACTOR_ROWS) -> TritonLaunch:
    """The fused epsilon-greedy actor over ``rows`` rows of the Q-network iql, vdn and qmix build for
    ``group`` (``policy``'s input, widths and activation; its one Discrete head as the actions)."""
    from gymnasium.spaces import Discrete

    from gpurl.algos.q_nets import QNetwork
    from gpurl.fusion.q_actor import Q_ACTOR_SM90_SIGNATURE, pack_q_network, q_actor_constexprs, q_actor_fused_kernel

    (actions,) = policy.dist.nvec
    net = QNetwork(policy.in_dim, Discrete(actions), _widths(policy), policy.activation,
                   torch.Generator().manual_seed(0))
    p = pack_q_network(net.net, actions, policy.activation)
    # Per row: the action (int64) written; per launch: step, seed and epsilon read.
    return packed_actor_launch(q_actor_fused_kernel, Q_ACTOR_SM90_SIGNATURE, q_actor_constexprs(p), config, p, rows,
                               8 + 16 + 4, rows * 8,
                               f"{group} Q-network: in {p.in_dim}, {actions} actions, hidden {p.HP} x {p.layers}",
                               dict(policy=net, packed=p))


def box_actor_launch(config: EnvConfig, group: str, policy, kind: str, rows: int = ACTOR_ROWS) -> TritonLaunch:
    """The fused Box actor over ``rows`` rows of the policy the off-policy Box algorithms build for ``group``
    (``policy``'s input, widths and activation), ``kind`` "deterministic" (maddpg, iddpg, matd3: exploration noise)
    or "squashed" (masac, isac: a sample), in the Box(0, 1, (n,)) of an MPE group of ``policy``'s Discrete(n)."""
    from gymnasium.spaces import Box

    from gpurl.algos.box_nets import DeterministicActor, SquashedGaussianActor
    from gpurl.fusion.box_actor import (BOX_ACTOR_SM90_SIGNATURE, box_actor_constexprs, box_actor_fused_kernel,
                                        pack_box_policy)

    (dims,) = policy.dist.nvec
    cls = {"deterministic": DeterministicActor, "squashed": SquashedGaussianActor}[kind]
    actor = cls(policy.in_dim, Box(0.0, 1.0, (dims,)), _widths(policy), policy.activation,
                torch.Generator().manual_seed(0))
    p = pack_box_policy(actor.net, dims, actor.outputs_per_dim, policy.activation)
    # Per row: the actions (float32) written; per launch: the Box's bounds, step, seed and std read.
    return packed_actor_launch(box_actor_fused_kernel, BOX_ACTOR_SM90_SIGNATURE, box_actor_constexprs(p, noise=True),
                               config, p, rows, 2 * 4 * dims + 8 + 16 + 4, rows * 4 * dims,
                               f"{group} {kind} Box policy: in {p.in_dim}, Box({dims}), hidden {p.HP} x {p.layers}",
                               dict(policy=actor, packed=p))


def gae_launch(config: EnvConfig, num_agents: int) -> TritonLaunch:
    """The fused GAE scan over the preset's rollout (T x E x N columns) of ``config``."""
    from gpurl.fusion.gae import GAE_BLOCK, GAE_NUM_WARPS, GAE_SM90_SIGNATURE, gae_fused_kernel
    from gpurl.train.config import build_config

    T, E, N = build_config(config.preset).rollout_len, config.num_envs, num_agents
    M = E * N
    read = 4 * T * M + 4 * (T + 1) * M + 4 * T * M + 2 * T * E  # reward, value, final value, flags
    written = 2 * 4 * T * M                                        # advantages, returns
    return TritonLaunch("gae_fused_kernel", config.name, gae_fused_kernel, GAE_SM90_SIGNATURE, {"BLOCK": GAE_BLOCK},
                        GAE_NUM_WARPS, -(-M // GAE_BLOCK), T * M, read, written,
                        f"T={T} x {E} envs x {N} agents", dict(T=T, E=E, N=N))


def triton_launches(config: EnvConfig, env) -> list[TritonLaunch]:
    """The fused actor, the recurrent one and (for Discrete groups) the epsilon-greedy one and the Box ones, each
    for every distinct policy of the preset over ACTOR_ROWS rows, and GAE for ``config``."""
    policies = _policies(config, env)
    found = [actor_launch(config, group, policy) for group, policy in policies.items()]
    found += [gru_actor_launch(config, group, policy) for group, policy in policies.items()]
    found += [q_actor_launch(config, group, policy) for group, policy in policies.items()
              if len(policy.dist.nvec) == 1]  # the value-based algorithms act in Discrete spaces
    # The off-policy Box algorithms' actors, where a Discrete(n) group has a Box(0, 1, (n,)) counterpart (MPE's
    # continuous_actions=True).
    from gpurl.envs.mpe import SCENARIOS

    if config.env in SCENARIOS:
        found += [box_actor_launch(config, group, policy, kind) for group, policy in policies.items()
                  if len(policy.dist.nvec) == 1 for kind in ("deterministic", "squashed")]
    return found + [gae_launch(config, env.num_agents)]


_triton_cache: dict[tuple, object] = {}


def triton_resources(launch: TritonLaunch, ptxas: str | None = None) -> Resources:
    """sm_90 resources of a Triton launch: ptxas -v on the PTX Triton emits (registers, spills) and the
    dynamic shared memory Triton launches it with."""
    key = (launch.name, tuple(sorted(launch.constexprs.items())), launch.num_warps)
    if key not in _triton_cache:
        _triton_cache[key] = compile_triton_sm90(launch.fn, launch.signature, launch.constexprs,
                                                 num_warps=launch.num_warps)
    compiled = _triton_cache[key]
    return resources_of_ptx(compiled.asm["ptx"], launch.name, int(compiled.metadata.shared), ptxas)


# ---- CUDA C ------------------------------------------------------------------------------------------------

def cuda_c_kernels() -> dict[str, tuple[Path, str]]:
    """env name -> (CUDA C source, kernel name) of the envs with a CUDA C build (a block per env,
    ``block_size(agents)`` threads, over the same buffers as the Numba kernel)."""
    try:
        from gpurl.envs.tag_gridworld.cuda_c import KERNEL, SOURCE
    except ImportError:
        return {}
    return {"tag_gridworld": (Path(SOURCE), KERNEL)}


def cuda_c_resources(source: Path, kernel: str, ptxas: str | None = None) -> Resources:
    from gpurl.kernels.cuda_c import compile_cuda_c_sm90

    return resources_of_ptx(compile_cuda_c_sm90(path=source, compiler="nvrtc"), kernel, ptxas=ptxas)
