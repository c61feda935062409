"""Counter-based uniforms for action sampling, one definition in torch, in Triton and in Numba.

u(seed, agent, step, head) in [0, 1): a 32-bit integer hash (Wellons' "lowbias32" finaliser) of the
key, chained over its parts, then the top 24 bits as a float32. Keyed by the global agent id and the
global step, the draw of an agent does not depend on batch layout, launch geometry or device count;
the torch twin (int64 arithmetic masked to 32 bits) and the Numba one (:func:`uniform`, uint64 masked
to 32 bits, for the CPU's sampling call) give the same bits, so the fused kernel, the CPU path and the
torch reference sample identical actions.
"""
from __future__ import annotations

import numba
import numpy as np
import torch

MASK32 = 0xFFFFFFFF
MUL1, MUL2 = 0x7FEB352D, 0x846CA68B
GOLDEN = 0x9E3779B9
INV_2_24 = 1.0 / (1 << 24)


def mix32_ref(x: torch.Tensor) -> torch.Tensor:
    """lowbias32 on int64 tensors holding values in [0, 2**32)."""
    x = x ^ (x >> 16)
    x = (x * MUL1) & MASK32
    x = x ^ (x >> 15)
    x = (x * MUL2) & MASK32
    return x ^ (x >> 16)


def uniform_ref(seed: int, agent: torch.Tensor, step: torch.Tensor, head: int | torch.Tensor) -> torch.Tensor:
    """float32 uniforms in [0, 1), shape of ``agent`` (int64 global agent ids) broadcast with ``head``
    (an int, or an int64 tensor of head indices); ``step`` int64 scalar tensor."""
    seed_lo, seed_hi = seed & MASK32, (seed >> 32) & MASK32
    x = mix32_ref(((step & MASK32) * GOLDEN + head) & MASK32)
    x = mix32_ref((agent & MASK32) ^ x)
    x = mix32_ref(x ^ seed_hi)
    x = mix32_ref(x ^ seed_lo)
    return (x >> 8).to(torch.float32) * INV_2_24


def split_seed(seed: int) -> tuple[int, int]:
    """(low, high) 32-bit halves of a 64-bit seed, as the Triton kernel takes them."""
    return seed & MASK32, (seed >> 32) & MASK32


_MASK, _MUL1, _MUL2, _GOLDEN = np.uint64(MASK32), np.uint64(MUL1), np.uint64(MUL2), np.uint64(GOLDEN)
_S8, _S15, _S16 = np.uint64(8), np.uint64(15), np.uint64(16)
_INV_2_24 = np.float32(INV_2_24)


@numba.njit(inline="always")
def _mix32(x):
    """mix32_ref's arithmetic on a uint64 holding a 32-bit value."""
    x = x ^ (x >> _S16)
    x = (x * _MUL1) & _MASK
    x = x ^ (x >> _S15)
    x = (x * _MUL2) & _MASK
    return x ^ (x >> _S16)


@numba.njit(inline="always")
def uniform(seed_lo, seed_hi, agent, step, head):
    """uniform_ref(seed, agent, step, head) for one draw, in Numba (all arguments uint64; the seed as
    :func:`split_seed` halves)."""
    x = _mix32(((step & _MASK) * _GOLDEN + head) & _MASK)
    x = _mix32((agent & _MASK) ^ x)
    x = _mix32(x ^ seed_hi)
    x = _mix32(x ^ seed_lo)
    return np.float32(x >> _S8) * _INV_2_24
