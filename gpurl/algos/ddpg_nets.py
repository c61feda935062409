"""The deterministic-policy family's networks (MADDPG, IDDPG, MATD3), one definition each.

- :class:`DeterministicActor`: one group's Box policy, ``low + (tanh(mlp(x)) + 1) / 2 (high - low)``; acting
  adds Gaussian noise of the counter RNG (keyed by the seed, the global agent id, the step and the dimension,
  as every gpurl actor) and clips to the Box.
- :class:`Critic`: the Q of every agent of a group, from its own input and action (IDDPG) or from the env's
  global state, every action of the group and the agent's one-hot id (MADDPG's centralised critic).
"""
from __future__ import annotations

from typing import Sequence

import gymnasium
import torch
from torch import nn

from ..envs.params import ParameterError
from ..fusion.counter_rng import uniform_ref
from .distributions import standard_normal
from .layers import mlp


class DeterministicActor(nn.Module):
    """``forward``: inputs [B, in_dim] -> actions float32 [B, A] inside ``space`` (a bounded Box)."""

    def __init__(self, in_dim: int, space: gymnasium.Space, widths: Sequence[int], activation: str,
                 generator: torch.Generator | None = None):
        super().__init__()
        if not isinstance(space, gymnasium.spaces.Box) or len(space.shape) != 1:
            raise ParameterError(f"deterministic-policy algorithms (maddpg, iddpg, matd3) act in 1-d Box spaces, "
                                 f"got {space!r} (mpe scenarios: --env-param continuous_actions=True)")
        low, high = torch.as_tensor(space.low, dtype=torch.float32), torch.as_tensor(space.high, dtype=torch.float32)
        if not (torch.isfinite(low).all() and torch.isfinite(high).all()):
            raise ParameterError(f"deterministic-policy algorithms need a bounded Box, got {space!r}")
        self.action_dims = int(space.shape[0])
        self.net = mlp(in_dim, widths, self.action_dims, activation, 0.01, generator)
        self.register_buffer("low", low)
        self.register_buffer("half_range", (high - low) / 2)
        # the counter RNG's heads: two uniforms per dimension (Box-Muller), on the device
        self.register_buffer("heads", torch.arange(2 * self.action_dims), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.low + (torch.tanh(self.net(x)) + 1) * self.half_range

    def act(self, x: torch.Tensor, agent_ids: torch.Tensor, step: torch.Tensor, seed: torch.Tensor, std: float,
            deterministic: bool = False) -> torch.Tensor:
        """Actions float32 [B, A] for inputs x [B, in_dim]: the policy's, plus N(0, std) noise per dimension in
        units of its half range, clipped to the Box (``deterministic``: the policy's alone). agent_ids int64 [B]
        (global ids), step int64 [1], seed int64 [2]."""
        action = self(x)
        if deterministic or std == 0:
            return action
        noise = standard_normal(uniform_ref(seed, agent_ids.unsqueeze(1), step, self.heads))
        return torch.minimum(torch.maximum(action + std * self.half_range * noise, self.low),
                             self.low + 2 * self.half_range)


class Critic(nn.Module):
    """Q of each of a group's n agents, float32 [B, n].

    ``central=False`` (IDDPG): ``forward(x [B, n, in_dim], actions [B, n, A])``, each agent's own input and
    action. ``central=True`` (MADDPG): ``forward(state [B, in_dim = S], actions [B, n, A])``, the env's global
    state, every action of the group and the agent's one-hot id.
    """

    def __init__(self, in_dim: int, action_dims: int, agents: int, central: bool, widths: Sequence[int],
                 activation: str, generator: torch.Generator | None = None):
        super().__init__()
        self.agents, self.central = agents, central
        width = in_dim + agents * action_dims + agents if central else in_dim + action_dims
        self.net = mlp(width, widths, 1, activation, 1.0, generator)
        self.register_buffer("ids", torch.eye(agents), persistent=False)

    def forward(self, x: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        if self.central:
            B, n = actions.shape[:2]
            joint = actions.reshape(B, 1, -1).expand(B, n, -1)
            x = torch.cat([x.unsqueeze(1).expand(B, n, -1), joint, self.ids.expand(B, n, n)], -1)
        else:
            x = torch.cat([x, actions], -1)
        return self.net(x).squeeze(-1)


__all__ = ["Critic", "DeterministicActor"]
