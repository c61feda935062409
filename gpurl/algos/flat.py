"""Every trained parameter as a view of one flat parameter, and every gradient as a view of one flat
gradient: the optimizer step, zeroing, the all-reduce between ranks and each group's norm clip are one
operation each instead of one per tensor (a small MLP has dozens of tensors, and on the CPU the
per-tensor overheads of an optimizer step cost more than its arithmetic).

The modules keep their own ``nn.Parameter`` objects (autograd differentiates them as usual); their
storage is the flat parameter's, so the optimizer, which holds only the flat parameter, updates them
in place. Autograd accumulates into an existing ``.grad`` in place, so the gradient views stay views;
nothing may set them to None (``optimizer.zero_grad()`` would) or move the modules afterwards.
"""
from __future__ import annotations

import torch
from torch import nn


class FlatParameters:
    """The parameters of ``nets`` (one module per group) flattened; build it after moving ``nets`` to
    their device. ``param``: the flat ``nn.Parameter`` the optimizer steps; ``grad``: its gradient;
    ``groups``: each group's slice of ``grad``."""

    def __init__(self, nets: nn.ModuleDict):
        params = {name: list(net.parameters()) for name, net in nets.items()}
        sizes = {name: sum(p.numel() for p in ps) for name, ps in params.items()}
        first = next(iter(nets.parameters()))
        with torch.no_grad():
            self.param = nn.Parameter(torch.cat([p.reshape(-1) for ps in params.values() for p in ps]))
        self.grad = self.param.grad = torch.zeros_like(self.param)
        assert self.param.device == first.device
        self.groups: dict[str, torch.Tensor] = {}
        offset = 0
        for name, ps in params.items():
            self.groups[name] = self.grad[offset:offset + sizes[name]]
            for p in ps:
                n = p.numel()
                p.data = self.param.data[offset:offset + n].view_as(p)
                p.grad = self.grad[offset:offset + n].view_as(p)
                offset += n

    @torch.no_grad()
    def clip_(self, max_norm: float) -> None:
        """``nn.utils.clip_grad_norm_`` of each group's gradients on its own."""
        for grads in self.groups.values():
            grads.mul_((max_norm / (torch.linalg.vector_norm(grads) + 1e-6)).clamp(max=1.0))


__all__ = ["FlatParameters"]
