"""Sim tier: the warp votes, shuffles and barriers gpurl.kernels.sim_warp gives Numba's CUDA simulator (team phases
use them): each warp's vote against a hand count, each warp's shuffles against a hand permutation, barriers scoped
to a warp (the block's other warp does not take part), and a failed thread stops its warp's waiting threads
instead of leaving them waiting for ever."""
from __future__ import annotations

import time

import numpy as np
import pytest

from gpurl.kernels import sim_warp

pytestmark = pytest.mark.sim

ALL = np.uint32(0xFFFFFFFF)
#: numba.cuda, bound by the ``jit`` fixture: the simulator swaps a kernel's global ``cuda`` for its own module
#: at each launch, and importing numba.cuda at collection would fix the simulator choice for the whole process.
cuda = None


@pytest.fixture(scope="module")
def jit():
    global cuda
    from numba import cuda

    sim_warp.install()
    return cuda.jit


def _vote(predicate, count, before):
    t = cuda.threadIdx.x
    votes = cuda.ballot_sync(ALL, predicate[t] != 0)
    count[t] = cuda.popc(votes)
    before[t] = cuda.popc(votes & cuda.lanemask_lt())


def test_each_warps_vote_counts_its_own_lanes(jit):
    vote = jit(_vote)

    predicate = (np.random.default_rng(0).uniform(size=64) < 0.4).astype(np.int32)
    count = np.full(64, -1, np.int32)
    before = np.full(64, -1, np.int32)
    vote[1, 64](predicate, count, before)
    for warp in range(2):
        lanes = slice(32 * warp, 32 * warp + 32)
        mine = predicate[lanes]
        np.testing.assert_array_equal(count[lanes], np.full(32, mine.sum()), f"warp {warp}")
        np.testing.assert_array_equal(before[lanes], np.cumsum(mine) - mine, f"warp {warp}")


def _shuffle(values, out):
    t = cuda.threadIdx.x
    lane = t % 32
    for r in range(3):  # three rounds, the source a different lane each round (and past 31: modulo the warp)
        out[r, t] = cuda.shfl_sync(ALL, values[t], (lane + 5 * r + 1) % 32 if r < 2 else lane + 33)


def test_each_warps_shuffle_reads_its_own_lanes(jit):
    values = np.random.default_rng(1).uniform(size=64).astype(np.float32)
    out = np.zeros((3, 64), np.float32)
    jit(_shuffle)[1, 64](values, out)
    lanes = np.arange(32)
    for warp in range(2):
        mine = values[32 * warp: 32 * warp + 32]
        for r, source in enumerate(((lanes + 1) % 32, (lanes + 6) % 32, (lanes + 1) % 32)):
            np.testing.assert_array_equal(out[r, 32 * warp: 32 * warp + 32], mine[source], f"warp {warp}, round {r}")


def _passes(out):
    t = cuda.threadIdx.x
    lane = t % 32
    rounds = 3 if t < 32 else 1
    for r in range(rounds):
        out[t] = r * 100 + lane
        cuda.syncwarp(ALL)
        out[64 + t] = out[t - lane + (lane + 1) % 32]  # the next lane's value of this round
        cuda.syncwarp(ALL)
    cuda.syncthreads()


def test_a_warp_barrier_waits_for_its_warp_only(jit):
    """Warp 0 passes three rounds of warp barriers, each round reading a value its neighbour lane wrote in it,
    while warp 1 passes one; then both meet at the block's barrier."""
    out = np.zeros(128, np.int64)
    jit(_passes)[1, 64](out)
    lanes = np.arange(32)
    np.testing.assert_array_equal(out[64:96], 200 + (lanes + 1) % 32)
    np.testing.assert_array_equal(out[96:128], (lanes + 1) % 32)


def _fails(out):
    t = cuda.threadIdx.x
    if t == 5:
        out[1000] = 1  # out of bounds: the simulator raises
    cuda.syncwarp(ALL)
    out[t] = 1


def test_a_failed_thread_stops_its_warps_waiting_threads(jit):
    import threading

    from numba.cuda.simulator.kernel import BlockThread

    with pytest.raises(IndexError):
        jit(_fails)[1, 32](np.zeros(32, np.int32))
    deadline = time.monotonic() + 10
    left = lambda: [t for t in threading.enumerate() if isinstance(t, BlockThread)]  # noqa: E731
    while left() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left(), f"{len(left())} simulator threads still wait at the failed warp's barrier"


def _partial(out):
    out[cuda.threadIdx.x] = cuda.ballot_sync(np.uint32(0xFFFF), True)


def test_a_partial_mask_is_refused(jit):
    with pytest.raises(NotImplementedError, match="whole warp's mask"):
        jit(_partial)[1, 32](np.zeros(32, np.int64))
