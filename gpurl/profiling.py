"""NVTX ranges and the nsys capture window: every layer marks its phases with these.

Without the ``nvtx`` package (the ``cuda`` extra) or without a profiler attached, a range costs
nothing. ``torch.cuda.nvtx`` is not used: it raises on a CPU build of torch.
"""
from __future__ import annotations

import contextlib

import torch

try:
    import nvtx as _nvtx
except ImportError:  # pragma: no cover - nvtx is in the cuda extra
    _nvtx = None


def nvtx_range(name: str):
    """An NVTX range in the domain ``gpurl`` around a phase (``with nvtx_range("act"): ...``)."""
    return _nvtx.annotate(name, domain="gpurl") if _nvtx is not None else contextlib.nullcontext()


class ProfilerWindow:
    """cudaProfilerStart before iteration ``first`` and cudaProfilerStop after iteration ``last - 1``, so
    ``nsys profile --capture-range=cudaProfilerApi`` records only iterations [first, last).

    Inactive without CUDA or with ``iters`` empty. ``start``/``stop``/``sync`` default to torch's.
    """

    def __init__(self, iters: tuple, device: torch.device, start=None, stop=None, sync=None):
        self.first, self.last = iters if iters else (-1, -1)
        self.active = bool(iters) and device.type == "cuda"
        self._start = start or (lambda: torch.cuda.profiler.start())
        self._stop = stop or (lambda: torch.cuda.profiler.stop())
        self._sync = sync or (lambda: torch.cuda.synchronize())

    def before(self, iteration: int) -> None:
        """Call before running iteration ``iteration`` (0-based)."""
        if self.active and iteration == self.first:
            self._sync()  # earlier work stays out of the capture
            self._start()

    def after(self, iteration: int) -> None:
        """Call after the update; ``iteration`` counts the iterations done."""
        if self.active and iteration == self.last:
            self._sync()  # the window's kernels finish inside the capture
            self._stop()


__all__ = ["ProfilerWindow", "nvtx_range"]
