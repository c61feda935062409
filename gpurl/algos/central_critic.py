"""MAPPO's centralised critic and its value normalisation.

:class:`CentralCritic` is one group's critic over the env's global state ``[E, S]``
(``env.global_state``, docs/specs/global_state.md). With ``agent_id`` it reads, for agent i, the
state concatenated with i's one-hot id (the MAPPO paper's agent-specific global state); the first layer
of that input splits into ``W_s s + W_id[:, i]``, so the state's product is computed once per env and
each agent adds its own column: a step's values for every agent cost one env row of the big product,
not n. Without ``agent_id`` every agent of the group gets the env's one value.

:class:`ValueNorm` keeps running mean and variance of the value targets (the returns); the critic
predicts normalised values, the learner regresses them on normalised returns, and the rollout stores
de-normalised values (what GAE needs). MAPPO's reference implementation calls this ValueNorm; PopArt
additionally rescales the last layer when the statistics move, which gpurl does not do.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import nn

from ..fusion.activations import ACTIVATIONS
from .layers import mlp, orthogonal_linear
from .nets import RunningNorm


class CentralCritic(nn.Module):
    """Values of a group of ``agents`` agents from the global state [B, ``state_dim``].

    ``values(states [B, S]) -> [B, agents]``; ``value_of(states [B, S], agent int64 [B]) -> [B]`` (the
    same function, one agent per row). Inputs are normalised by running statistics (``norm``, updated
    between iterations like the actor's).
    """

    def __init__(self, state_dim: int, agents: int, widths: Sequence[int] = (64, 64), activation: str = "tanh",
                 agent_id: bool = True, norm: bool = True, generator: torch.Generator | None = None):
        super().__init__()
        self.state_dim, self.agents, self.agent_id = state_dim, agents, agent_id
        self.state_norm = RunningNorm(state_dim) if norm else nn.Identity()
        ids = agents if agent_id else 0
        # The first layer over [state, one-hot id], initialised as one orthogonal Linear, held as its
        # state columns (``first``) and its id columns (``agent_columns`` [agents, widths[0]]: W_id^T).
        whole = orthogonal_linear(state_dim + ids, widths[0], math.sqrt(2), generator)
        self.first = nn.Linear(state_dim, widths[0])
        with torch.no_grad():
            self.first.weight.copy_(whole.weight[:, :state_dim])
            self.first.bias.copy_(whole.bias)
        self.agent_columns = nn.Parameter(whole.weight[:, state_dim:].T.contiguous())
        self.first_activation = ACTIVATIONS[activation]()
        self.rest = mlp(widths[0], widths[1:], 1, activation, 1.0, generator)

    def values(self, states: torch.Tensor) -> torch.Tensor:
        pre = self.first(self.state_norm(states))                                   # [B, widths[0]]
        if not self.agent_id:
            return self.rest(self.first_activation(pre)).expand(-1, self.agents)
        pre = pre.unsqueeze(1) + self.agent_columns                                 # [B, agents, widths[0]]
        return self.rest(self.first_activation(pre)).squeeze(-1)

    def value_of(self, states: torch.Tensor, agent: torch.Tensor) -> torch.Tensor:
        pre = self.first(self.state_norm(states))
        if self.agent_id:
            pre = pre + self.agent_columns[agent]
        return self.rest(self.first_activation(pre)).squeeze(-1)


class ValueNorm(nn.Module):
    """Running mean and variance of value targets (buffers, saved with the critic): ``normalize`` maps
    returns into the critic's units, ``denormalize`` maps its predictions back. Updated once per
    iteration from that rollout's returns (summed over ranks), before the update uses them."""

    def __init__(self):
        super().__init__()
        self.stats = RunningNorm(1, clip=math.inf)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.stats.mean) * torch.rsqrt(self.stats.var + 1e-8)

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sqrt(self.stats.var + 1e-8) + self.stats.mean

    @torch.no_grad()
    def update(self, returns: torch.Tensor, comm=None) -> None:
        self.stats.update(returns.reshape(-1, 1), comm)


__all__ = ["CentralCritic", "ValueNorm"]
