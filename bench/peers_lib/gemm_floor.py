"""The matrix products a stretch of torch code runs, recorded by shape, and the seconds those products alone take
on this machine: a floor under that code's time, since nothing else can make the same products faster on the
same CPUs and threads. (Part of a library: bench/benchmarl_offpolicy.py prints the RESULT line.)

    recorder = GemmRecorder()
    with recorder:
        ...                                  # any torch code, eager (a compiled region's products are hidden)
    recorder.flops, recorder.calls           # what ran
    gemm_seconds(recorder)                   # those products alone, each shape timed in a tight loop

Every ``mm``, ``addmm``, ``bmm`` and ``baddbmm`` reaching the dispatcher is counted with its operands' sizes and
strides (a transposed operand is a different product for the BLAS); ``nn.Linear`` and autograd's backward reach
these. The timing replays each distinct product on fresh operands of the same layout, warm in the caches: a
lower bound of what the recorded code spent in them.
"""
from __future__ import annotations

import time
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten
#: op -> (its name, the positions of its two multiplied operands)
GEMMS = {aten.mm.default: ("mm", 0, 1), aten.addmm.default: ("addmm", 1, 2), aten.bmm.default: ("bmm", 0, 1),
         aten.baddbmm.default: ("baddbmm", 1, 2)}


def _layout(t: torch.Tensor) -> tuple:
    return tuple(t.shape), tuple(t.stride())


class GemmRecorder(TorchDispatchMode):
    """A dispatch mode that counts the matrix products run under it: ``calls`` a Counter of ``(name, operands'
    (shape, stride)...)``, ``flops`` their multiply-adds times two."""

    def __init__(self):
        super().__init__()
        self.calls: Counter = Counter()
        self.flops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        known = GEMMS.get(func)
        if known is not None:
            name, i, j = known
            key = (name, *(_layout(a) for a in args if isinstance(a, torch.Tensor)))
            self.calls[key] += 1
            a, b = args[i], args[j]
            self.flops += 2 * a.numel() * b.shape[-1]
        return func(*args, **(kwargs or {}))


def _operands(layouts: tuple) -> list[torch.Tensor]:
    """Random operands of these sizes and strides (a stride 0, a broadcast bias, repeats its values as the
    recorded one did)."""
    out = []
    for shape, stride in layouts:
        storage = 1 + sum((n - 1) * s for n, s in zip(shape, stride))
        out.append(torch.randn(storage).as_strided(shape, stride))
    return out


def _run(name: str, operands: list[torch.Tensor]) -> None:
    getattr(torch, name)(*operands)


def gemm_seconds(recorder: GemmRecorder, min_seconds: float = 0.05) -> float:
    """The seconds the recorded products take alone: each distinct one timed over at least ``min_seconds`` (after
    a warm-up call) and counted as often as it ran."""
    total = 0.0
    for (name, *layouts), count in recorder.calls.items():
        operands = _operands(tuple(layouts))
        _run(name, operands)
        reps, start = 0, time.perf_counter()
        while True:
            _run(name, operands)
            reps += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                break
        total += count * elapsed / reps
    return total


__all__ = ["GemmRecorder", "gemm_seconds"]
