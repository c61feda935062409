"""Every trained parameter as a view of one flat parameter.

The optimizer step, the all-reduce between ranks and each group's norm clip are then one operation
each instead of one per tensor (a small MLP has dozens of tensors, and per-tensor overheads cost more
than the arithmetic, on the CPU and in kernel launches on a GPU). The learner differentiates a function
of the flat vector (:mod:`.update_step`): the gradient is one flat tensor too, never per-parameter
``.grad`` views.

The modules keep their own ``nn.Parameter`` objects, whose storage is the flat parameter's: acting reads
the modules, and an update of the flat vector in place is seen there. Nothing may move the modules
afterwards.
"""
from __future__ import annotations

import torch
from torch import nn


class FlatParameters:
    """The parameters of ``nets`` (one module per group) flattened; build it after moving ``nets`` to
    their device.

    - ``param``: the flat ``nn.Parameter`` (float32 [P]); ``data`` the same memory without autograd (what
      an update writes in place);
    - ``names``: each parameter's name within ``nets`` (``"<group>.<path>"``), in flat order, with its
      ``shapes`` and ``sizes``;
    - ``spans``: each group's ``(start, stop)`` in the flat vector (each group's gradient norm is clipped
      on its own).
    """

    def __init__(self, nets: nn.ModuleDict):
        named = list(nets.named_parameters())
        first = named[0][1]
        with torch.no_grad():
            self.param = nn.Parameter(torch.cat([p.reshape(-1) for _, p in named]))
        assert self.param.device == first.device
        self.data = self.param.detach()
        self.names = [name for name, _ in named]
        self.shapes = [p.shape for _, p in named]
        self.sizes = [p.numel() for _, p in named]
        self.spans: dict[str, tuple[int, int]] = {}
        offset = 0
        for (name, p), n in zip(named, self.sizes):
            group = name.split(".", 1)[0]
            start = self.spans.get(group, (offset, offset))[0]
            p.data = self.param.data[offset:offset + n].view_as(p)
            offset += n
            self.spans[group] = (start, offset)

    def views(self, flat: torch.Tensor, prefix: str = "") -> dict[str, torch.Tensor]:
        """``{prefix + name: view of flat}`` for every parameter: what ``torch.func.functional_call`` takes
        to run the modules on ``flat`` (a vector laid out as ``param``)."""
        return {prefix + name: part.view(shape)
                for name, part, shape in zip(self.names, flat.split(self.sizes), self.shapes)}


__all__ = ["FlatParameters"]
