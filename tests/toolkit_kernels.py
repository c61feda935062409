"""Small throwaway kernels that exercise the kernel toolkit, shared by the compile, sim and gpu tiers.

Each kernel comes with a way to make its arguments and, where it computes something, a NumPy reference
written by hand. Values are chosen so that float32 sums are exact (small integers), so every backend
must agree *exactly* regardless of summation order; RNG outputs are exact by construction.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from gpurl.kernels.math32 import cos32
from gpurl.kernels.program import EnvKernel, per_agent, per_env
from gpurl.kernels.rng import random_below, random_u32, random_uniform
from gpurl.kernels.rng import random_below_ref, random_u32_ref, random_uniform_ref
from gpurl.kernels.targets import device

_TWO_PI = np.float32(2.0 * math.pi)

# ---- one phase, plain array write ---------------------------------------------------------------------


def _double(e, i, x):
    x[e, i] = x[e, i] * np.float32(2)


double_kernel = EnvKernel("double", [per_agent(_double)], nargs=1)

# ---- one phase calling a gpurl device function -----------------------------------------------------------


@device
def _affine(v, scale):
    return v * scale + np.float32(1)


def _apply_affine(e, i, x, scale):
    x[e, i] = _affine(x[e, i], scale)


affine_kernel = EnvKernel("affine", [per_agent(_apply_affine)], nargs=2)

# ---- build constants: a global fixed per build, read through a nested device function ------------------

TOOLKIT_FIXED_WIDTH = 0  # 0: the run-time width (out.shape[1])


@device
def _width(n):
    return TOOLKIT_FIXED_WIDTH if TOOLKIT_FIXED_WIDTH > 0 else n


def _write_width(e, i, out):
    out[e, i] = np.float32(_width(out.shape[1]) * 10 + i)


width_kernel = EnvKernel("width", [per_agent(_write_width)], nargs=1)


def width_ref(num_envs: int, num_agents: int, width: int) -> np.ndarray:
    return np.broadcast_to(np.float32(width * 10) + np.arange(num_agents, dtype=np.float32),
                           (num_envs, num_agents)).copy()

# ---- RNG + float32 trig (the cuda override of cos32) ---------------------------------------------------


def _random_heading(e, i, seed, counter, out):
    out[e, i] = cos32(random_uniform(seed, e, i, counter, 0) * _TWO_PI)


heading_kernel = EnvKernel("random_heading", [per_agent(_random_heading)], nargs=3)

# ---- a deliberate float64 promotion (the compile tier must catch it) -------------------------------------


def _promote(e, i, x):
    # A Python float literal promotes to float64. (0.1, not 0.5: LLVM folds the float64 round trip of
    # an exact product such as x * 0.5 back to one float32 multiply, so no .f64 would be left.)
    x[e, i] = x[e, i] * 0.1


promote_kernel = EnvKernel("promote", [per_agent(_promote)], nargs=1)

# ---- two agent phases across a barrier, then a per-env phase ---------------------------------------------


class Swarm(NamedTuple):
    """x, others float32 [E, N]; rank int32 [E, N]; total float32 [E]; count int32 [E]."""

    x: np.ndarray
    others: np.ndarray
    rank: np.ndarray
    total: np.ndarray
    count: np.ndarray


def _seed_values(e, i, s, weight):
    s.x[e, i] = np.float32((i * 7 + e * 3) % 11) * weight[e]


def _others(e, i, s, weight):
    # Reads every agent's phase-1 write: wrong without the barrier, or if striding skipped agents.
    # Writes go to other arrays: x is read by all agents of the env during this phase.
    acc = np.float32(0)
    below = 0
    for j in range(s.x.shape[1]):
        acc += s.x[e, j]
        below += s.x[e, j] < s.x[e, i]
    s.rank[e, i] = below
    s.others[e, i] = acc - s.x[e, i]


def _per_env_total(e, s, weight):
    acc = np.float32(0)
    n = 0
    for j in range(s.others.shape[1]):
        acc += s.others[e, j]
        n += s.rank[e, j] == 0
    s.total[e] = acc
    s.count[e] = n


swarm_kernel = EnvKernel(
    "swarm", [per_agent(_seed_values), per_agent(_others), per_env(_per_env_total)], nargs=2
)


def swarm_args(num_envs: int, num_agents: int) -> tuple[Swarm, np.ndarray]:
    """Zeroed Swarm state and weight float32 [E] (small integers: every sum is exact in float32)."""
    state = Swarm(
        x=np.zeros((num_envs, num_agents), np.float32),
        others=np.zeros((num_envs, num_agents), np.float32),
        rank=np.full((num_envs, num_agents), -1, np.int32),
        total=np.zeros(num_envs, np.float32),
        count=np.zeros(num_envs, np.int32),
    )
    weight = (np.arange(num_envs, dtype=np.float32) % 3) + np.float32(1)
    return state, weight


def swarm_ref(num_envs: int, num_agents: int) -> Swarm:
    """NumPy reference of :data:`swarm_kernel` from zeroed :func:`swarm_args`."""
    e = np.arange(num_envs)[:, None]
    i = np.arange(num_agents)[None, :]
    weight = (np.arange(num_envs, dtype=np.float32) % 3) + np.float32(1)
    x = ((i * 7 + e * 3) % 11).astype(np.float32) * weight[:, None]
    rank = (x[:, None, :] < x[:, :, None]).sum(axis=2).astype(np.int32)
    others = x.sum(axis=1, keepdims=True) - x
    count = (rank == 0).sum(axis=1).astype(np.int32)
    return Swarm(x=x, others=others, rank=rank, total=others.sum(axis=1), count=count)


# ---- every RNG entry point ---------------------------------------------------------------------------------


def _draw(e, i, seed, counter, u32, uniform, below):
    for s in range(u32.shape[2]):
        u32[e, i, s] = random_u32(seed, e, i, counter, s)
        uniform[e, i, s] = random_uniform(seed, e, i, counter, s)
        below[e, i, s] = random_below(seed, e, i, counter, s, s + 2)


rng_kernel = EnvKernel("draw", [per_agent(_draw)], nargs=5)


def rng_args(num_envs: int, num_agents: int, streams: int, seed: int, counter: int) -> tuple:
    """(seed uint64, counter int64, u32 uint32 [E,N,S], uniform float32 [E,N,S], below int32 [E,N,S])."""
    shape = (num_envs, num_agents, streams)
    return (
        np.uint64(seed),
        np.int64(counter),
        np.zeros(shape, np.uint32),
        np.zeros(shape, np.float32),
        np.zeros(shape, np.int32),
    )


def rng_ref(num_envs: int, num_agents: int, streams: int, seed: int, counter: int) -> tuple:
    """(u32, uniform, below) from the NumPy references in gpurl.kernels.rng."""
    e, i, s = np.meshgrid(np.arange(num_envs), np.arange(num_agents), np.arange(streams), indexing="ij")
    seed = np.uint64(seed)
    return (
        random_u32_ref(seed, e, i, counter, s),
        random_uniform_ref(seed, e, i, counter, s),
        random_below_ref(seed, e, i, counter, s, s + 2),
    )
