"""What ``BoxActor`` reads and writes of the trainer, stood up for its tests: groups, an env spec, a rollout
storage holding one step of observations, and the Box policies of both kinds."""
from __future__ import annotations

import gymnasium
import numpy as np
import torch

from gpurl.algos.box_nets import DeterministicActor, SquashedGaussianActor
from q_acting_harness import actor_setup

#: What the action buffer holds before acting: outside every test Box, so a written slot shows.
ACTION_FILL = -77.0
#: Bounds whose differences are exact in float32 (``low + 2 half_range`` is ``high``): per dimension,
#: the first ``A`` of these.
LOWS = (0.0, -1.0, -2.5, 0.25, -0.5, 1.0, -4.0)
HIGHS = (1.0, 1.0, 0.5, 0.75, 3.5, 2.0, -1.0)


def box(action_dims: int) -> gymnasium.spaces.Box:
    return gymnasium.spaces.Box(np.array(LOWS[:action_dims], np.float32), np.array(HIGHS[:action_dims], np.float32))


def box_policy(kind: str, in_dim: int, action_dims: int, widths=(32, 32), activation: str = "tanh", seed: int = 0,
               spread: float = 1.0):
    """A ``DeterministicActor`` (``kind`` "deterministic") or ``SquashedGaussianActor`` ("squashed") whose
    outputs spread over the Box (the output layer's gain of 0.01 scaled up by ``100 spread``, random biases)."""
    cls = {"deterministic": DeterministicActor, "squashed": SquashedGaussianActor}[kind]
    actor = cls(in_dim, box(action_dims), widths, activation, torch.Generator().manual_seed(seed))
    with torch.no_grad():
        out = actor.net[-1]
        out.weight.mul_(100.0 * spread)
        out.bias.normal_(0.0, 0.5, generator=torch.Generator().manual_seed(seed + 7))
    return actor


def box_actor_setup(groups: dict[str, tuple[slice, int]], obs: torch.Tensor, columns: int, env_offset: int = 0):
    """(groups, spec, storage) for a ``BoxActor`` over ``obs`` [E, N, D] (q_acting_harness's stand-in):
    ``storage.actions`` [2, E, N, columns] float32, filled with ACTION_FILL."""
    return actor_setup(groups, obs, columns, ACTION_FILL, torch.float32, env_offset)
