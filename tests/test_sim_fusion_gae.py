"""Sim tier: the fused Triton GAE kernel under TRITON_INTERPRET=1 against gae_ref.

Irregular [T, E, N] (M = E * N not a multiple of the block) with terminations and truncations crossing
the rollout. The interpreter costs per program, so the default block (one program here) is used, plus a
small block for the several-programs / masked-tail path.
"""
from __future__ import annotations

import pytest
import torch

from gpurl.fusion import GAE_BLOCK, gae, gae_ref, gae_triton

pytestmark = pytest.mark.sim

SHAPES = [(13, 7, 5), (5, 3, 37)]
DISCOUNTS = [(0.99, 0.95), (0.9, 1.0)]


def rollout(T, E, N, seed):
    g = torch.Generator().manual_seed(seed)
    reward = torch.randn(T, E, N, generator=g) * 3
    value = torch.randn(T + 1, E, N, generator=g)
    final_value = torch.randn(T, E, N, generator=g) * 5
    ended = torch.rand(T, E, generator=g) < 0.35
    ended[0, 0] = ended[T - 1, E - 1] = True          # an end at both rollout edges
    truncated = ended & (torch.rand(T, E, generator=g) < 0.5)
    truncated[T - 1, E - 1] = True
    terminated = ended & ~truncated                   # never both in one row
    assert terminated.any() and truncated.any() and (~ended).any()
    return reward, value, final_value, terminated, truncated


def assert_matches_reference(got, args, gamma, lam):
    want = gae_ref(*args, gamma, lam)
    for g_, w in zip(got, want):
        assert g_.shape == w.shape and g_.dtype == torch.float32
        torch.testing.assert_close(g_, w, rtol=0, atol=1e-5)


@pytest.mark.parametrize("gamma,lam", DISCOUNTS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_kernel_matches_reference(shape, gamma, lam):
    assert shape[1] * shape[2] < GAE_BLOCK              # one program, masked tail
    args = rollout(*shape, seed=sum(shape))
    assert_matches_reference(gae_triton(*args, gamma, lam), args, gamma, lam)


def test_several_programs_with_a_partial_last_block():
    args = rollout(13, 7, 5, seed=3)                  # M = 35: blocks of 16, 16, 3
    assert_matches_reference(gae_triton(*args, 0.99, 0.95, block=16), args, 0.99, 0.95)


def test_strided_inputs_and_the_triton_backend():
    reward, value, final_value, terminated, truncated = rollout(5, 3, 37, seed=9)
    # A [T, N, E] storage seen as [T, E, N]: gae_triton must make its own contiguous copy.
    strided = reward.transpose(1, 2).contiguous().transpose(1, 2)
    assert not strided.is_contiguous()
    args = (strided, value, final_value, terminated, truncated)
    assert_matches_reference(gae(*args, 0.9, 1.0, backend="triton"), args, 0.9, 1.0)
