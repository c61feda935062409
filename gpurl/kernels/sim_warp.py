"""Warp votes, shuffles and barriers for Numba's CUDA simulator, which has none (it runs a Python thread per CUDA
thread and knows only block-wide barriers).

Team phases (:mod:`.team`) need ``cuda.ballot_sync``, ``cuda.shfl_sync``, ``cuda.syncwarp`` and
``cuda.lanemask_lt``: :func:`install` gives the simulator's ``cuda`` module these four, for whole-warp masks,
so the simulator tier runs the very source the GPU build compiles. A warp's barrier waits for the warp's
threads only, as on the GPU: the env's other warps go on, or wait at a block barrier of their own. A thread
that reaches a warp barrier while a thread of its warp has failed stops with an error instead of waiting for
ever.
"""
from __future__ import annotations

import threading

_WARP = 32
_FULL = 0xFFFFFFFF
_POLL_S = 0.05


class _WarpBarrier:
    """One warp's barrier and vote: each thread posts a value, waits for the warp, then reads every value."""

    def __init__(self, parties: int):
        self.parties = parties
        self.values = [0] * parties
        self._arrived = 0
        self._generation = 0
        self._cond = threading.Condition()

    def wait(self, lane: int, value: int, thread) -> list[int]:
        with self._cond:
            self.values[lane] = value
            generation = self._generation
            self._arrived += 1
            if self._arrived == self.parties:
                self._arrived = 0
                self._generation += 1
                self._snapshot = list(self.values)
                self._cond.notify_all()
                return self._snapshot
            while generation == self._generation:
                if getattr(thread, "abort", False):  # the block manager stops every thread after a failure
                    raise RuntimeError("a thread of this warp failed before reaching the warp's barrier")
                self._cond.wait(_POLL_S)
            return self._snapshot


_lock = threading.Lock()


def _warp_of(thread) -> tuple[_WarpBarrier, int]:
    """The calling simulator thread's warp barrier (one per warp of its block) and its lane."""
    manager = thread._manager
    with _lock:
        warps = manager.__dict__.setdefault("_gpurl_warps", {})
        block_threads = 1
        for extent in manager._block_dim:
            block_threads *= extent
        warp = thread.thread_id // _WARP
        if warp not in warps:
            warps[warp] = _WarpBarrier(min(_WARP, block_threads - warp * _WARP))
        return warps[warp], thread.thread_id % _WARP


def _check_mask(mask) -> None:
    if int(mask) & _FULL != _FULL:
        raise NotImplementedError(f"gpurl's simulated warp votes take a whole warp's mask (0xFFFFFFFF), got "
                                  f"{int(mask):#x}")


def ballot_sync(self, mask, predicate):
    """The warp's vote: bit l set where lane l's ``predicate`` holds (every lane waits for the warp)."""
    _check_mask(mask)
    thread = threading.current_thread()
    barrier, lane = _warp_of(thread)
    votes = barrier.wait(lane, 1 if predicate else 0, thread)
    return sum(1 << other for other, vote in enumerate(votes) if vote)


def shfl_sync(self, mask, value, src_lane):
    """Lane ``src_lane``'s ``value`` (as the GPU does, ``src_lane`` is taken modulo the warp size); every lane
    waits for the warp."""
    _check_mask(mask)
    thread = threading.current_thread()
    barrier, lane = _warp_of(thread)
    values = barrier.wait(lane, value, thread)
    return values[int(src_lane) % _WARP]


def syncwarp(self, mask=_FULL):
    """Every lane of the warp waits for the others."""
    _check_mask(mask)
    thread = threading.current_thread()
    barrier, lane = _warp_of(thread)
    barrier.wait(lane, 0, thread)


def lanemask_lt(self):
    """Bits of the lanes below the calling thread's."""
    return (1 << (threading.current_thread().thread_id % _WARP)) - 1


def install() -> None:
    """Give the simulator's ``cuda`` module (``numba.cuda.simulator.kernelapi.FakeCUDAModule``) the warp
    functions it lacks; idempotent, and a no-op for any it has."""
    from numba.cuda.simulator.kernelapi import FakeCUDAModule

    for name, fn in (("ballot_sync", ballot_sync), ("shfl_sync", shfl_sync), ("syncwarp", syncwarp),
                     ("lanemask_lt", lanemask_lt)):
        if not hasattr(FakeCUDAModule, name):
            setattr(FakeCUDAModule, name, fn)
