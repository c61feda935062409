"""Sim tier: the fused bookkeeping kernel under TRITON_INTERPRET=1 against bookkeeping_ref, its definition.

Irregular sizes (E not a multiple of the block; groups of 3 and 1 agents and one of 5; two metrics and
none), episodes ending at several steps (terminations and truncations, some envs both at once), several
steps in a row so the running sums carry; starts, per-env sums and counts exact up to the group means'
rounding, the step counter exact.
"""
from __future__ import annotations

import pytest
import torch

from gpurl.fusion.bookkeeping import bookkeeping_ref, bookkeeping_triton

pytestmark = pytest.mark.sim


def averaging(sizes: list[int]) -> torch.Tensor:
    out = torch.zeros(sum(sizes), len(sizes))
    start = 0
    for g, n in enumerate(sizes):
        out[start:start + n, g] = 1.0 / n
        start += n
    return out


def state(E: int, C: int) -> list[torch.Tensor]:
    return [torch.zeros(E, C), torch.zeros(E, C), torch.zeros(E), torch.zeros(E, dtype=torch.bool),
            torch.tensor([41])]


@pytest.mark.parametrize("sizes,metrics,block", [([3, 1], 2, 4), ([5], 0, 128), ([2, 2, 1], 1, 8)])
def test_kernel_matches_the_reference_over_steps(sizes, metrics, block):
    E, N, G = 11, sum(sizes), len(sizes)
    C = G + 1 + metrics
    avg = averaging(sizes)
    want, got = state(E, C), state(E, C)
    g = torch.Generator().manual_seed(E * N + metrics)
    for _ in range(6):
        reward = torch.randn(E, N, generator=g)
        terminated = torch.rand(E, generator=g) < 0.3
        truncated = torch.rand(E, generator=g) < 0.2
        rows = torch.rand(metrics, E, generator=g) * 3
        bookkeeping_ref(reward, terminated, truncated, rows, avg, *want)
        bookkeeping_triton(reward, terminated, truncated, rows, avg, *got, block=block)
        assert torch.equal(got[3], want[3]) and torch.equal(got[3], terminated | truncated)
        for a, b in zip(got[:3], want[:3]):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    assert got[4].item() == want[4].item() == 47
    assert want[2].sum() > 0 and (want[0] != 0).any()  # episodes ended and others ran on


def test_metric_rows_may_be_rows_of_a_wider_block():
    """The env's metric rows are rows of its [M, E] block: any row stride."""
    E, avg = 5, averaging([2])
    block = torch.arange(3 * 8, dtype=torch.float32).view(3, 8)[:, :E]
    want, got = state(E, 4), state(E, 4)
    reward, ended, none = torch.ones(E, 2), torch.tensor([True, False, True, False, True]), torch.zeros(E, dtype=torch.bool)
    bookkeeping_ref(reward, ended, none, block[1:], avg, *want)
    bookkeeping_triton(reward, ended, none, block[1:], avg, *got)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    assert want[1][0].tolist() == [1.0, 1.0, 8.0, 16.0]
