"""k_nearest (gpurl.kernels.neighbors): the CPU build vs k_nearest_ref, ties and degenerate crowds included.

The CPU build is driven the way the tag kernels drive it: one scratch row per env (``lane`` on the
CPU), scratch shapes from ``knn_scratch_shapes``. The generic (CUDA-target) source is also run as
plain Python on small cases; the sim tier runs its CUDA build.
"""
import numba
import numpy as np
import pytest

import gpurl.kernels.neighbors as neighbors
from gpurl.kernels.neighbors import k_nearest, k_nearest_ref, knn_scratch_shapes

pytestmark = pytest.mark.cpu

_knn_cpu = k_nearest.build("cpu")  # built before any test monkeypatches the module (see the spy below)


@numba.njit
def _all_agents(x, y, alive, k, radius, dist_row, cand_idx, cand_dist, out_idx, out, found):
    for e in range(x.shape[0]):
        for i in range(x.shape[1]):
            found[e, i] = _knn_cpu(x, y, alive, e, i, k, radius, dist_row, cand_idx, cand_dist, out_idx, e)
            for s in range(k):
                out[e, i, s] = out_idx[e, s]


def knn_cpu(x, y, alive, k, radius=1.0):
    """k nearest of every agent of every env with the CPU build: (int32 [E, N, k], found [E, N])."""
    E, N = x.shape
    shapes = knn_scratch_shapes("cpu", E, N, k)
    scratch = dict(dist_row=np.zeros(shapes["dist_row"], np.float32),
                   cand_idx=np.zeros(shapes["cand_idx"], np.int32),
                   cand_dist=np.zeros(shapes["cand_dist"], np.float32),
                   out_idx=np.full(shapes["out_idx"], 12345, np.int32))  # garbage: every slot must be written
    out = np.full((E, N, k), -7, np.int32)
    found = np.full((E, N), -7, np.int64)
    _all_agents(x.astype(np.float32), y.astype(np.float32), alive.astype(np.int32), np.int64(k),
                np.float32(radius), scratch["dist_row"], scratch["cand_idx"], scratch["cand_dist"],
                scratch["out_idx"], out, found)
    return out, found


def knn_ref(x, y, alive, k):
    E, N = x.shape
    out = np.stack([np.stack([k_nearest_ref(x[e], y[e], alive[e], i, k) for i in range(N)]) for e in range(E)])
    return out, (out >= 0).sum(-1)


def assert_matches_ref(x, y, alive, k, radius=1.0):
    got, found = knn_cpu(x, y, alive, k, radius)
    want, want_found = knn_ref(x, y, alive, k)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(found, want_found)
    return got


def test_scratch_shapes():
    assert knn_scratch_shapes("cpu", 4, 60, 5) == dict(dist_row=(4, 60), cand_idx=(4, 33), cand_dist=(4, 33),
                                                       out_idx=(4, 33))
    assert knn_scratch_shapes("cuda", 240, 60, 20) == dict(dist_row=(240, 1), cand_idx=(240, 41),
                                                           cand_dist=(240, 41), out_idx=(240, 41))


@pytest.mark.parametrize("k", [1, 3, 8, 20])
@pytest.mark.parametrize("radius", [1e-6, 0.7, 1e6])  # far too small, about right, everything
def test_random_points_with_dead_agents(k, radius):
    rng = np.random.default_rng(k)
    E, N = 3, 60
    x = rng.uniform(0, 10, (E, N)).astype(np.float32)
    y = rng.uniform(0, 10, (E, N)).astype(np.float32)
    alive = (rng.uniform(size=(E, N)) > 0.3).astype(np.int32)
    alive[2, :] = 0
    alive[2, [5, 17, 40]] = 1  # env 2: only three agents in the game
    got = assert_matches_ref(x, y, alive, k, radius)
    assert (got[2, :, min(k, 3):] == -1).all()


def test_everyone_at_one_point_orders_by_index():
    E, N, k = 2, 10, 4
    x = np.full((E, N), 3.0, np.float32)
    y = np.full((E, N), 3.0, np.float32)
    alive = np.ones((E, N), np.int32)
    alive[1, 2] = 0
    got = assert_matches_ref(x, y, alive, k)
    np.testing.assert_array_equal(got[0, 0], [1, 2, 3, 4])
    np.testing.assert_array_equal(got[0, 2], [0, 1, 3, 4])
    np.testing.assert_array_equal(got[1, 1], [0, 3, 4, 5])
    np.testing.assert_array_equal(got[1, 9], [0, 1, 3, 4])


@pytest.fixture
def fallback_spy(monkeypatch):
    """Counts calls of the repeated-minimum fallback when the CPU source runs as plain Python."""
    calls = []
    real = neighbors.select_by_repeated_minimum

    def spy(*args):
        calls.append(args[4])  # agent i
        return real(*args)

    monkeypatch.setattr(neighbors, "select_by_repeated_minimum", spy)
    return calls


def _plain_cpu_source(x, y, alive, i, k, radius=1.0):
    shapes = knn_scratch_shapes("cpu", 1, x.shape[1], k)
    bufs = [np.zeros(shapes[n], dt) for n, dt in
            (("dist_row", np.float32), ("cand_idx", np.int32), ("cand_dist", np.float32), ("out_idx", np.int32))]
    found = neighbors._k_nearest_cpu(x, y, alive, 0, i, k, np.float32(radius), *bufs, 0)
    return bufs[3][0, :k].copy(), found


def test_more_ties_than_capacity_takes_the_exact_fallback(fallback_spy):
    # 50 agents at one point, k = 5: every radius holds 49 > capacity 32 candidates.
    N, k = 50, 5
    assert knn_scratch_shapes("cpu", 1, N, k)["cand_idx"][1] - 1 < N - 1
    x = np.full((1, N), 2.5, np.float32)
    y = np.full((1, N), 2.5, np.float32)
    alive = np.ones((1, N), np.int32)
    got = assert_matches_ref(x, y, alive, k)
    np.testing.assert_array_equal(got[0, 0], [1, 2, 3, 4, 5])
    np.testing.assert_array_equal(got[0, 3], [0, 1, 2, 4, 5])
    # The same source as plain Python proves this input reaches the fallback.
    idx, found = _plain_cpu_source(x, y, alive, 3, k)
    np.testing.assert_array_equal(idx, [0, 1, 2, 4, 5])
    assert found == k and fallback_spy == [3]


def test_tie_group_beyond_capacity_after_nearer_agents(fallback_spy):
    # Agent 0 at the origin; agents 1, 2 at distance 1; 40 agents tied at distance exactly 5
    # (3-4-5 triangles, ten at each of four points). k = 5 needs 3 of the tie group: no radius holds
    # between k and the capacity (32), so the fallback picks the lowest indices.
    N, k = 43, 5
    pts = [(0, 0), (1, 0), (0, -1)] + [p for p in [(3, 4), (-4, 3), (5, 0), (0, -5)] for _ in range(10)]
    order = np.random.default_rng(0).permutation(np.arange(3, N))  # tie members at shuffled indices
    xy = np.zeros((N, 2), np.float32)
    xy[:3] = pts[:3]
    xy[order] = pts[3:]
    x, y = xy[None, :, 0].copy(), xy[None, :, 1].copy()
    alive = np.ones((1, N), np.int32)
    alive[0, 3] = 0  # the lowest-index tie member is out of the game
    got = assert_matches_ref(x, y, alive, k)
    np.testing.assert_array_equal(got[0, 0], [1, 2, 4, 5, 6])
    idx, _ = _plain_cpu_source(x, y, alive, 0, k)
    np.testing.assert_array_equal(idx, [1, 2, 4, 5, 6])
    assert fallback_spy == [0]


def test_equal_distances_on_a_line():
    # Integer positions on a line: both neighbours at each distance tie exactly; lower index first.
    N, k = 9, 4
    x = np.arange(N, dtype=np.float32)[None, :]
    y = np.zeros((1, N), np.float32)
    alive = np.ones((1, N), np.int32)
    got = assert_matches_ref(x, y, alive, k)
    np.testing.assert_array_equal(got[0, 4], [3, 5, 2, 6])
    np.testing.assert_array_equal(got[0, 0], [1, 2, 3, 4])
    np.testing.assert_array_equal(got[0, 8], [7, 6, 5, 4])
    # Reversed indices: the lower index now sits on the other side.
    got = assert_matches_ref(x[:, ::-1].copy(), y, alive, k)
    np.testing.assert_array_equal(got[0, 4], [3, 5, 2, 6])


def test_k_larger_than_agents_in_game_pads_with_minus_one():
    N, k = 8, 6
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 4, (2, N)).astype(np.float32)
    y = rng.uniform(0, 4, (2, N)).astype(np.float32)
    alive = np.zeros((2, N), np.int32)
    alive[0, [1, 4, 6]] = 1
    alive[1, 2] = 1  # env 1: nobody but agent 2; agent 2 sees no one
    got, found = knn_cpu(x, y, alive, k)
    want, _ = knn_ref(x, y, alive, k)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(found[0], [3, 2, 3, 3, 2, 3, 2, 3])  # an agent in the game skips itself
    assert (got[0, :, 3:] == -1).all() and (got[1, 2] == -1).all() and (found[1, 2] == 0)
    np.testing.assert_array_equal(got[1, 0], [2, -1, -1, -1, -1, -1])
    # k beyond the number of other agents at all (k > N - 1)
    assert_matches_ref(x, y, np.ones((2, N), np.int32), 10)


@pytest.mark.parametrize("case", ["random", "one_point", "tie_beyond_capacity"])
def test_generic_source_as_plain_python(case, fallback_spy):
    # The CUDA build compiles this same source; as plain Python it must give the reference answer.
    rng = np.random.default_rng(7)
    N, k = {"random": (40, 5), "one_point": (36, 3), "tie_beyond_capacity": (50, 5)}[case]
    if case == "random":
        x = rng.uniform(0, 6, (1, N)).astype(np.float32)
        y = rng.uniform(0, 6, (1, N)).astype(np.float32)
    else:
        x = np.full((1, N), 1.5, np.float32)
        y = np.full((1, N), 1.5, np.float32)
        if case == "tie_beyond_capacity":
            x[0, 1], y[0, 1] = 1.0, 1.5  # one agent nearer to agent 0, 38 tied behind it
            x[0, 0] = 0.5
    alive = (rng.uniform(size=(1, N)) > 0.2).astype(np.int32)
    shapes = knn_scratch_shapes("cuda", 1, N, k)
    bufs = [np.zeros(shapes[n], dt) for n, dt in
            (("dist_row", np.float32), ("cand_idx", np.int32), ("cand_dist", np.float32), ("out_idx", np.int32))]
    for i in (0, 1, N - 1):
        found = k_nearest.py_func(x, y, alive, 0, i, k, np.float32(0.8), *bufs, 0)
        want = k_nearest_ref(x[0], y[0], alive[0], i, k)
        np.testing.assert_array_equal(bufs[3][0, :k], want, err_msg=f"agent {i}")
        assert found == (want >= 0).sum()
    # one_point: ~28 tied candidates fit the capacity (ranked by index); beyond it: the fallback.
    assert (len(fallback_spy) > 0) == (case == "tie_beyond_capacity")


def test_squared_bounds_decide_like_the_root_for_every_radius():
    # squared_bounds' margins, checked at every float32 radius in [1, 2): doubling a radius scales its square,
    # the bounds and the roots by exact powers of two, so this covers every radius with a normal, finite square.
    # For each radius the extreme cases are the largest s <= low and the smallest s > high (sqrt is monotone).
    r = np.arange(np.float32(1.0).view(np.int32), np.float32(2.0).view(np.int32), dtype=np.int32).view(np.float32)
    square = r * r
    low, high = square * neighbors._BELOW, square * neighbors._ABOVE
    assert low.dtype == high.dtype == np.float32
    assert (np.sqrt(low) <= r).all()
    assert (np.sqrt(np.nextafter(high, np.float32(np.inf))) > r).all()
    # the band is thin: a root is taken for at most a few dozen squares around each radius
    assert (high.view(np.int32) - low.view(np.int32)).max() <= 40
    # the device function computes the same bounds (a sample), and gives up the shortcut outside the safe range
    for radius in r[::65537]:
        assert neighbors.squared_bounds.py_func(radius) == (radius * radius * neighbors._BELOW,
                                                            radius * radius * neighbors._ABOVE)
    with np.errstate(over="ignore"):  # the square of the largest overflows: that is the point
        for radius in (np.float32(1e-35), np.float32(3e-20), np.float32(2e20), np.float32(np.inf)):
            assert neighbors.squared_bounds.py_func(radius) == (np.float32(-1.0), np.float32(np.inf))


def test_count_within_at_radii_equal_to_a_pair_distance():
    # Radii exactly at each pair's rounded distance and one ulp either side: the squared comparison must count
    # what `distance <= radius` counts, the band's roots included, at scales from 1e-8 to 1e8.
    rng = np.random.default_rng(11)
    for scale in (1e-8, 1.0, 37.0, 1e8):
        x = (rng.uniform(0, 1, (1, 30)) * scale).astype(np.float32)
        y = (rng.uniform(0, 1, (1, 30)) * scale).astype(np.float32)
        alive = (rng.uniform(size=(1, 30)) > 0.2).astype(np.int32)
        d = np.sqrt((x[0] - x[0, 3]) ** 2 + (y[0] - y[0, 3]) ** 2).astype(np.float32)
        eligible = (np.arange(30) != 3) & (alive[0] != 0)
        for radius in np.concatenate([d, np.nextafter(d, np.float32(0)), np.nextafter(d, np.float32(np.inf))]):
            if radius <= 0:
                continue
            inside, total, farthest = neighbors.count_within.py_func(x, y, alive, 0, 3, np.float32(radius))
            within = eligible & (d <= radius)
            assert (inside, total) == (within.sum(), eligible.sum()), (scale, radius)
            assert farthest == (d[within].max() if within.any() else 0.0)


def test_gather_within_at_radii_equal_to_a_pair_distance():
    # The gather takes the squares below the band without a root, then, when it found fewer than the count,
    # decides the band by the root in a second pass: at a radius equal to a pair's rounded distance that pair's
    # square sits in the band and only the second pass finds it.
    rng = np.random.default_rng(12)
    x = rng.uniform(0, 5, (1, 24)).astype(np.float32)
    y = rng.uniform(0, 5, (1, 24)).astype(np.float32)
    alive = (rng.uniform(size=(1, 24)) > 0.2).astype(np.int32)
    d = np.sqrt((x[0] - x[0, 5]) ** 2 + (y[0] - y[0, 5]) ** 2).astype(np.float32)
    eligible = (np.arange(24) != 5) & (alive[0] != 0)
    band_hits = 0
    for radius in d[eligible]:
        inside, _, _ = neighbors.count_within.py_func(x, y, alive, 0, 5, radius)
        cand_idx, cand_dist = np.full((1, 33), -7, np.int32), np.full((1, 33), -7.0, np.float32)
        n = neighbors.gather_within.py_func(x, y, alive, 0, 5, radius, inside, cand_idx, cand_dist, 0)
        want = np.flatnonzero(eligible & (d <= radius))
        assert n == inside == len(want)
        np.testing.assert_array_equal(cand_idx[0, :n], want)
        np.testing.assert_array_equal(cand_dist[0, :n], d[want])  # the rounded distances, not the squares
        low, _ = neighbors.squared_bounds.py_func(radius)
        band_hits += bool(((x[0] - x[0, 5]) ** 2 + (y[0] - y[0, 5]) ** 2)[want].max() > low)
    assert band_hits == eligible.sum()  # every radius put its own pair in the band
