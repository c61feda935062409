"""What crosses between ranks: a small facade over torch.distributed that counts the bytes it moves.

``LocalComm`` (in :mod:`.placement`) is the one-process case. ``ProcessGroupComm`` runs
the same methods on the default process group (NCCL on CUDA, gloo on the CPU). ``bytes_sent`` is what
this rank put on the wire, each collective's payload counted once; the scaling benchmark reports it
per iteration.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

_OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


class ProcessGroupComm:
    """Collectives on the default process group (``torch.distributed`` must be initialised)."""

    def __init__(self):
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.bytes_sent = 0

    def all_reduce_(self, tensor: torch.Tensor, op: str = "sum") -> torch.Tensor:
        """In place over all ranks (``op``: sum, max, min)."""
        dist.all_reduce(tensor, op=_OPS[op])
        self.bytes_sent += _nbytes(tensor)
        return tensor

    def broadcast_(self, tensor: torch.Tensor, src: int = 0, async_op: bool = False):
        """In place from ``src``; with ``async_op`` returns the work handle to ``wait()`` on."""
        work = dist.broadcast(tensor, src=src, async_op=async_op)
        if self.rank == src:
            self.bytes_sent += _nbytes(tensor)
        return work

    def gather_cat(self, tensor: torch.Tensor, dim: int, dst: int = 0) -> torch.Tensor | None:
        """Every rank's ``tensor`` (same shape everywhere) concatenated along ``dim`` on ``dst``; None
        elsewhere."""
        flags = tensor.dtype == torch.bool  # gloo has no bool collectives: move flags as bytes
        tensor = (tensor.view(torch.uint8) if flags else tensor).contiguous()
        parts = [torch.empty_like(tensor) for _ in range(self.world_size)] if self.rank == dst else None
        dist.gather(tensor, parts, dst=dst)
        if self.rank != dst:
            self.bytes_sent += _nbytes(tensor)
            return None
        out = torch.cat(parts, dim)
        return out.view(torch.bool) if flags else out

    def all_gather_cat(self, tensor: torch.Tensor, dim: int) -> torch.Tensor:
        """Every rank's ``tensor`` concatenated along ``dim``, on every rank."""
        flags = tensor.dtype == torch.bool
        tensor = (tensor.view(torch.uint8) if flags else tensor).contiguous()
        parts = [torch.empty_like(tensor) for _ in range(self.world_size)]
        dist.all_gather(parts, tensor)
        self.bytes_sent += _nbytes(tensor)
        out = torch.cat(parts, dim)
        return out.view(torch.bool) if flags else out

    def barrier(self) -> None:
        dist.barrier()
