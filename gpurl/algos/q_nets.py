"""Q-networks of the value-based algorithms (IQL, VDN, QMIX) and their epsilon-greedy acting, one definition.

:meth:`QNetwork.act` is the reference every acting backend is held to: the greedy action is the argmax of
the Qs (the lowest index on ties, as ``torch.argmax``); with probability epsilon the agent takes a
uniformly random action instead. Both draws come from the counter RNG (``uniform_ref``) keyed by the
seed, the global agent id, the global step and a head index, so an agent's action does not depend on the
batch layout or the number of devices.
"""
from __future__ import annotations

from typing import Sequence

import gymnasium
import torch
from torch import nn

from ..envs.params import ParameterError
from ..fusion.counter_rng import uniform_ref
from ..fusion.q_actor import EXPLORE_HEAD, RANDOM_ACTION_HEAD
from .layers import mlp


def linear_epsilon(step: torch.Tensor, start: float, end: float, decay_steps: int) -> torch.Tensor:
    """Epsilon at global step ``step`` (int64 [1], on the device): ``start`` moving linearly to ``end``
    over ``decay_steps`` steps, then ``end``. float32 [1]; computed on the device (no host sync)."""
    if decay_steps <= 0:
        return torch.full_like(step, end, dtype=torch.float32)
    frac = (step.to(torch.float32) / decay_steps).clamp(max=1.0)
    return start + (end - start) * frac


class QNetwork(nn.Module):
    """One Q per action for each row of one group's policy inputs: [B, in_dim] -> [B, A] (Discrete(A)).

    ``widths``: hidden layer widths; ``activation``: a name of gpurl.fusion.activations (the fused kernel
    has the same set); ``generator``: draws the initial weights (the same on every rank).
    """

    def __init__(self, in_dim: int, space: gymnasium.Space, widths: Sequence[int], activation: str,
                 generator: torch.Generator | None = None):
        super().__init__()
        if not isinstance(space, gymnasium.spaces.Discrete):
            raise ParameterError(f"value-based algorithms (iql, vdn, qmix) act in Discrete spaces, got {space!r}")
        self.num_actions = int(space.n)
        self.net = mlp(in_dim, widths, self.num_actions, activation, 1.0, generator)
        # The RNG's head indices on the network's device: no host copy while a CUDA graph captures acting.
        self.register_buffer("heads", torch.tensor([EXPLORE_HEAD, RANDOM_ACTION_HEAD]), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def act(self, x: torch.Tensor, agent_ids: torch.Tensor, step: torch.Tensor, seed: torch.Tensor,
            epsilon: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Epsilon-greedy actions ``(action int64 [B, 1], q float32 [B, A])`` for inputs x [B, in_dim].

        agent_ids int64 [B] (global ids), step int64 [1], seed int64 [2] (the counter RNG's key halves),
        epsilon float32 [1] or a float.
        """
        q = self(x)
        u = uniform_ref(seed, agent_ids.unsqueeze(1), step, self.heads)  # [B, 2]
        random_action = (u[:, 1] * self.num_actions).to(torch.int64).clamp(max=self.num_actions - 1)
        action = torch.where(u[:, 0] < epsilon, random_action, q.argmax(-1))
        return action.unsqueeze(-1), q
