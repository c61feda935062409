"""NVTX ranges and the nsys capture window: every layer marks its phases with these. And
:class:`HostWork`, which counts what a block of code asks of the host on the CPU: for the tests that keep a
training iteration free of host syncs and light in host work (tests/test_host_work.py) and for
bench/host_work.py.

Without the ``nvtx`` package (the ``cuda`` extra) or without a profiler attached, a range costs
nothing. ``torch.cuda.nvtx`` is not used: it raises on a CPU build of torch.

:class:`HostWork` profiles a block with ``torch.profiler`` and patches the Python entry points that read a
tensor's values (``tolist``, ``item``, ``bool()``/``int()``/``float()`` of a tensor):

- ``syncs``: sync-like ops (on a GPU each blocks the host until the device catches up, or copies from the
  host): ``_local_scalar_dense``/``item``, ``nonzero``, ``masked_select``, ``lift_fresh`` (a tensor made from
  Python data), and every patched read, by name and caller;
- ``kernels``: what would be a kernel launch on a GPU: every top-level op that writes memory (not a view, not
  a no-op ``to``/``reshape``/``contiguous``), and every compiled region as one (its insides are the region's).
"""
from __future__ import annotations

import contextlib
import traceback
from collections import Counter

import torch
from torch.profiler import ProfilerActivity, profile

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


#: Ops that wait for the device (a read of its memory) or copy from the host on a GPU.
SYNC_OPS = {"aten::_local_scalar_dense", "aten::item", "aten::is_nonzero", "aten::nonzero", "aten::nonzero_numpy",
            "aten::nonzero_static", "aten::masked_select", "aten::lift_fresh"}
#: Ops that make a view or a new name for their input: no kernel.
METADATA_OPS = {
    "aten::view", "aten::_unsafe_view", "aten::view_as", "aten::reshape", "aten::_reshape_alias", "aten::slice",
    "aten::select", "aten::as_strided", "aten::unsqueeze", "aten::squeeze", "aten::expand", "aten::expand_as",
    "aten::detach", "aten::alias", "aten::t", "aten::transpose", "aten::permute", "aten::unflatten",
    "aten::flatten", "aten::split", "aten::split_with_sizes", "aten::tensor_split", "aten::chunk", "aten::unbind",
    "aten::narrow", "aten::resolve_conj", "aten::resolve_neg", "aten::to", "aten::contiguous", "aten::lift_fresh",
    "aten::numpy_T", "aten::real", "aten::empty", "aten::empty_strided", "aten::empty_like", "aten::result_type",
}
#: A metadata op that copies does launch a kernel: these children say it did.
COPY_CHILDREN = {"aten::_to_copy", "aten::clone", "aten::copy_"}
#: Python reads of a tensor's values.
READS = ("tolist", "item", "__bool__", "__int__", "__float__")


class HostWork:
    """``with HostWork() as work: ...`` then ``work.syncs`` (Counter of names), ``work.kernels`` (Counter),
    ``work.regions`` (compiled regions called), ``work.reads_from`` (where each patched read came from)."""

    def __enter__(self) -> "HostWork":
        self.reads_from: Counter = Counter()
        self._saved = {name: getattr(torch.Tensor, name) for name in READS}
        for name, original in self._saved.items():
            setattr(torch.Tensor, name, self._counting(name, original))
        self._profile = profile(activities=[ProfilerActivity.CPU])
        self._profile.__enter__()
        return self

    def _counting(self, name: str, original):
        def read(tensor, *args, **kwargs):
            caller = traceback.extract_stack()[-2]
            self.reads_from[f"{name} at {caller.filename.rsplit('/', 1)[-1]}:{caller.lineno}"] += 1
            return original(tensor, *args, **kwargs)
        return read

    def __exit__(self, *exc) -> None:
        self._profile.__exit__(*exc)
        for name, original in self._saved.items():
            setattr(torch.Tensor, name, original)
        self.syncs, self.kernels, self.regions = Counter(), Counter(), 0
        for event in self._profile.events():
            if event.name in SYNC_OPS:
                self.syncs[event.name] += 1
            if event.cpu_parent is not None:
                continue
            if event.name.startswith("Torch-Compiled Region"):
                self.regions += 1
                self.kernels["compiled region"] += 1
            elif event.name.startswith("aten::") and (event.name not in METADATA_OPS
                                                      or any(c.name in COPY_CHILDREN for c in event.cpu_children)):
                self.kernels[event.name] += 1
        for where, count in self.reads_from.items():
            self.syncs[where] += count

    @property
    def kernel_count(self) -> int:
        return sum(self.kernels.values())


__all__ = ["HostWork", "ProfilerWindow", "SYNC_OPS", "nvtx_range"]
