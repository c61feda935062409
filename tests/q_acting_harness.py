"""What ``QActor`` reads and writes of the trainer, stood up for its tests: groups, an env spec and a
rollout storage holding one step of observations."""
from __future__ import annotations

from types import SimpleNamespace

import torch

ACTION_FILL = -7


def q_actor_setup(groups: dict[str, tuple[slice, int]], obs: torch.Tensor, env_offset: int = 0):
    """(groups, spec, storage) for a ``QActor`` over ``obs`` [E, N, D]: ``groups[name] = (agents, obs_dim)``;
    ``storage.policy_input`` gives every slot the rows of ``obs``; ``storage.actions`` [2, E, N, 1] int64 is
    filled with ACTION_FILL (``fresh_actions()`` refills it)."""
    E, N, _ = obs.shape
    group_specs = {name: SimpleNamespace(agents=agents, obs_dim=dim) for name, (agents, dim) in groups.items()}
    spec = SimpleNamespace(device=obs.device, env_offset=env_offset, num_agents=N)

    class Storage:
        def __init__(self):
            self.fresh_actions()

        def fresh_actions(self):
            self.actions = torch.full((2, E, N, 1), ACTION_FILL, dtype=torch.int64, device=obs.device)

        def policy_input(self, t0, t1, agents, dim):
            return obs[None, :, agents, :dim].expand(t1 - t0, -1, -1, -1)

        def frame_views(self, t0, t1, agents, dim):  # one frame: the storage's (frames, starts) of no history
            return (self.policy_input(t0, t1, agents, dim),), ()

    return group_specs, spec, Storage()
