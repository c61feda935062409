"""k nearest neighbours of one agent, found by a team of threads (:mod:`.team`; a warp on CUDA).

The answer is :func:`~.neighbors.k_nearest`'s, bit for bit: the ``k`` nearest alive others in (float32
distance, index) order, -1 padded. So is the method (a radius rescaled until ``k <= count <= capacity``,
the candidates inside it gathered and ranked; the exact repeated minimum where ties defeat every radius),
but each pass is shared out: thread t takes the others t, t + team size, ... of the pass, a count is a vote of
the team (a warp's, on CUDA) that also gathers, each candidate written to the slot the vote ranks it at (so
the count that lands in range leaves its candidates in place: no gathering pass), and each candidate's rank is
computed by a thread of its own (against the others' as warp shuffles hand them round, where the candidates
are no more than the team's threads; else from the scratch). A per-agent phase has one thread pass over all N
others several times while its warp waits for the slowest lane; a team does about N / team size of that work
per agent, and an agent out of the game costs its team nothing.

On the CPU the team is one thread: the CPU build is :func:`~.neighbors.k_nearest`'s CPU version (a
vectorisable distance row, then the same count, gather and rank).

Scratch (:func:`team_knn_scratch`): one row per team (``row = team_row(e)``, :func:`~.team.team_rows` rows),
since a team holds one agent at a time; ``dist_row`` float32 [rows, N] (CPU; [rows, 1] on CUDA), ``cand_idx``
int32 / ``cand_dist`` float32 / ``out_idx`` int32 [rows, capacity + 1]. A team phase reads ``out_idx[row, :k]``
after the call, before its next.
"""
import math

import numpy as np

from .fields import Field, resolve_size
from .neighbors import (_INF, _MAX_BISECTIONS, _k_nearest_cpu, knn_scratch_shapes, next_radius, rank_of,
                        select_by_repeated_minimum, squared_between, squared_bounds, within_radius)
from .targets import device
from .team import (team_barrier, team_count, team_leader, team_range, team_rank, team_rows, team_shuffle,
                   team_size, team_tally)


def team_knn_scratch(k, out: str = "out_idx") -> dict[str, Field]:
    """The scratch fields of :func:`k_nearest_team` for ``k`` neighbours (an int or the name of a params
    attribute), one row per team (:func:`~.team.team_row`); ``out`` names the result array (the k nearest)."""
    def shape_of(name):
        def shape(env):
            rows = team_rows(env.target, env.num_envs, env.num_agents)
            return knn_scratch_shapes(env.target, rows, env.num_agents, resolve_size(env, k))[name]
        return shape

    dtypes = dict(dist_row="float32", cand_idx="int32", cand_dist="float32", out_idx="int32")
    return {(out if name == "out_idx" else name): Field(dtype, shape_of=shape_of(name))
            for name, dtype in dtypes.items()}


@device(team_only=True)
def team_count_within(x, y, alive, e, i, radius, with_total, cand_idx, cand_dist, row):
    """(eligible others within ``radius``, all eligible others) of agent ``i``, counted by the team: each
    thread decides its share of the others (a root only in :func:`~.neighbors.within_radius`'s thin band).
    The total is counted only ``with_total`` (0 otherwise): it does not change with the radius. The pass also
    gathers: the others within, in index order, and their *squared* distances go to ``cand_idx[row]`` and
    ``cand_dist[row]`` (as many as the row's capacity holds), so a count that lands in range needs no second
    pass, and only its candidates take a root. Its writes are visible to the team on return."""
    low, high = squared_bounds(radius)
    capacity = cand_idx.shape[1] - 1
    inside = 0
    total = 0
    n = x.shape[1]
    xi = x[e, i]  # once: the pass's stores to the scratch would make the compiler load it again at each chunk
    yi = y[e, i]
    base = 0
    while base < n:  # a counted loop (range's iterator costs instructions a chunk); every thread takes each pass
        j = base + team_rank()
        base += team_size()
        eligible = False
        within = False
        squared = np.float32(0.0)
        if j >= 0 and j < n:  # j >= 0 always: saying so drops Numba's negative-index wraparound from each load
            eligible = (j != i) & (alive[e, j] != 0)
            squared = squared_between(xi, yi, x[e, j], y[e, j])
            within = eligible & within_radius(squared, radius, low, high)
        before, count = team_tally(within)
        slot = inside + before
        if within and slot < capacity:
            cand_idx[row, slot] = j
            cand_dist[row, slot] = squared  # the root is taken once, for the pass that lands (k_nearest_team)
        inside += count
        if with_total:
            total += team_count(eligible)
    team_barrier()
    return inside, total


@device(team_only=True)
def rank_by_shuffles(n, cand_idx, cand_dist, out_idx, row):
    """``out_idx[row, rank] = candidate`` for the ``n`` (at most the team's size) candidates of ``row``, whose
    ``cand_dist`` holds squared distances, ranked in (distance, index) order: thread a takes the candidate at slot
    a, and compares it with the others' as the team's shuffles hand them round, with no scratch read in the
    loop (:func:`~.neighbors.rank_of` reads two slots a candidate)."""
    a = team_rank()
    mine = a < n
    d = _INF
    j = np.int32(-1)
    if mine:
        d = np.float32(math.sqrt(cand_dist[row, a]))
        j = cand_idx[row, a]
    rank = 0
    for b in range(n):  # the same n passes on every thread: the shuffles meet
        db = team_shuffle(d, b)
        jb = team_shuffle(j, b)
        rank += (db < d) | ((db == d) & (jb < j))
    if mine:
        out_idx[row, rank] = j


@device(team_only=True)
def k_nearest_team(x, y, alive, e, i, k, radius_hint, dist_row, cand_idx, cand_dist, out_idx, row):
    """Write the ``k`` nearest alive other agents of agent ``i`` (env ``e``) to ``out_idx[row, :k]``, called by
    the whole team of a team phase; arguments and result as :func:`~.neighbors.k_nearest`'s (``row``: the
    team's, :func:`~.team.team_row`). Returns how many slots hold an agent; ``out_idx`` is visible to every
    thread of the team on return."""
    capacity = cand_idx.shape[1] - 1
    radius = np.float32(radius_hint)
    low = np.float32(0.0)
    high = _INF
    inside, total = team_count_within(x, y, alive, e, i, radius, True, cand_idx, cand_dist, row)
    want = min(k, total)
    steps = 0
    while (inside < want or inside > capacity) and steps < _MAX_BISECTIONS:
        # a radius that counts too many is the bracket's top: any radius at or above the farthest inside
        # counts the same agents, and this one is such a radius
        radius, low, high = next_radius(radius, low, high, inside, want, capacity, radius)
        if not (low < radius < high):
            break
        inside, _ = team_count_within(x, y, alive, e, i, radius, False, cand_idx, cand_dist, row)
        steps += 1
    if inside < want or inside > capacity:  # ties no radius separates (rare): one thread, the exact selection
        if team_leader():
            select_by_repeated_minimum(x, y, alive, e, i, k, out_idx, row)
        team_barrier()
        return min(k, total)
    # the last count was of this radius, and it gathered all its candidates (inside <= capacity), as squares
    if inside <= team_size():
        rank_by_shuffles(inside, cand_idx, cand_dist, out_idx, row)
    else:
        for a in team_range(inside):
            cand_dist[row, a] = np.float32(math.sqrt(cand_dist[row, a]))
        team_barrier()
        for a in team_range(inside):  # ranks do not depend on the slots' order
            out_idx[row, rank_of(a, inside, cand_idx, cand_dist, row)] = cand_idx[row, a]
    for s in team_range(k - inside):
        out_idx[row, inside + s] = -1
    team_barrier()
    return min(inside, k)


# The CPU's team is its one thread: k_nearest's CPU version (a distance row first) is the faster way there.
k_nearest_team.override("cpu")(_k_nearest_cpu)
