"""Groups of agents and their action spaces (the env API's ``env.groups``)."""
from __future__ import annotations

from dataclasses import dataclass

import gymnasium
import numpy as np


@dataclass(frozen=True)
class Group:
    """Agents ``agents`` (a slice of the agent axis) share an obs layout and an action space."""

    agents: slice
    obs_dim: int
    action_space: gymnasium.Space


def action_bounds(space: gymnasium.Space) -> tuple[int, np.ndarray | None]:
    """(action dims, exclusive upper bounds int64 [dims] or None for Box) of a discrete-ish space."""
    if isinstance(space, gymnasium.spaces.Discrete):
        if space.start != 0:
            raise ValueError("gpurl envs use Discrete spaces starting at 0")
        return 1, np.array([space.n], dtype=np.int64)
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        if space.nvec.ndim != 1:
            raise ValueError("gpurl envs use 1-d MultiDiscrete spaces")
        return len(space.nvec), space.nvec.astype(np.int64)
    if isinstance(space, gymnasium.spaces.Box):
        return int(np.prod(space.shape)), None
    raise TypeError(f"unsupported action space {space!r}")
