"""Agents matched to target positions: mpe2's ``scipy.optimize.linear_sum_assignment`` on the device.

simple_line and simple_formation (mpe2 1.1.1) place N target positions, match the agents to them by a
minimum-cost bipartite matching of the N x N distance matrix and give every agent the same reward, minus the
mean matched distance (docs/specs/mpe.md). A scenario's params extend :class:`MatchingParams` (mpe2's ``N``
and ``terminate_on_success``); the scenario declares :func:`matching_scratch`, writes its targets
into ``s.target[e]`` in a per-agent phase (row i: target i), then runs :func:`target_cost_phase` (per agent:
its distances to every target) and :func:`target_reward_phase` (per env: solve, reward, end the step).

The matching is the Hungarian algorithm with potentials (:func:`assignment_solve`: the O(n^3)
shortest-augmenting-path form of Kuhn-Munkres, as in Jonker-Volgenant's solver), run by one thread per env
over the env's scratch rows: nothing is allocated. Where several assignments reach the minimum (ties) any
one may come out, scipy may pick another: mpe2's reward and end read only the minimum. In float32 the
potentials round, so the cost found is the minimum up to a few ulps of the total; on costs whose sums are
exact in float32 (small integers, say) it is the exact minimum.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...kernels.fields import field
from ...kernels.targets import device
from ..params import ranged
from .params import ParticleParams
from .phases import particle_finish

f32 = np.float32
_ZERO = f32(0.0)
_INF = f32(np.inf)
#: mpe2 clips each matched distance into [0, 2] before taking the mean.
_CLIP = f32(2.0)
#: The largest N of a matching scenario: its matching is O(N^3) work on one thread per env, and its scratch
#: N^2 floats per env (mpe2 sets no bound).
MAX_MATCHED_AGENTS = 64
#: mpe2's DIST_THRESHOLD: with terminate_on_success, an episode ends once every matched distance is below it.
SUCCESS_DISTANCE = 0.05


@dataclass(frozen=True)
class MatchingParams(ParticleParams):
    """The constructor arguments simple_line and simple_formation add to every scenario's."""

    N: int = ranged(4, ge=1, le=MAX_MATCHED_AGENTS)
    """Number of agents (mpe2's N), and of places they are matched to."""
    terminate_on_success: bool = False
    """End the episode (terminated) once every agent's matched distance to its place is below 0.05."""

    @property
    def match_slots(self) -> int:
        """N + 1: the matching's rows and columns plus its dummy column."""
        return self.N + 1


def matching_scratch() -> dict:
    """Kernel-private arrays of the matching (N + 1 slots: the dummy column 0, then N):

    - ``target`` float32 [E, N, 2]: the target positions;
    - ``match_cost`` float32 [E, N, N]: the distance of agent i (row) to target j (column);
    - ``match_u``, ``match_v`` float32 [E, N + 1]: row and column potentials (index 0: the dummy column);
    - ``match_minv`` float32 [E, N + 1]: each column's shortest reduced path in the current search;
    - ``match_row`` int32 [E, N + 1]: the row (1-based) matched to column j (1-based), 0 for none;
    - ``match_way`` int32 [E, N + 1]: the previous column on the shortest path to column j;
    - ``match_used`` bool [E, N + 1]: column j is in the current search tree.
    """
    return {"target": field("float32", "agents", 2), "match_cost": field("float32", "agents", "agents"),
            "match_u": field("float32", "match_slots"), "match_v": field("float32", "match_slots"),
            "match_minv": field("float32", "match_slots"), "match_row": field("int32", "match_slots"),
            "match_way": field("int32", "match_slots"), "match_used": field("bool", "match_slots")}


def matching_constants(terminate_on_success: bool) -> dict:
    """The kernel constants :func:`target_reward_phase` reads."""
    return dict(terminate_on_success=np.int32(bool(terminate_on_success)),
                success_distance=f32(SUCCESS_DISTANCE))


@device
def assignment_solve(cost, n, u, v, minv, row, way, used):
    """Minimum-cost perfect matching of the n x n matrix ``cost`` (float32 [n, n]): on return ``row[j]``
    (j = 1..n) is the 1-based row matched to 1-based column j. ``u``, ``v``, ``minv`` (float32 [n + 1]),
    ``row``, ``way`` (int32 [n + 1]) and ``used`` (bool [n + 1]) are scratch; column 0 is the dummy column
    each row's search starts from.

    Rows join one at a time; each grows a shortest-path tree over the columns (reduced costs
    cost[i, j] - u[i] - v[j] >= 0) until it reaches a free column, then flips the path. The next column is
    always an unused one (the first unused column when no reduced cost compares below infinity, as with NaN
    costs), so a search ends within n columns whatever the arithmetic does.
    """
    for j in range(n + 1):
        u[j] = _ZERO
        v[j] = _ZERO
        row[j] = 0
        way[j] = 0
    for i in range(1, n + 1):
        row[0] = i
        j0 = 0
        for j in range(n + 1):
            minv[j] = _INF
            used[j] = False
        while True:
            used[j0] = True
            i0 = row[j0]
            ui0 = u[i0]
            delta = _INF
            j1 = 0
            for j in range(1, n + 1):
                if not used[j]:
                    reduced = cost[i0 - 1, j - 1] - ui0 - v[j]
                    if reduced < minv[j]:
                        minv[j] = reduced
                        way[j] = j0
                    if j1 == 0 or minv[j] < delta:
                        delta = minv[j]
                        j1 = j
            for j in range(n + 1):
                if used[j]:
                    u[row[j]] += delta
                    v[j] -= delta
                else:
                    minv[j] -= delta
            j0 = j1
            if row[j0] == 0:
                break
        while j0 != 0:  # flip the augmenting path, back to the dummy column
            j1 = way[j0]
            row[j0] = row[j1]
            j0 = j1


def target_cost_phase(e, i, s, c, actions):
    """Agent i's row of the cost matrix: its distance to every target (mpe2's np.linalg.norm)."""
    px = s.pos[e, i, 0]
    py = s.pos[e, i, 1]
    for j in range(s.target.shape[1]):
        dx = px - s.target[e, j, 0]
        dy = py - s.target[e, j, 1]
        s.match_cost[e, i, j] = math.sqrt(dx * dx + dy * dy)


def target_reward_phase(e, s, c, actions):
    """Match agents to targets over ``s.match_cost[e]``, give every agent mpe2's shared reward
    -mean clip(d, 0, 2) over the matched distances d (mpe2's local_ratio 0: the global reward alone), and
    end the step: terminal with ``terminate_on_success`` when every matched distance is below 0.05."""
    cost = s.match_cost[e]
    row = s.match_row[e]
    n = cost.shape[0]
    assignment_solve(cost, n, s.match_u[e], s.match_v[e], s.match_minv[e], row, s.match_way[e], s.match_used[e])
    total = _ZERO
    success = True
    for j in range(1, n + 1):
        d = cost[row[j] - 1, j - 1]
        total += min(max(d, _ZERO), _CLIP)
        success = success and d < c.success_distance
    reward = -(total / f32(n))
    for i in range(n):
        s.reward[e, i] = reward
    particle_finish(e, s, c, c.terminate_on_success != 0 and success)
