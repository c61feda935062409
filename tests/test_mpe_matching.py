"""The device assignment solver of simple_line / simple_formation (gpurl/envs/mpe/matching.py) against
scipy.optimize.linear_sum_assignment, the solver mpe2 calls: random cost matrices, with and without ties.

The minimum cost must match (exactly where float32 sums are exact, to rounding otherwise); on ties the
assignment may differ from scipy's, but must be a permutation reaching that cost.
"""
from __future__ import annotations

import numba
import numpy as np
import pytest

scipy_optimize = pytest.importorskip("scipy.optimize")

from gpurl.envs.mpe.matching import assignment_solve  # noqa: E402

pytestmark = pytest.mark.cpu

_solve = assignment_solve.build("cpu")


@numba.njit
def _solve_all(costs, rows):
    """Solve every [n, n] matrix of ``costs`` [B, n, n]; ``rows[b, j]`` = 0-based row of column j."""
    n = costs.shape[1]
    u = np.zeros(n + 1, np.float32)
    v = np.zeros(n + 1, np.float32)
    minv = np.zeros(n + 1, np.float32)
    row = np.zeros(n + 1, np.int32)
    way = np.zeros(n + 1, np.int32)
    used = np.zeros(n + 1, np.bool_)
    for b in range(costs.shape[0]):
        _solve(costs[b], n, u, v, minv, row, way, used)
        for j in range(n):
            rows[b, j] = row[j + 1] - 1


def solve(costs: np.ndarray) -> np.ndarray:
    """0-based row of each column, per matrix of ``costs`` float32 [B, n, n]."""
    rows = np.full(costs.shape[:2], -1, np.int32)
    _solve_all(np.ascontiguousarray(costs, np.float32), rows)
    return rows


def check(costs: np.ndarray, rtol: float) -> None:
    n = costs.shape[1]
    rows = solve(costs)
    for b, cost in enumerate(costs):
        assert sorted(rows[b]) == list(range(n)), f"matrix {b}: not a permutation: {rows[b]}"
        ours = float(cost.astype(np.float64)[rows[b], np.arange(n)].sum())
        r, col = scipy_optimize.linear_sum_assignment(cost.astype(np.float64))
        best = float(cost.astype(np.float64)[r, col].sum())
        assert abs(ours - best) <= rtol * max(1.0, abs(best)), f"matrix {b} (n={n}): {ours} vs scipy's {best}\n{cost}"


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 12])
def test_random_costs_reach_scipys_minimum(n):
    gen = np.random.default_rng(n)
    check(gen.random((300, n, n), dtype=np.float32) * 3, rtol=1e-6)
    # distances of points to targets, as the scenarios pass them
    pts, tgt = gen.uniform(-1, 1, (300, n, 1, 2)), gen.uniform(-1, 1, (300, 1, n, 2))
    check(np.linalg.norm(pts - tgt, axis=-1).astype(np.float32), rtol=1e-6)


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_ties_reach_the_exact_minimum(n):
    """Small integer costs (many equal entries and many optimal assignments): float32 is exact there, so
    the minimum must be scipy's exactly."""
    gen = np.random.default_rng(100 + n)
    check(gen.integers(0, 3, (400, n, n)).astype(np.float32), rtol=0)
    # every assignment optimal: constant, and cost[i, j] = a_i + b_j
    a, b = gen.integers(0, 5, (50, n, 1)), gen.integers(0, 5, (50, 1, n))
    check((a + b).astype(np.float32), rtol=0)
    check(np.ones((3, n, n), np.float32), rtol=0)
    # duplicated rows and columns
    cost = gen.integers(0, 9, (50, n, n)).astype(np.float32)
    cost[:, 1] = cost[:, 0]
    cost[:, :, -1] = cost[:, :, 0]
    check(cost, rtol=0)


def test_nan_costs_still_give_a_permutation():
    """A diverged state (NaN positions) must not hang the kernel: the search still ends."""
    cost = np.full((2, 4, 4), np.nan, np.float32)
    cost[1, 2] = 1.0
    rows = solve(cost)
    for b in range(2):
        assert sorted(rows[b]) == [0, 1, 2, 3]
