"""The networks of the off-policy algorithms for Box actions (MADDPG, IDDPG, MATD3; MASAC, ISAC), one
definition each.

- :class:`DeterministicActor` (the DDPG family): one group's Box policy, ``low + (tanh(mlp(x)) + 1) half_range``;
  acting adds Gaussian noise of the counter RNG (keyed by the seed, the global agent id, the step and the
  dimension, as every gpurl actor) and clips to the Box.
- :class:`SquashedGaussianActor` (the SAC family): a Gaussian of mean and log-std ``mlp(x)`` squashed by tanh
  into the Box, ``low + (tanh(u) + 1) half_range``; its log-density in the Box is
  :func:`squashed_log_prob`. Acting samples it with the counter RNG's normals (the mean's squash when
  deterministic).
- :class:`Critic`: the Q of every agent of a group, from its own input and action (IDDPG) or from the env's
  global state, every action of the group and the agent's one-hot id (MADDPG's centralised critic).
"""
from __future__ import annotations

import math
from typing import Sequence

import gymnasium
import torch
from torch import nn

from ..envs.params import ParameterError
from ..fusion.box_actor import LOG_STD_MAX, LOG_STD_MIN
from ..fusion.counter_rng import uniform_ref
from .distributions import standard_normal
from .layers import mlp




class BoxPolicy(nn.Module):
    """A group's policy over a bounded 1-d Box: its bounds as buffers (``low``, ``half_range`` float32 [A]),
    ``action_dims`` A, the counter RNG's ``heads`` (two uniforms per dimension, Box-Muller) and ``net``, an MLP
    of ``outputs_per_dim * A`` outputs."""

    outputs_per_dim = 1

    def __init__(self, in_dim: int, space: gymnasium.Space, widths: Sequence[int], activation: str,
                 generator: torch.Generator | None = None):
        super().__init__()
        if not isinstance(space, gymnasium.spaces.Box) or len(space.shape) != 1:
            raise ParameterError(f"the off-policy Box algorithms (maddpg, iddpg, matd3, masac, isac) act in 1-d Box "
                                 f"spaces, got {space!r} (mpe scenarios: --env-param continuous_actions=True)")
        low, high = torch.as_tensor(space.low, dtype=torch.float32), torch.as_tensor(space.high, dtype=torch.float32)
        if not (torch.isfinite(low).all() and torch.isfinite(high).all()):
            raise ParameterError(f"the off-policy Box algorithms need a bounded Box, got {space!r}")
        self.action_dims = int(space.shape[0])
        self.net = mlp(in_dim, widths, self.outputs_per_dim * self.action_dims, activation, 0.01, generator)
        self.register_buffer("low", low)
        self.register_buffer("half_range", (high - low) / 2)
        self.register_buffer("heads", torch.arange(2 * self.action_dims), persistent=False)

    def squash(self, u: torch.Tensor) -> torch.Tensor:
        """``low + (tanh(u) + 1) half_range``: u [..., A] of any real values into the Box."""
        return self.low + (torch.tanh(u) + 1) * self.half_range

    def normals(self, agent_ids: torch.Tensor, step: torch.Tensor, seed: torch.Tensor) -> torch.Tensor:
        """float32 [B, A]: the counter RNG's standard normals of agents ``agent_ids`` int64 [B] at ``step``."""
        return standard_normal(uniform_ref(seed, agent_ids.unsqueeze(1), step, self.heads))


class DeterministicActor(BoxPolicy):
    """``forward``: inputs [B, in_dim] -> actions float32 [B, A] inside ``space`` (a bounded Box)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.squash(self.net(x))

    def act(self, x: torch.Tensor, agent_ids: torch.Tensor, step: torch.Tensor, seed: torch.Tensor, std: float,
            deterministic: bool = False) -> torch.Tensor:
        """Actions float32 [B, A] for inputs x [B, in_dim]: the policy's, plus N(0, std) noise per dimension in
        units of its half range, clipped to the Box (``deterministic``: the policy's alone). agent_ids int64 [B]
        (global ids), step int64 [1], seed int64 [2]."""
        action = self(x)
        if deterministic or std == 0:
            return action
        noise = self.normals(agent_ids, step, seed)
        return torch.minimum(torch.maximum(action + std * self.half_range * noise, self.low),
                             self.low + 2 * self.half_range)


def squashed_log_prob(noise: torch.Tensor, log_std: torch.Tensor, u: torch.Tensor,
                      half_range: torch.Tensor) -> torch.Tensor:
    """float32 [B]: the log-density in the Box of ``low + (tanh(u) + 1) half_range``, u = mean + exp(log_std)
    noise (noise, log_std, u [B, A]; half_range [A]): the Gaussian's, less ``log |d action / d u|`` =
    ``log(1 - tanh(u)^2) + log(half_range)`` per dimension. ``log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2 u))``
    stays finite where tanh(u) rounds to +-1."""
    gaussian = -0.5 * noise.square() - log_std - 0.5 * math.log(2 * math.pi)
    log_det = 2 * (math.log(2) - u - nn.functional.softplus(-2 * u)) + half_range.log()
    return (gaussian - log_det).sum(-1)


class SquashedGaussianActor(BoxPolicy):
    """A Gaussian over ``u`` squashed into the Box (see the module docstring); ``forward``: inputs [B, in_dim] ->
    the mean's squash float32 [B, A] (the deterministic action)."""

    outputs_per_dim = 2

    def gaussian(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, log_std), float32 [B, A] each, for inputs x [B, in_dim]."""
        mean, raw = self.net(x).split(self.action_dims, -1)
        return mean, LOG_STD_MIN + (torch.tanh(raw) + 1) * (0.5 * (LOG_STD_MAX - LOG_STD_MIN))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.squash(self.gaussian(x)[0])

    def sample(self, x: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(actions float32 [B, A], their log-density float32 [B]) for inputs x [B, in_dim] and standard normals
        ``noise`` [B, A] (reparameterised: differentiable in the network's parameters)."""
        mean, log_std = self.gaussian(x)
        u = mean + log_std.exp() * noise
        return self.squash(u), squashed_log_prob(noise, log_std, u, self.half_range)

    def act(self, x: torch.Tensor, agent_ids: torch.Tensor, step: torch.Tensor, seed: torch.Tensor, std: float = 0.0,
            deterministic: bool = False) -> torch.Tensor:
        """Actions float32 [B, A] for inputs x [B, in_dim]: a sample of the policy with the counter RNG's normals
        of ``agent_ids`` int64 [B] at ``step`` int64 [1] and ``seed`` int64 [2] (``deterministic``: the mean's
        squash). ``std`` is unused (the policy's own spread explores), taken for the DDPG actor's signature."""
        if deterministic:
            return self(x)
        return self.sample(x, self.normals(agent_ids, step, seed))[0]


class Critic(nn.Module):
    """Q of each of a group's n agents, float32 [B, n].

    ``central=False`` (IDDPG): ``forward(x [B, n, in_dim], actions [B, n, A])``, each agent's own input and
    action. ``central=True`` (MADDPG): ``forward(state [B, in_dim = S], actions [B, n, A])``, the env's global
    state, every action of the group and the agent's one-hot id. (One row per transition with n outputs does a
    third of this work on simple_spread, but learned less: MADDPG's return fell on both MPE tasks, one seed in
    three of simple_spread not learning at all; docs/benchmarks.md, 2026-11-30, tenth session.)
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


__all__ = ["BoxPolicy", "Critic", "DeterministicActor", "LOG_STD_MAX", "LOG_STD_MIN", "SquashedGaussianActor",
           "squashed_log_prob"]
