"""Counter-based uniforms for action sampling, one definition in torch and in Triton.

u(seed, agent, step, head) in [0, 1): a 32-bit integer hash (Wellons' "lowbias32" finaliser) of the
key, chained over its parts, then the top 24 bits as a float32. Keyed by the global agent id and the
global step, the draw of an agent does not depend on batch layout, launch geometry or device count;
the torch twin (int64 arithmetic masked to 32 bits) gives the same bits, so the fused kernel and the
torch path sample identical actions.
"""
from __future__ import annotations

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
