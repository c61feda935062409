"""Sim tier: the k-nearest searches' CUDA versions in Numba's simulator against k_nearest_ref, case by case:
k_nearest's generic version (a thread per agent, a scratch row per lane) and k_nearest_team (a warp of the
env's block together, one agent after another, the block's warps on different agents at once), each also
against its CPU build. tag_continuous's whole kernel
is checked in tests/test_sim_tag_continuous.py.

The cases are built for the radius method's branches: a radius that grows, then bisects; a crowd that shrinks
it; exact ties at many radii; fewer alive than k (-1 padding); ties no radius separates (the exact repeated
minimum); more neighbours than the team has threads; more candidates to rank than it has threads (ranked from
the scratch, where up to a team's worth are ranked by shuffles).
"""
from __future__ import annotations

import numpy as np
import pytest

import gpurl.kernels.program as program
from gpurl.kernels.neighbors import k_nearest, k_nearest_ref, knn_scratch_shapes
from gpurl.kernels.neighbors_team import k_nearest_team
from gpurl.kernels.program import EnvKernel, per_agent, per_agent_team
from gpurl.kernels.scratch import lane, num_lanes
from gpurl.kernels.team import team_range, team_row, team_rows

pytestmark = pytest.mark.sim


# ---- k_nearest's generic (CUDA) version --------------------------------------------------------------------


def _knn_phase(e, i, x, y, alive, k, radius, dist_row, cand_idx, cand_dist, out_idx, found, result):
    r = lane(e, i, x.shape[1])
    found[e, i] = k_nearest(x, y, alive, e, i, k, radius, dist_row, cand_idx, cand_dist, out_idx, r)
    for s in range(k):
        result[e, i, s] = out_idx[r, s]


knn_kernel = EnvKernel("knn_probe", [per_agent(_knn_phase)], nargs=11)


def _run_knn(target, x, y, alive, k, radius, kernel=knn_kernel, rows=None, capacity=None):
    """(found [E, N], the k nearest [E, N, k]) of ``kernel`` (a probe above) over scratch of ``rows`` rows (default:
    a row per lane) and ``capacity`` candidate slots (default: knn_scratch_shapes')."""
    E, N = x.shape
    shapes = knn_scratch_shapes(target, num_lanes(target, E, N) if rows is None else rows, N, k)
    width = shapes["cand_idx"][1] if capacity is None else capacity + 1
    rows = shapes["cand_idx"][0]
    scratch = [np.zeros(shapes["dist_row"], np.float32), np.full((rows, width), -7, np.int32),
               np.zeros((rows, width), np.float32), np.full((rows, width), -7, np.int32)]
    found = np.full((E, N), -7, np.int32)
    result = np.full((E, N, k), -7, np.int32)
    kernel.launch(target, E, N, x, y, alive, np.int32(k), np.float32(radius), *scratch, found, result)
    return found, result


def _knn_case(name):
    rng = np.random.default_rng(5)
    if name == "random_some_dead":  # radius hint too small: grows, then bisects
        x, y = rng.uniform(0, 4, (2, 2, 11)).astype(np.float32)
        alive = (rng.uniform(size=(2, 11)) < 0.7).astype(np.int32)
        return x, y, alive, 3, 0.05
    if name == "crowd_shrinks_radius":  # 39 others inside the hint > capacity 32: bisects down
        x, y = rng.uniform(0, 4, (2, 1, 40)).astype(np.float32)
        return x, y, np.ones((1, 40), np.int32), 3, 100.0
    if name == "lattice_ties":  # exact equal distances at many radii: ties go to the lower index
        g = np.arange(16) % 4
        x, y = g.astype(np.float32)[None], (np.arange(16) // 4).astype(np.float32)[None]
        return x, y, np.ones((1, 16), np.int32), 5, 1.0
    if name == "fewer_alive_than_k":  # -1 padding
        x, y = rng.uniform(0, 4, (2, 1, 6)).astype(np.float32)
        return x, y, np.array([[1, 0, 1, 0, 0, 1]], np.int32), 4, 1.0
    if name == "tied_beyond_capacity":  # 40 at one point: no radius holds <= 32 of 39, exact fallback
        return np.ones((1, 40), np.float32), np.ones((1, 40), np.float32), np.ones((1, 40), np.int32), 3, 0.5
    if name == "more_neighbours_than_threads":  # k = 20 of 40 (capacity 40)
        x, y = rng.uniform(0, 4, (2, 1, 40)).astype(np.float32)
        return x, y, (rng.uniform(size=(1, 40)) < 0.9).astype(np.int32), 20, 0.5
    raise KeyError(name)


KNN_CASES = ["random_some_dead", "crowd_shrinks_radius", "lattice_ties", "fewer_alive_than_k", "tied_beyond_capacity",
             "more_neighbours_than_threads"]


@pytest.mark.parametrize("name", KNN_CASES)
def test_generic_k_nearest_matches_reference(name):
    x, y, alive, k, radius = _knn_case(name)
    E, N = x.shape
    capacity = knn_scratch_shapes("cuda", E * N, N, k)["cand_idx"][1] - 1
    if name == "tied_beyond_capacity":
        assert capacity == 32 < N - 1
    found, result = _run_knn("cuda", x, y, alive, k, radius)
    for e in range(E):
        for i in range(N):
            want = k_nearest_ref(x[e], y[e], alive[e], i, k)
            np.testing.assert_array_equal(result[e, i], want, err_msg=f"{name}: env {e} agent {i}")
            assert found[e, i] == (want >= 0).sum()
    if name == "tied_beyond_capacity":
        np.testing.assert_array_equal(result[0, 0], [1, 2, 3])
        np.testing.assert_array_equal(result[0, 5], [0, 1, 2])


# ---- k_nearest_team: a warp together, one agent after another ----------------------------------------------
# The simulator runs a Python thread per CUDA thread and a barrier costs it milliseconds, so the crowded cases
# are smaller here, with a smaller candidate capacity (the scratch's width) in place of more agents.


def _knn_team_phase(e, i, x, y, alive, k, radius, dist_row, cand_idx, cand_dist, out_idx, found, result):
    row = team_row(e)
    found[e, i] = k_nearest_team(x, y, alive, e, i, k, radius, dist_row, cand_idx, cand_dist, out_idx, row)
    for s in team_range(k):
        result[e, i, s] = out_idx[row, s]


knn_team_kernel = EnvKernel("knn_team_probe", [per_agent_team(_knn_team_phase)], nargs=11)


def _knn_team_case(name):
    """(x, y, alive, k, radius hint, candidate capacity or None for knn_scratch_shapes')."""
    rng = np.random.default_rng(7)
    if name == "crowd_shrinks_radius":  # 11 others inside the hint > capacity 6: bisects down
        x, y = rng.uniform(0, 4, (2, 1, 12)).astype(np.float32)
        return x, y, np.ones((1, 12), np.int32), 3, 100.0, 6
    if name == "tied_beyond_capacity":  # 9 at one point: no radius holds <= 4 of 8, exact fallback
        return np.ones((1, 9), np.float32), np.ones((1, 9), np.float32), np.ones((1, 9), np.int32), 3, 0.5, 4
    if name in ("more_neighbours_than_threads", "two_teams"):  # 40 agents on a team of 32: two chunks a pass
        x, y, alive, k, radius = _knn_case("more_neighbours_than_threads")
        return x, y, alive, k, radius, None
    if name == "more_candidates_than_threads":  # 38 others inside the hint, capacity 40: ranked by slot, not shuffles
        x, y = rng.uniform(0, 4, (2, 1, 39)).astype(np.float32)
        return x, y, np.ones((1, 39), np.int32), 20, 100.0, None
    return (*_knn_case(name), None)


@pytest.mark.parametrize("name", ["random_some_dead", "lattice_ties", "fewer_alive_than_k", "crowd_shrinks_radius",
                                  "tied_beyond_capacity", "more_neighbours_than_threads",
                                  "more_candidates_than_threads", "two_teams"])
def test_team_k_nearest_matches_reference(name, monkeypatch):
    """One team a block (a block of 32 threads), or two ("two_teams": 40 agents, a block of 64 threads): each
    warp takes every other agent, with a scratch row of its own."""
    threads = 64 if name == "two_teams" else 32
    monkeypatch.setattr(program, "MAX_THREADS_PER_BLOCK", threads)  # block_size(N) at most
    x, y, alive, k, radius, capacity = _knn_team_case(name)
    E, N = x.shape
    rows = team_rows("cuda", E, N)
    assert rows == E * threads // 32
    found, result = _run_knn("cuda", x, y, alive, k, radius, knn_team_kernel, rows=rows, capacity=capacity)
    assert knn_team_kernel.build("cuda").block_dim == (threads, 1, 1)
    for e in range(E):
        for i in range(N):
            want = k_nearest_ref(x[e], y[e], alive[e], i, k)
            np.testing.assert_array_equal(result[e, i], want, err_msg=f"{name}: env {e} agent {i}")
            assert found[e, i] == (want >= 0).sum()
    cpu_found, cpu_result = _run_knn("cpu", x, y, alive, k, radius, knn_team_kernel, rows=E, capacity=capacity)
    np.testing.assert_array_equal(cpu_result, result)
    np.testing.assert_array_equal(cpu_found, found)
