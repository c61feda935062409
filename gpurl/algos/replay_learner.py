"""The learner of the off-policy actor-critics for Box actions (:mod:`.replay_actor_critic`): ``q_updates`` updates
per iteration from the replay buffer the trainer fills with each rollout's transitions, each ``q_batch``
transitions drawn over the slots and all envs of the run (``ctx.batches``), each row weighted by this rank's share,
as the value-based family does.

An update is one :class:`~.update_step.GradientStep` of :class:`ReplayObjective`, every trained network a view of one
flat parameter (:mod:`.flat`): the gradient of every group's loss summed, the gradients summed over ranks in one
call, each network's norm clipped on its own, then one Adam step per optimizer that is due (each a span of the flat
parameter: the critics' every update, the actors' and the temperature's when the algorithm's ``actor_due``), and,
with the actors, the targets move (one ``lerp_`` of the target flat parameter). On one device with
``learner_backend`` compiled the gather, the losses, their gradient, the clip and the Adam steps are one compiled
region per update (one graph per value of ``actor_due``): nothing is read back, nothing allocated outside it.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from ..storage.replay import gather_rows, group_inputs
from ..storage.rollout import RolloutStorage
from .base import LearnContext
from .flat_adam import annealed_lr
from .update_step import GradientStep

#: the learned networks' names in the objective (the flat parameter's views are passed under it)
PREFIX = "learned."


class GroupBatch(NamedTuple):
    """One group's view of a drawn batch of B transitions (n agents): inputs ``x``, ``x_next`` [B, n, in]; what
    its critics see, ``seen``, ``seen_next`` (the global state [B, S] for a central critic, else ``x``,
    ``x_next``); the actions ``taken`` [B, n, A]; ``reward`` [B, n]; ``terminated`` bool [B]; ``weight`` [B] (this
    rank's share of each row); ``samples``, the global batch's rows x agents (the losses' divisor: ranks weight
    disjoint rows); ``rows`` int64 [B, n, 1], each row-agent's key of the counter RNG's noise."""

    x: torch.Tensor
    x_next: torch.Tensor
    seen: torch.Tensor
    seen_next: torch.Tensor
    taken: torch.Tensor
    reward: torch.Tensor
    terminated: torch.Tensor
    weight: torch.Tensor
    samples: int
    rows: torch.Tensor

    @staticmethod
    def of(algo, name: str, batch: dict) -> "GroupBatch":
        group, frames = algo.spec.groups[name], algo.params.frame_stack
        a = group.agents
        x, x_next = (group_inputs(batch[k], a, group.obs_dim, frames) for k in ("inputs", "next_inputs"))
        seen, seen_next = (batch["state"], batch["next_state"]) if algo.central_critic else (x, x_next)
        B, n = x.shape[:2]
        rows = torch.arange(B * n, device=x.device).view(B, n, 1)
        return GroupBatch(x, x_next, seen, seen_next, batch["actions"][:, a, :algo.actors[name].action_dims],
                          batch["reward"][:, a], batch["terminated"], batch["weight"], B * n, rows)

    def mean(self, values: torch.Tensor) -> torch.Tensor:
        """The weighted mean of ``values`` [B, n] over the global batch (this rank's share of it)."""
        return (values * self.weight[:, None]).sum() / self.samples


class ReplayObjective(nn.Module):
    """Every trained group's loss of one update summed, as the module the learner differentiates
    (:mod:`.update_step`): ``forward(draw, u, rows, buffers, actor_due)`` gathers update ``u``'s (int64 [1])
    transitions from the replay buffers (``rows``: the iteration's draws, ``LearnContext.batches.replay_rows``),
    keys the loss's noise by ``draw + u`` (``draw`` int64 [1], the iteration's first update) and returns ``(loss,
    statistics float32 [groups, len(stat_names) - 1])``: each group's terms (the algorithm's ``group_loss``)
    divided by the updates per iteration, so that summed over an iteration's updates they are its means.

    ``learned``: the trained networks, as the flat parameter lays them out; the algorithm's losses reach them
    through its own attributes (the same modules)."""

    #: the losses draw from the counter RNG (the compile options of such a region, :mod:`.update_step`)
    draws_noise = True

    def __init__(self, algo, learned: nn.ModuleDict):
        super().__init__()
        self.learned, self.algo = learned, algo

    def forward(self, draw: torch.Tensor, u: torch.Tensor, rows: tuple, buffers: tuple, actor_due: bool):
        algo = self.algo
        batch = gather_rows(buffers, *(r.index_select(0, u).squeeze(0) for r in rows))
        loss, terms = 0.0, []
        for name in algo.trained:
            group_loss, group_terms = algo.group_loss(name, GroupBatch.of(algo, name, batch), draw + u, actor_due)
            loss = loss + group_loss
            terms.append(group_terms)
        return loss, torch.stack(terms) / algo.params.q_updates


class ReplayLearner:
    """``q_updates`` updates from the replay buffer per iteration (see the module docstring)."""

    inputs = ("replay",)
    outputs = ("weights", "statistics")

    def __init__(self, algo, iters: int):
        self.algo, self.params, self.iters = algo, algo.params, iters
        self.updates = 0
        #: the iterations done before this one (host-side: the learning rates anneal with no device read)
        self.iteration = 0
        self.compiled = algo.params.learner_backend != "eager"
        self.objective = ReplayObjective(algo, algo.flat_nets)
        device = algo.spec.device
        #: int64 [1]: the draw number of the next update (the replay rows' and the learner's noise's key)
        self.draw = torch.zeros(1, dtype=torch.int64, device=device)
        self.totals = torch.zeros(len(algo.trained), len(algo.stat_names) - 1, device=device)
        #: the update's step by ``actor_due`` (built at the first update, which knows the distribution policy)
        self.steps: dict[bool, GradientStep] | None = None

    def set_updates(self, updates: int, iteration: int) -> None:
        """Continue after ``updates`` updates and ``iteration`` iterations (a loaded checkpoint)."""
        self.updates, self.iteration = updates, iteration
        self.draw.fill_(updates)

    def _build_steps(self, ctx: LearnContext) -> None:
        p, optimizers = self.params, self.algo.optimizers
        reduce = ctx.reduce_gradients if ctx.comm.world_size > 1 else None
        every = [optimizers["optimizer"]]  # the critics'; the others step when the actors' update is due
        self.steps = {due: GradientStep(self.objective, self.algo.flat, PREFIX,
                                        list(optimizers.values()) if due else every, p.max_grad_norm,
                                        self.compiled, reduce)
                      for due in (False, True)}
        self.update_ids = [torch.full((1,), u, dtype=torch.int64, device=self.draw.device)
                           for u in range(p.q_updates)]

    def run(self, storage: RolloutStorage, ctx: LearnContext) -> torch.Tensor:
        p, replay, algo = self.params, ctx.replay, self.algo
        stats = torch.zeros(len(algo.trained), len(algo.stat_names), device=self.draw.device)
        for adam in algo.optimizers.values():
            adam.lr.fill_(annealed_lr(adam.base_lr, self.iteration, self.iters, p.anneal_lr))
        self.iteration += 1
        if ctx.batches.replay_transitions(replay) < p.q_batch:  # not enough transitions yet (all ranks): act only
            return stats
        if self.steps is None:
            self._build_steps(ctx)
        with ctx.timer.phase("learn"):
            rows = ctx.batches.replay_rows(replay, algo.seed, self.draw, p.q_updates, p.q_batch)
            buffers = replay.buffers()
            self.totals.zero_()
            for u in self.update_ids:
                due = algo.actor_due(self.updates)
                self.steps[due](self.totals, self.draw, u, rows, buffers, due)
                if due:
                    algo.update_targets()
                self.updates += 1
            self.draw += p.q_updates
        stats[:, :-1] = ctx.comm.all_reduce_(self.totals.clone())
        stats[:, -1].fill_(self.updates)  # a fill (a setitem of a Python number copies from a host tensor)
        return stats


__all__ = ["GroupBatch", "PREFIX", "ReplayLearner", "ReplayObjective"]
