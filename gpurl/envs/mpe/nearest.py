"""Relative positions of entities as mpe2's observations list them: all in index order, or the k nearest
(mpe2 1.1.1 ``_mpe_utils/partial_observability.py``, ``padded_relative_positions``; simple_adversary and
simple_spread).

mpe2 orders the candidates by ``np.argsort`` of their float64 distances and zero-pads to k slots. Here the
order is (float32 squared distance, then lower index): the same order up to rounding (sqrt is monotone).
Exactly tied distances (coincident or mirrored entities) are the one difference: numpy's default argsort is
not stable (its AVX-512 sort reorders ties even among 4 values), so mpe2's order of ties depends on the
machine, and gpurl's puts the lower index first.

The selection repeats a minimum search k times, O(k M) per observer with no scratch memory, like the exact
fallback of :mod:`gpurl.kernels.neighbors`. That module's ``k_nearest`` serves large agent crowds held as
separate x / y arrays with per-lane scratch; MPE observers pick among a few landmarks or agents of
``pos [E, N, 2]`` / ``landmark_pos [E, L, 2]``, so this is smaller and faster there.
"""
import numpy as np

from ...kernels.targets import device

f32 = np.float32
_ZERO = f32(0.0)
_INF = f32(np.inf)
_BEFORE_ALL = f32(-1.0)  # a squared distance smaller than any: the search starts before every candidate


@device
def nearest_after(points, num_points, px, py, skip, prev_d2, prev_j):
    """(d2, j): the point j != skip of ``points[:num_points]`` ([M, 2]) that comes next after (prev_d2, prev_j)
    in (squared distance to (px, py), index) order; j = -1 when none is left."""
    best_d2 = _INF
    best_j = -1
    for j in range(num_points):
        if j != skip:
            dx = points[j, 0] - px
            dy = points[j, 1] - py
            d2 = dx * dx + dy * dy
            after = d2 > prev_d2 or (d2 == prev_d2 and j > prev_j)
            if after and (best_j < 0 or d2 < best_d2):
                best_d2 = d2
                best_j = j
    return best_d2, best_j


@device
def observe_relative(row, col, points, num_points, skip, px, py, nearest):
    """Write points[j] - (px, py) for the points j != skip (-1: none) of ``points[:num_points]`` ([M, 2]: pass
    M as the core's accessor gives it, a literal in a fixed-world build) into row[col:]; returns the column
    after them. ``nearest`` 0: all of them in index order (mpe2's full observability);
    k > 0: the k nearest, nearest first, zeros in the slots past the last point (mpe2's
    ``padded_relative_positions``), 2k columns."""
    if nearest == 0:
        for j in range(num_points):
            if j != skip:
                row[col] = points[j, 0] - px
                row[col + 1] = points[j, 1] - py
                col += 2
        return col
    d2 = _BEFORE_ALL
    j = -1
    for slot in range(nearest):
        if slot == 0 or j >= 0:
            d2, j = nearest_after(points, num_points, px, py, skip, d2, j)
        if j >= 0:
            row[col] = points[j, 0] - px
            row[col + 1] = points[j, 1] - py
        else:
            row[col] = _ZERO
            row[col + 1] = _ZERO
        col += 2
    return col
