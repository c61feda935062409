"""What the host reads of a running training loop, read one iteration late so it never waits on work it
has just queued.

- :class:`Readback`: a device vector copied into pinned host memory behind a CUDA event (plain host memory
  and no event on the CPU); the loop pushes a record after queuing an iteration and takes it back during
  the next one, when the device has long finished it. At most one record stays in flight, so the host runs
  at most one iteration ahead of the device.
- :class:`NonFiniteWatch`: whether any learner statistic has been NaN/Inf since the run began, and the first
  iteration that had one with its statistics, kept on the device every iteration and read with the record:
  the NaN/Inf check costs no host read of its own.
"""
from __future__ import annotations

from collections import deque

import torch


class Readback:
    """Device vectors read on the host after the device has produced them (see the module docstring)."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self._pending: deque = deque()

    def push(self, values: torch.Tensor, tag) -> None:
        """Queue a copy of ``values`` (a 1-D device tensor) to the host, labelled ``tag``."""
        host = torch.empty(values.shape, dtype=values.dtype, pin_memory=self.cuda)
        host.copy_(values, non_blocking=self.cuda)
        event = None
        if self.cuda:
            event = torch.cuda.Event()
            event.record()
        self._pending.append((tag, host, event))

    def pop(self, keep: int = 1) -> list[tuple]:
        """``(tag, host values)`` of every record but the newest ``keep``, oldest first, waiting for their copies
        (older than the device's current work: the wait is for work already done or about to be)."""
        out = []
        while len(self._pending) > keep:
            tag, host, event = self._pending.popleft()
            if event is not None:
                event.synchronize()  # host-ok: a record of the previous iteration (or a flush)
            out.append((tag, host))
        return out

    def __len__(self) -> int:
        return len(self._pending)


class NonFiniteWatch:
    """Device flags of non-finite learner statistics: ``update(stats, iteration)`` every iteration (stats
    float32 [groups, S]; iteration int64 [1], the iterations done), ``state()`` as a float64 vector for a
    record: [any non-finite so far, the first such iteration, its statistics (groups x S)]."""

    def __init__(self, shape: tuple[int, int], device: torch.device):
        self.bad = torch.zeros(1, dtype=torch.bool, device=device)
        self.first_iteration = torch.zeros(1, dtype=torch.int64, device=device)
        self.first_stats = torch.zeros(shape, device=device)

    def update(self, stats: torch.Tensor, iteration: torch.Tensor) -> None:
        bad = ~torch.isfinite(stats).all().view(1)
        first = bad & ~self.bad
        self.first_iteration.copy_(torch.where(first, iteration, self.first_iteration))
        self.first_stats.copy_(torch.where(first, stats, self.first_stats))
        self.bad.logical_or_(bad)

    def state(self) -> torch.Tensor:
        return torch.cat([self.bad.double(), self.first_iteration.double(), self.first_stats.double().reshape(-1)])

    @staticmethod
    def width(shape: tuple[int, int]) -> int:
        return 2 + shape[0] * shape[1]


__all__ = ["NonFiniteWatch", "Readback"]
