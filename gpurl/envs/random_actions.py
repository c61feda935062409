"""Uniformly random actions of a Gymnasium space, drawn on the device (the random baseline, untrained
groups, random episodes to draw)."""
from __future__ import annotations

import gymnasium
import numpy as np
import torch


class RandomActions:
    """Uniform per categorical head; uniform in a bounded Box, standard normal in an unbounded one.

    The space's bounds are copied to the device once, here, not per step.
    """

    def __init__(self, space: gymnasium.Space, device: torch.device):
        self.space = space
        if isinstance(space, gymnasium.spaces.Discrete):
            self.nvec = torch.tensor([int(space.n)], device=device)
        elif isinstance(space, gymnasium.spaces.MultiDiscrete):
            self.nvec = torch.as_tensor(space.nvec, dtype=torch.int64, device=device)
        elif isinstance(space, gymnasium.spaces.Box):
            self.nvec = None
            self.bounded = bool(np.isfinite(space.low).all() and np.isfinite(space.high).all())
            self.low = torch.as_tensor(space.low, dtype=torch.float32, device=device)
            self.span = torch.as_tensor(space.high, dtype=torch.float32, device=device) - self.low
        else:
            raise TypeError(f"no random policy for action space {space!r}")

    def __call__(self, shape: torch.Size, generator: torch.Generator) -> torch.Tensor:
        """Actions of ``shape`` [..., action_dims] (int64 for categorical heads, float32 for Box)."""
        device = generator.device
        if self.nvec is not None:
            u = torch.rand(shape, device=device, generator=generator)
            return (u * self.nvec).to(torch.int64).clamp_(max=self.nvec - 1)
        if self.bounded:
            return self.low + self.span * torch.rand(shape, device=device, generator=generator)
        return torch.randn(shape, device=device, generator=generator)


def action_columns(space: gymnasium.Space) -> int:
    """Columns of one agent's action: 1 for Discrete, one per head or Box dimension otherwise."""
    return int(np.prod(space.shape)) if space.shape else 1


__all__ = ["RandomActions", "action_columns"]
