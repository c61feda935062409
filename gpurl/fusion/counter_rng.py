"""Counter-based uniforms for action sampling, one definition in torch with its Triton twin.

u(seed, agent, step, head) in [0, 1): a 32-bit integer hash (Wellons' "lowbias32" finaliser) of the
key, chained over its parts, then the top 24 bits as a float32. Keyed by the global agent id and the
global step, the draw of an agent does not depend on batch layout, launch geometry or device count.
The torch definition does int64 arithmetic masked to 32 bits; the fused actor kernel
(``gpurl.fusion.actor``) does the same in uint32 and gives the same bits.
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


def split_seed(seed: int) -> tuple[int, int]:
    """(low, high) 32-bit halves of a 64-bit seed."""
    return seed & MASK32, (seed >> 32) & MASK32


def seed_tensor(seed: int, device) -> torch.Tensor:
    """int64 [2]: the (low, high) halves of ``seed``, as :func:`uniform_ref` takes a seed held on the
    device (a compiled acting step then never specialises on its value)."""
    return torch.tensor(split_seed(seed), dtype=torch.int64, device=device)


def uniform_ref(seed: int | torch.Tensor, agent: torch.Tensor, step: torch.Tensor,
                head: int | torch.Tensor) -> torch.Tensor:
    """float32 uniforms in [0, 1), shape of ``agent`` (int64 global agent ids) broadcast with ``head``
    (an int, or an int64 tensor of head indices); ``step`` int64 scalar or [1] tensor; ``seed`` an int
    or a :func:`seed_tensor`."""
    if isinstance(seed, int):
        seed_lo, seed_hi = split_seed(seed)
    else:
        seed_lo, seed_hi = seed[0], seed[1]
    x = mix32_ref(((step & MASK32) * GOLDEN + head) & MASK32)
    x = mix32_ref((agent & MASK32) ^ x)
    x = mix32_ref(x ^ seed_hi)
    x = mix32_ref(x ^ seed_lo)
    return (x >> 8).to(torch.float32) * INV_2_24


__all__ = ["GOLDEN", "INV_2_24", "MASK32", "MUL1", "MUL2", "mix32_ref", "seed_tensor", "split_seed", "uniform_ref"]
