"""k nearest neighbours inside one env: exact, deterministic, branch-light.

Order is (Euclidean distance, then lower index), the distance being the float32 ``sqrt(dx*dx + dy*dy)``
(ties in the *rounded* distance go to the lower index, as ``heapq.nsmallest`` over ids does).

Selecting by sorted insertion mispredicts a branch at almost every candidate. Instead:

1. pick a search radius (the caller's density-based hint), count the eligible agents inside it, and
   rescale the radius from that count (counts grow with the area) until ``k <= count <= capacity``
   (usually a single count);
2. gather those candidates into the agent's scratch row;
3. give each candidate its rank = number of candidates before it in (distance, index) order, a
   branch-free double loop over a handful of candidates, and store it at ``out_idx[row, rank]``.

Everything outside the radius is farther than everything inside, so this is the exact answer. When
many agents sit at exactly the same distance no radius separates them; then an exact O(k N)
repeated-minimum selection runs instead (only in such degenerate states).

The CPU build first writes the agent's whole distance row (one vectorisable pass: ``sqrt`` once per
pair), so counting and gathering are cheap and the gather is branch-free. The CUDA build keeps no row
per thread (N floats per agent would not fit) and recomputes distances in each pass instead, as squares:
a pass compares ``dx*dx + dy*dy`` with the squared radius (:func:`within_radius`, exact) and takes a
root only for the candidates it gathers. Both are exact, so they agree bit for bit.

Scratch (rows from :func:`gpurl.kernels.lane`): ``dist_row`` float32 [rows, N] (CPU; [rows, 1] on
CUDA), ``cand_idx`` int32 / ``cand_dist`` float32 [rows, capacity + 1], ``out_idx`` int32
[rows, capacity + 1]; :func:`knn_scratch_shapes` computes them, :func:`knn_scratch` declares them as an
env's scratch fields, interleaved by lane in a CUDA build (``Field.lanes_interleaved``).
"""
import math

import numpy as np

from .fields import Field, resolve_size
from .scratch import num_lanes
from .targets import device

_INF = np.float32(np.inf)
_HALF = np.float32(0.5)
_GROW = np.float32(2.0)
_AIM_FACTOR = np.float32(1.2)  # aim a little over k candidates: rank cost grows as count^2
_AIM_SLACK = np.float32(2.0)
_MAX_BISECTIONS = 24  # radius steps before the exact fallback
# squared_bounds: margins of 2^-20 around the squared radius, and the squares for which they are sound
_BELOW = np.float32(1.0 - 2.0 ** -20)
_ABOVE = np.float32(1.0 + 2.0 ** -20)
_SQUARE_SAFE_LOW = np.float32(2.0 ** -100)
_SQUARE_SAFE_HIGH = np.float32(2.0 ** 100)


def knn_scratch_shapes(target: str, rows: int, num_agents: int, k: int) -> dict[str, tuple[int, int]]:
    """Shapes of the k-nearest scratch arrays for ``rows`` lanes (see the module docstring)."""
    capacity = max(2 * k, 32)
    return dict(
        dist_row=(rows, num_agents if target == "cpu" else 1),
        cand_idx=(rows, capacity + 1), cand_dist=(rows, capacity + 1), out_idx=(rows, capacity + 1),
    )


def knn_scratch(k, out: str = "out_idx") -> dict[str, Field]:
    """The scratch fields of :func:`k_nearest` for ``k`` neighbours (an int or the name of a params
    attribute), one row per lane of the env's target; ``out`` names the result array (the k nearest)."""
    def shape_of(name):
        def shape(env):
            rows = num_lanes(env.target, env.num_envs, env.num_agents)
            return knn_scratch_shapes(env.target, rows, env.num_agents, resolve_size(env, k))[name]
        return shape

    dtypes = dict(dist_row="float32", cand_idx="int32", cand_dist="float32", out_idx="int32")
    # lanes_interleaved: a warp's lanes read one candidate slot of their rows together (the ranking's loops)
    return {(out if name == "out_idx" else name): Field(dtype, shape_of=shape_of(name), lanes_interleaved=True)
            for name, dtype in dtypes.items()}


@device
def squared_between(xi, yi, xj, yj):
    """float32 squared distance from point i to point j (``dx*dx + dy*dy``, ``dx = xj - xi``): for a pass that
    holds agent i's position in registers (a store in the pass keeps the compiler from assuming it unchanged)."""
    dx = xj - xi
    dy = yj - yi
    return dx * dx + dy * dy


@device
def pair_squared(x, y, e, i, j):
    """float32 squared distance between agents ``i`` and ``j`` of env ``e`` (:func:`squared_between`)."""
    return squared_between(x[e, i], y[e, i], x[e, j], y[e, j])


@device
def pair_distance(x, y, e, i, j):
    """float32 Euclidean distance between agents ``i`` and ``j`` of env ``e``: the correctly rounded
    ``sqrt`` of :func:`pair_squared`."""
    return np.float32(math.sqrt(pair_squared(x, y, e, i, j)))


@device
def squared_bounds(radius):
    """``(low, high)`` with: a squared distance ``s <= low`` has ``sqrt(s) <= radius``, one ``s > high`` has
    ``sqrt(s) > radius`` (``sqrt`` correctly rounded to float32), so only ``low < s <= high`` needs the root.

    ``radius**2`` rounded is within 2^-24 of the true square; 2^-20 either side leaves a margin larger than
    that rounding, the two roundings of the bound itself and the root's half ulp together (about 3 * 2^-24):
    ``s <= low`` gives ``sqrt(s) <= radius * (1 - 7 * 2^-24)``, which rounds to at most ``radius``; likewise
    above ``high``. The relative argument needs a normal, finite square: outside ``(2^-100, 2^100)`` every
    ``s`` takes the root (``low = -1``, ``high = inf``).
    """
    square = radius * radius
    if square > _SQUARE_SAFE_LOW and square < _SQUARE_SAFE_HIGH:
        return square * _BELOW, square * _ABOVE
    return np.float32(-1.0), _INF


@device
def within_radius(s, radius, low, high):
    """``sqrt(s) <= radius`` for a squared distance ``s``, with ``(low, high) = squared_bounds(radius)``: the
    root is taken only in the thin band between them (a pair within one part in a million of the radius)."""
    if s <= low:
        return True
    if s > high:
        return False
    return np.float32(math.sqrt(s)) <= radius


@device
def next_radius(radius, low, high, inside, want, capacity, farthest_inside):
    """Next search radius after ``inside`` agents were counted within ``radius``.

    Counts grow with the area, so the radius is rescaled by sqrt(aim / inside) (aim: a little over
    ``want``, well under ``capacity``); the (low, high) bracket keeps it converging when the density
    is far from uniform, falling back to bisection when the proposal leaves the bracket. Any radius
    at or above ``farthest_inside`` counts the same agents, so that is the bracket's new top; when
    the bracket closes (agents tied at one distance) the caller switches to the exact fallback.
    """
    if inside < want:
        low = radius
    else:
        high = farthest_inside
    aim = np.float32(want) * _AIM_FACTOR + _AIM_SLACK
    if aim > np.float32(capacity):
        aim = np.float32(capacity)
    proposal = radius * np.float32(math.sqrt(aim / np.float32(max(inside, 1))))
    if inside == 0:
        proposal = radius * _GROW
    if proposal <= low or proposal >= high:
        proposal = radius * _GROW if high == _INF else (low + high) * _HALF
    return proposal, low, high


@device
def count_within(x, y, alive, e, i, radius):
    """(eligible others within ``radius``, all eligible others, farthest distance among those within)
    for agent ``i``; eligible = alive. Compares squared distances with :func:`squared_bounds`, branch-free
    (the loop's loads can then be issued ahead of its arithmetic): below ``low`` is within, above ``high`` is
    not; an eligible square between them (within a part in a million of the radius, rare) sends the count
    to :func:`count_within_by_root`. As ``sqrt`` is monotone, the farthest is the root of the largest square."""
    low, high = squared_bounds(radius)
    inside = 0
    undecided_or_inside = 0
    total = 0
    farthest_squared = np.float32(0.0)
    for j in range(x.shape[1]):
        eligible = (j != i) & (alive[e, j] != 0)
        s = pair_squared(x, y, e, i, j)
        within = eligible & (s <= low)
        inside += within
        undecided_or_inside += eligible & (s <= high)
        total += eligible
        farthest_squared = max(farthest_squared, s if within else np.float32(0.0))
    if undecided_or_inside != inside:
        return count_within_by_root(x, y, alive, e, i, radius)
    return inside, total, np.float32(math.sqrt(farthest_squared))


@device
def count_within_by_root(x, y, alive, e, i, radius):
    """:func:`count_within` from each pair's rounded distance (a root per pair): the exact count where a
    square is too close to the radius's to decide without its root."""
    inside = 0
    total = 0
    farthest = np.float32(0.0)
    for j in range(x.shape[1]):
        eligible = (j != i) & (alive[e, j] != 0)
        d = pair_distance(x, y, e, i, j)
        within = eligible & (d <= radius)
        total += eligible
        inside += within
        farthest = max(farthest, d if within else np.float32(0.0))
    return inside, total, farthest


@device
def rank_of(a, n, cand_idx, cand_dist, row):
    """Rank of candidate ``a`` among the ``n`` of ``row``: how many come before it in (distance, index) order."""
    da = cand_dist[row, a]
    ja = cand_idx[row, a]
    rank = 0
    for b in range(n):
        db = cand_dist[row, b]
        rank += (db < da) | ((db == da) & (cand_idx[row, b] < ja))
    return rank


@device
def rank_candidates(n, k, cand_idx, cand_dist, out_idx, row):
    """out_idx[row, rank] = candidate, rank in (distance, index) order; slots n..k-1 get -1."""
    for a in range(n):
        out_idx[row, rank_of(a, n, cand_idx, cand_dist, row)] = cand_idx[row, a]
    for s in range(n, k):
        out_idx[row, s] = -1
    return min(n, k)


@device
def select_by_repeated_minimum(x, y, alive, e, i, k, out_idx, row):
    """Exact O(k N) fallback: slot s gets the smallest (distance, index) after slot s-1's."""
    prev_d = np.float32(-1.0)
    prev_j = -1
    found = 0
    for s in range(k):
        best_d = _INF
        best_j = -1
        for j in range(x.shape[1]):
            if (j != i) & (alive[e, j] != 0):
                d = pair_distance(x, y, e, i, j)
                after_prev = (d > prev_d) | ((d == prev_d) & (j > prev_j))
                if after_prev & ((d < best_d) | (best_j < 0)):
                    best_d = d
                    best_j = j
        out_idx[row, s] = best_j
        found += best_j >= 0
        prev_d = best_d
        prev_j = best_j
    return found


@device
def k_nearest(x, y, alive, e, i, k, radius_hint, dist_row, cand_idx, cand_dist, out_idx, row):
    """Write the ``k`` nearest alive other agents of agent ``i`` (env ``e``) to ``out_idx[row, :k]``.

    x, y: float32 [E, N]; alive: int32 [E, N] (0 = not eligible); radius_hint: float32 > 0, a radius
    likely to hold a little more than k agents; scratch as in the module docstring. Nearest first,
    -1 padded. Returns how many slots hold an agent.
    """
    capacity = cand_idx.shape[1] - 1
    radius = np.float32(radius_hint)
    low = np.float32(0.0)
    high = _INF
    inside, total, farthest = count_within(x, y, alive, e, i, radius)
    want = min(k, total)
    steps = 0
    while (inside < want or inside > capacity) and steps < _MAX_BISECTIONS:
        radius, low, high = next_radius(radius, low, high, inside, want, capacity, farthest)
        if not (low < radius < high):
            break
        inside, total, farthest = count_within(x, y, alive, e, i, radius)
        steps += 1
    if inside < want or inside > capacity:
        return select_by_repeated_minimum(x, y, alive, e, i, k, out_idx, row)
    n = gather_within(x, y, alive, e, i, radius, inside, cand_idx, cand_dist, row)
    return rank_candidates(n, k, cand_idx, cand_dist, out_idx, row)


@device
def gather_within(x, y, alive, e, i, radius, inside, cand_idx, cand_dist, row):
    """Gather the ``inside`` eligible agents within ``radius`` (as :func:`count_within` counted them) into
    ``cand_idx[row, :]``, their distances into ``cand_dist[row, :]``; returns how many.

    The pass takes the squares at or below ``squared_bounds(radius)[0]``, which are all within, without a
    branch but the store's; if that finds fewer than ``inside``, a square in the band around the radius is
    within too, and a second pass decides the band by the root (rare). The roots of the gathered squares are
    taken after, once per candidate.
    """
    low, high = squared_bounds(radius)
    n = 0
    for j in range(x.shape[1]):
        s = pair_squared(x, y, e, i, j)
        if (j != i) & (alive[e, j] != 0) & (s <= low):
            cand_idx[row, n] = j
            cand_dist[row, n] = s
            n += 1
    if n != inside:
        n = 0
        for j in range(x.shape[1]):
            s = pair_squared(x, y, e, i, j)
            if (j != i) & (alive[e, j] != 0) & within_radius(s, radius, low, high):
                cand_idx[row, n] = j
                cand_dist[row, n] = s
                n += 1
    for a in range(n):
        cand_dist[row, a] = np.float32(math.sqrt(cand_dist[row, a]))
    return n


@k_nearest.override("cpu")
def _k_nearest_cpu(x, y, alive, e, i, k, radius_hint, dist_row, cand_idx, cand_dist, out_idx, row):
    n_agents = x.shape[1]
    capacity = cand_idx.shape[1] - 1  # one spare slot: the branch-free gather always stores
    xi = x[e, i]
    yi = y[e, i]
    total = 0
    for j in range(n_agents):
        dx = x[e, j] - xi
        dy = y[e, j] - yi
        d = np.float32(math.sqrt(dx * dx + dy * dy))
        eligible = (j != i) & (alive[e, j] != 0)
        total += eligible
        dist_row[row, j] = d if eligible else _INF
    want = min(k, total)
    radius = np.float32(radius_hint)
    low = np.float32(0.0)
    high = _INF
    steps = 0
    while True:
        inside = 0
        farthest = np.float32(0.0)
        for j in range(n_agents):
            d = dist_row[row, j]
            within = d <= radius
            inside += within
            farthest = max(farthest, d if within else np.float32(0.0))
        if (inside >= want and inside <= capacity) or steps == _MAX_BISECTIONS:
            break
        radius, low, high = next_radius(radius, low, high, inside, want, capacity, farthest)
        if not (low < radius < high):
            break
        steps += 1
    if inside < want or inside > capacity:
        return select_by_repeated_minimum(x, y, alive, e, i, k, out_idx, row)
    n = 0
    for j in range(n_agents):
        d = dist_row[row, j]
        cand_idx[row, n] = j
        cand_dist[row, n] = d
        n += d <= radius
    return rank_candidates(n, k, cand_idx, cand_dist, out_idx, row)


def k_nearest_ref(x: np.ndarray, y: np.ndarray, alive: np.ndarray, i: int, k: int) -> np.ndarray:
    """Reference for one env: x, y float32 [N], alive [N]. Returns int32 [k], -1 padded."""
    dx = x - x[i]
    dy = y - y[i]
    dist = np.sqrt(dx * dx + dy * dy).astype(np.float32)
    others = [j for j in range(len(x)) if j != i and alive[j]]
    ranked = sorted(others, key=lambda j: (dist[j], j))[:k]
    return np.array(ranked + [-1] * (k - len(ranked)), dtype=np.int32)
