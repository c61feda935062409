"""What ``QActor`` (and ``BoxActor``: tests/box_acting_harness.py) reads and writes of the trainer, stood up for
its tests: groups, an env spec and a rollout storage holding one step of observations."""
from __future__ import annotations

from types import SimpleNamespace

import torch

ACTION_FILL = -7


def actor_setup(groups: dict[str, tuple[slice, int]], obs: torch.Tensor, columns: int, fill, dtype: torch.dtype,
                env_offset: int = 0):
    """(groups, spec, storage) for an acting fragment over ``obs`` [E, N, D]: ``groups[name] = (agents,
    obs_dim)``; ``storage.policy_input`` and ``storage.frame_views`` give every slot the rows of ``obs``;
    ``storage.actions`` [2, E, N, columns] of ``dtype`` is filled with ``fill`` (``fresh_actions()`` refills it)."""
    E, N, _ = obs.shape
    group_specs = {name: SimpleNamespace(agents=agents, obs_dim=dim) for name, (agents, dim) in groups.items()}
    spec = SimpleNamespace(device=obs.device, env_offset=env_offset, num_agents=N)

    class Storage:
        def __init__(self):
            self.fresh_actions()

        def fresh_actions(self):
            self.actions = torch.full((2, E, N, columns), fill, dtype=dtype, device=obs.device)

        def policy_input(self, t0, t1, agents, dim):
            return obs[None, :, agents, :dim].expand(t1 - t0, -1, -1, -1)

        def frame_views(self, t0, t1, agents, dim):  # one frame: the storage's (frames, starts) of no history
            return (self.policy_input(t0, t1, agents, dim),), ()

    return group_specs, spec, Storage()


def q_actor_setup(groups: dict[str, tuple[slice, int]], obs: torch.Tensor, env_offset: int = 0):
    """:func:`actor_setup` for a ``QActor``: ``storage.actions`` [2, E, N, 1] int64, filled with ACTION_FILL."""
    return actor_setup(groups, obs, 1, ACTION_FILL, torch.int64, env_offset)
