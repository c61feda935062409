"""The trainer's three fragments: env, actor and learner, each with declared buffer inputs and outputs.

A fragment reads and writes named slots of a :class:`RolloutStorage` and never knows how many devices
exist; a distribution policy (:class:`~gpurl.train.placement.Placement` and ``gpurl.multigpu``)
decides on which ranks each one runs and moves buffers between them (MSRL's fragments, with torch
buffers as the interface).
"""
from __future__ import annotations

import torch
from torch import nn

from ..fusion.gae import gae
from .config import TrainConfig
from .metrics import EpisodeStats, nvtx_range
from .placement import EnvShard, Placement
from .ppo import GroupBatch, ppo_update
from .storage import RolloutStorage


class ActorFragment:
    """Policies (and uniformly random acting for untrained groups) of every group at step t."""

    inputs = ("obs[H + t]", "starts")
    outputs = ("actions[t]", "log_prob[t]", "value[t]")

    def __init__(self, groups, policies: nn.ModuleDict, actors: dict, random_policies: dict):
        self.groups, self.policies, self.actors, self.random_policies = groups, policies, actors, random_policies

    def run(self, s: RolloutStorage, t: int, step: torch.Tensor, generator: torch.Generator,
            random: bool = False, seed: int | None = None) -> None:
        """``step``: int64 [1] on the device, the counter RNG's step; ``seed`` overrides the run's
        (evaluation); ``generator`` samples Box heads and random acting."""
        for name, group in self.groups.items():
            agents = group.agents
            if random or name not in self.policies:
                s.actions[t, :, agents] = self.random_policies[name](s.actions[t, :, agents].shape, generator)
                continue
            x = s.policy_input(t, t + 1, agents, group.obs_dim)[0]
            if name in self.actors:
                self.actors[name](x, step, s.actions[t, :, agents], s.log_prob[t, :, agents],
                                  s.value[t, :, agents], seed)
                continue
            E, n, _ = x.shape
            action, log_prob, value = self.policies[name].act(x.reshape(E * n, -1), generator)
            s.actions[t, :, agents] = action.view(E, n, -1)
            s.log_prob[t, :, agents] = log_prob.view(E, n)
            s.value[t, :, agents] = value.view(E, n)


class EnvFragment:
    """One env step from slot t's actions, written straight into the storage, and its bookkeeping."""

    inputs = ("actions[t]",)
    outputs = ("obs[H + t + 1]", "reward[t]", "terminated[t]", "truncated[t]", "final_obs[t]", "starts")

    def __init__(self, env, stats: EpisodeStats):
        self.env, self.stats = env, stats

    def step(self, s: RolloutStorage, t: int) -> None:
        self.env.step(s.actions[t], out=s.step_outputs(t))

    def bookkeeping(self, s: RolloutStorage, t: int) -> None:
        s.mark_starts(t)
        self.stats.update(s.reward[t], s.terminated[t], s.truncated[t], self.env.step_metrics())


class LearnerFragment:
    """Advantages (GAE with truncation bootstrap) and the PPO update over a whole rollout storage."""

    inputs = ("obs", "starts", "final_obs", "reward", "terminated", "truncated", "actions", "log_prob", "value")
    outputs = ("policy parameters", "loss statistics")

    def __init__(self, cfg: TrainConfig, groups, trained: list[str], policies: nn.ModuleDict,
                 optimizer: torch.optim.Optimizer, shard: EnvShard, placement: Placement):
        self.cfg, self.groups, self.trained = cfg, groups, trained
        self.policies, self.optimizer = policies, optimizer
        self.shard, self.placement = shard, placement

    def run(self, s: RolloutStorage, generator: torch.Generator, timer) -> dict[str, torch.Tensor]:
        """``generator`` draws the global minibatches (same state on every rank)."""
        with timer.phase("advantages"):
            self.compute_advantages(s)
        with timer.phase("learn"):
            batches = self.group_batches(s)
            losses = ppo_update(self.policies, self.optimizer, batches, self.cfg, generator, self.shard,
                                self.placement)
            if self.cfg.norm_obs:  # for the next rollout; this one's update saw the statistics it acted on
                comm = None if self.shard.whole else self.placement.comm
                for name, batch in batches.items():
                    self.policies[name].obs_norm.update(batch.inputs, comm)
        return losses

    @torch.no_grad()
    def compute_advantages(self, s: RolloutStorage) -> None:
        cfg, T = self.cfg, s.steps
        s.final_value.zero_()
        # The one host read of the iteration: which (t, e) were cut by the time limit.
        ended_t, ended_e = s.truncated.nonzero(as_tuple=True)  # host-ok: after the rollout
        for name in self.trained:
            group = self.groups[name]
            policy, agents = self.policies[name], group.agents
            x = s.policy_input(T, T + 1, agents, group.obs_dim)[0]
            s.value[T, :, agents] = policy.value(x.reshape(-1, x.shape[-1])).view(x.shape[:2])
            if len(ended_t):
                xf = s.final_input(ended_t, ended_e, agents, group.obs_dim)
                s.final_value[ended_t, ended_e, agents] = policy.value(xf.reshape(-1, xf.shape[-1])).view(xf.shape[:2])
        backend = {"auto": "auto", "torch": "torch", "fused": "triton"}[cfg.policy_backend]
        with nvtx_range("gae"):
            s.advantages, s.returns = gae(s.reward, s.value, s.final_value, s.terminated, s.truncated,
                                          cfg.gamma, cfg.gae_lambda, backend=backend)

    def group_batches(self, s: RolloutStorage) -> dict[str, GroupBatch]:
        batches = {}
        for name in self.trained:
            group = self.groups[name]
            a = group.agents
            inputs = s.policy_input(0, s.steps, a, group.obs_dim)
            batches[name] = GroupBatch(
                inputs=inputs.reshape(-1, inputs.shape[-1]), actions=s.actions[:, :, a].reshape(-1, s.actions.shape[-1]),
                log_prob=s.log_prob[:, :, a].reshape(-1), advantages=s.advantages[:, :, a].reshape(-1),
                returns=s.returns[:, :, a].reshape(-1), values=s.value[:-1, :, a].reshape(-1),
                agents=a.stop - a.start)
        return batches
