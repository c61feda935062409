"""The trainer's own fragments: the env step, and uniformly random acting for groups that do not learn.

Like an algorithm's fragments they read and write named slots of a :class:`RolloutStorage` and never
know how many devices exist (MSRL's fragments, with torch buffers as the interface).
"""
from __future__ import annotations

import torch

from ..envs.random_actions import RandomActions
from ..storage.rollout import RolloutStorage
from .metrics import EpisodeStats


class RandomActor:
    """Uniformly random actions at step t for ``groups`` (the random baseline, untrained groups)."""

    inputs = ()
    outputs = ("actions[t]",)

    def __init__(self, groups: dict, device: torch.device):
        self.groups = groups
        self.draws = {name: RandomActions(g.action_space, device) for name, g in groups.items()}

    def run(self, s: RolloutStorage, t: int, generator: torch.Generator) -> None:
        for name, group in self.groups.items():
            a = group.agents
            s.actions[t, :, a] = self.draws[name](s.actions[t, :, a].shape, generator)


class EnvFragment:
    """One env step from slot t's actions, written straight into the storage, and its bookkeeping (episode
    starts, episode sums, the acting step counter: one fused pass, :mod:`gpurl.fusion.bookkeeping`)."""

    inputs = ("actions[t]",)
    outputs = ("obs[H + t + 1]", "reward[t]", "terminated[t]", "truncated[t]", "final_obs[t]", "starts", "step")

    def __init__(self, env, stats: EpisodeStats):
        self.env, self.stats = env, stats
        self.metric_rows = env.step_metric_rows()

    def step(self, s: RolloutStorage, t: int) -> None:
        self.env.step(s.actions[t], out=s.step_outputs(t))

    def bookkeeping(self, s: RolloutStorage, t: int, step_counter: torch.Tensor) -> None:
        """After step t: starts of slot H + t + 1, the episode sums, and ``step_counter`` (int64 [1]) + 1."""
        self.stats.step(s.reward[t], s.terminated[t], s.truncated[t], self.metric_rows,
                        s.starts[s.history + t + 1], step_counter)
