"""What the off-policy actor-critics for Box actions share (MADDPG, IDDPG, MATD3 in :mod:`.ddpg`; MASAC, ISAC in
:mod:`.sac`): one actor per trained group (:mod:`.box_nets`, shared by the group's agents), one or two critics
with target copies, the acting fragment and the learner loop. An algorithm of the family names its actor and
its parameters and writes one group's loss of one update (:meth:`ReplayActorCritic.group_loss`).

- Actor fragment: :class:`~.box_acting.BoxActor` writes every trained group's actions at slot t by the actor's
  ``act`` (the counter RNG's noise, inside the Box), as ``policy_backend`` generates it (eager, compiled, or the
  fused Triton kernel).
- Learner fragment: :class:`ReplayLearner` learns from the replay buffer the trainer fills with each rollout's
  transitions: ``q_updates`` updates of ``q_batch`` transitions drawn over the slots and all envs of the run
  (``ctx.batches``), each row weighted by this rank's share, as the value-based family does. An update sums
  every group's loss, runs one backward pass, sums the gradients over ranks in one call, clips each network's
  gradient norm and steps the critics' optimizer, and the actors' (with the target update) when
  :meth:`ReplayActorCritic.actor_due`.
"""
from __future__ import annotations

import copy
from typing import NamedTuple

import torch
from torch import nn
from torch.func import functional_call

from ..fusion.counter_rng import seed_tensor
from ..storage.replay import gather_rows, group_inputs
from ..storage.rollout import RolloutStorage
from .base import Algorithm, EnvSpec, Field, LearnContext
from .box_acting import BoxActor
from .box_nets import BoxPolicy, Critic
from .compiling import compile_step
from .flat_adam import annealed_lr
from .q_params import ReplayParams

#: The counter RNG's first heads of the learner's noise (apart from acting's and the replay draw's): the next
#: actions' (TD3's target smoothing, SAC's next-state sample) and the current policy's (SAC's actor term).
NEXT_ACTION_HEAD, POLICY_HEAD = 5000, 6000


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
    def of(algo: "ReplayActorCritic", name: str, batch: dict) -> "GroupBatch":
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


def fixed_value(critic: nn.Module, seen: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """``critic(seen, actions)`` with the critic's parameters held fixed: the actor's loss moves the actor
    alone (a ``functional_call`` with detached parameters, inside the one backward pass of the update)."""
    fixed = {k: v.detach() for k, v in critic.named_parameters()}
    return functional_call(critic, fixed, (seen, actions))


def td3_target(reward: torch.Tensor, terminated: torch.Tensor, gamma: float,
               next_values: list[torch.Tensor]) -> torch.Tensor:
    """``reward + gamma (1 - terminated) min_k next_values[k]``: reward [B, n], terminated bool [B], each of
    ``next_values`` [B, n] (one critic: DDPG's target; two: TD3's clipped double Q)."""
    next_value = next_values[0] if len(next_values) == 1 else torch.minimum(*next_values)
    return reward + gamma * (~terminated).unsqueeze(-1) * next_value


def critic_loss(q: list[torch.Tensor], target: torch.Tensor, batch: GroupBatch) -> torch.Tensor:
    """The summed squared TD errors of the critics' values ``q`` (each [B, n]) against ``target`` [B, n]."""
    return sum(batch.mean((qk - target).square()) for qk in q)


class ReplayLearner:
    """``q_updates`` updates from the replay buffer per iteration (see the module docstring)."""

    inputs = ("replay",)
    outputs = ("weights", "statistics")

    def __init__(self, algo: "ReplayActorCritic", iters: int):
        self.algo, self.params, self.iters = algo, algo.params, iters
        self.updates = 0
        #: the iterations done before this one (host-side: the learning rates anneal with no device read)
        self.iteration = 0
        #: each optimizer's learning rates as configured (the annealing's start)
        self.base_lrs = [[group["lr"] for group in o.param_groups] for o in algo.optimizers.values()]
        #: the update's losses: ``torch.compile`` of :meth:`losses_eager` (its backward by AOTAutograd; one graph
        #: per value of ``actor_due``), or the definition as written (``learner_backend="eager"``)
        self.compiled = algo.params.learner_backend != "eager"
        self.losses = compile_step(self.losses_eager, rng=True) if self.compiled else self.losses_eager
        #: int64 [1]: the draw number of the next update (the replay rows' and the learner's noise's key)
        self.draw = torch.zeros(1, dtype=torch.int64, device=algo.spec.device)

    def set_updates(self, updates: int, iteration: int) -> None:
        """Continue after ``updates`` updates and ``iteration`` iterations (a loaded checkpoint)."""
        self.updates, self.iteration = updates, iteration
        self.draw.fill_(updates)

    def run(self, storage: RolloutStorage, ctx: LearnContext) -> torch.Tensor:
        p, replay, algo = self.params, ctx.replay, self.algo
        stats = torch.zeros(len(algo.trained), len(algo.stat_names), device=self.draw.device)
        if p.anneal_lr:
            for optimizer, lrs in zip(algo.optimizers.values(), self.base_lrs):
                for group, lr in zip(optimizer.param_groups, lrs):
                    group["lr"] = annealed_lr(lr, self.iteration, self.iters, True)
        self.iteration += 1
        if ctx.batches.replay_transitions(replay) < p.q_batch:  # not enough transitions yet (all ranks): act only
            return stats
        with ctx.timer.phase("learn"):
            rows = ctx.batches.replay_rows(replay, algo.seed, self.draw, p.q_updates, p.q_batch)
            buffers = replay.buffers()
            totals = torch.zeros(len(algo.trained), len(algo.stat_names) - 1, device=self.draw.device)
            for u in range(p.q_updates):
                totals += self._update(gather_rows(buffers, *(r[u] for r in rows)), self.draw + u,
                                       algo.actor_due(self.updates), ctx)
                self.updates += 1
            self.draw += p.q_updates
        stats[:, :-1] = ctx.comm.all_reduce_(totals / p.q_updates)
        stats[:, -1].fill_(self.updates)
        return stats

    def _update(self, batch: dict, draw: torch.Tensor, actor_due: bool, ctx: LearnContext) -> torch.Tensor:
        loss, terms = self.losses(batch, draw, actor_due)
        self.algo.step(loss, actor_due, ctx)
        return terms

    def losses_eager(self, batch: dict, draw: torch.Tensor, actor_due: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """(every group's loss summed, the groups' terms float32 [groups, len(stat_names) - 1]) of one update
        of transitions ``batch``: the definition, which ``losses`` runs as written or compiled."""
        algo = self.algo
        loss, terms = 0.0, []
        for name in algo.trained:
            group_loss, group_terms = algo.group_loss(name, GroupBatch.of(algo, name, batch), draw, actor_due)
            loss = loss + group_loss
            terms.append(group_terms)
        return loss, torch.stack(terms)


class ReplayActorCritic(Algorithm):
    """The family's plug-in (see the module docstring). A member sets ``actor_type`` (a :class:`BoxPolicy`),
    ``params_type`` and ``stat_names`` (its terms, then "updates"), and writes :meth:`group_loss`."""

    uses_replay = True
    reads_global_state = True
    central_critic = True
    #: acts only in Box action spaces (the matrix test steps a continuous-action env for it)
    box_actions_only = True
    actor_type: type[BoxPolicy]
    #: the actors have target copies (DDPG's target actions; SAC samples its current policy instead)
    target_actors = False

    def __init__(self, config, spec: EnvSpec, trained: list[str], seed: int, generator: torch.Generator):
        p: ReplayParams = config.algo_params
        self.params, self.spec, self.trained = p, spec, trained
        if self.central_critic and spec.state_dim < 1:
            raise ValueError(f"{self.name}'s critics read the env's global state, and this env has none")
        groups = spec.groups
        self.actors = nn.ModuleDict({
            name: self.actor_type(groups[name].obs_dim * p.frame_stack, groups[name].action_space, p.hidden,
                                  p.activation, generator) for name in trained}).to(spec.device)

        def critic(name: str) -> Critic:
            group, actor = groups[name], self.actors[name]
            seen = spec.state_dim if self.central_critic else group.obs_dim * p.frame_stack
            return Critic(seen, actor.action_dims, group.agents.stop - group.agents.start, self.central_critic,
                          p.hidden, p.activation, generator)

        self.critics = nn.ModuleDict({name: nn.ModuleList([critic(name) for _ in range(self.critic_count())])
                                      for name in trained}).to(spec.device)
        self.target_critics = copy.deepcopy(self.critics).requires_grad_(False)
        #: (online, target) pairs the target update moves
        self.targets = [(self.critics, self.target_critics)]
        self.nets = nn.ModuleDict({"actors": self.actors, "critics": self.critics,
                                   "target_critics": self.target_critics})
        if self.target_actors:
            self.nets["target_actors"] = target = copy.deepcopy(self.actors).requires_grad_(False)
            self.targets.append((self.actors, target))
        #: the networks the update trains, each clipped to its own gradient norm
        self.learned = [*(self.actors[name] for name in trained), *(c for name in trained for c in self.critics[name])]
        #: by checkpoint key; the critics' ("optimizer") steps every update, the others when the actors' is due
        self.optimizers = {"optimizer": torch.optim.Adam(self.critics.parameters(), lr=p.lr),
                           "actor_optimizer": torch.optim.Adam(self.actors.parameters(), lr=p.actor_lr)}
        self.add_learned()
        self.seed = seed_tensor(seed, spec.device)
        self.actor = BoxActor(groups, self.actors, spec, self.seed, self.exploration_std(), p.policy_backend,
                              p.activation)
        self.learner = ReplayLearner(self, config.iters)

    def add_learned(self) -> None:
        """What a member learns beside the actors and critics: its modules into ``nets`` (checkpoints) and
        ``learned`` (the update's gradients), its optimizers into ``optimizers`` (none here)."""

    def critic_count(self) -> int:
        """Critics per group (two: the target takes the smaller value)."""
        return 2

    def exploration_std(self) -> float:
        """The acting noise's standard deviation, in half ranges of the Box (0: the policy's own)."""
        return 0.0

    def actor_due(self, updates: int) -> bool:
        """Whether the update after ``updates`` updates steps the actors (and the targets)."""
        return True

    def group_loss(self, name: str, batch: GroupBatch, draw: torch.Tensor,
                   actor_due: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """Group ``name``'s loss of one update (a float32 scalar, every term whose gradient the update takes) and
        its terms (float32 [len(stat_names) - 1], detached); ``draw`` int64 [1], the update's key of the counter
        RNG."""
        raise NotImplementedError

    def step(self, loss: torch.Tensor, actor_due: bool, ctx: LearnContext) -> None:
        """One backward pass of ``loss``, the gradients summed over ranks, each network's norm clipped, the
        critics' Adam step (and the other optimizers', with the target update, when ``actor_due``)."""
        p = self.params
        for optimizer in self.optimizers.values():
            optimizer.zero_grad(set_to_none=False)
        loss.backward()
        parameters = [q for net in self.learned for q in net.parameters()]
        for q in parameters:  # an actor whose update is not due has no gradient yet: zeros, summed as they are
            if q.grad is None:
                q.grad = torch.zeros_like(q)
        ctx.reduce_gradients([q.grad for q in parameters])
        if p.max_grad_norm > 0:
            for net in self.learned:
                nn.utils.clip_grad_norm_(net.parameters(), p.max_grad_norm)
        critics, *others = self.optimizers.values()
        critics.step()
        if actor_due:
            for optimizer in others:
                optimizer.step()
            with torch.no_grad():
                for online, target in self.targets:
                    for q, q_target in zip(online.parameters(), target.parameters()):
                        q_target.lerp_(q, p.target_tau)

    def fields(self) -> dict[str, Field]:
        return {}  # the actions alone

    def weights(self) -> list[torch.Tensor]:
        # The actors read the actor networks; critics and targets are the learner's, kept equal on every
        # learner rank by the same updates.
        return [*self.actors.parameters()]

    def sync_actors(self) -> None:
        self.actor.sync()

    def backends(self) -> dict[str, str]:
        return {"acting": self.actor.backend, "learning": "compiled" if self.learner.compiled else "eager"}

    def state_dict(self) -> dict:
        return {"nets": self.nets.state_dict(), "updates": self.learner.updates, "iteration": self.learner.iteration,
                **{key: optimizer.state_dict() for key, optimizer in self.optimizers.items()}}

    def load_state_dict(self, state: dict) -> None:
        self.nets.load_state_dict(state["nets"])
        for key, optimizer in self.optimizers.items():
            optimizer.load_state_dict(state[key])
        # MADDPG's first checkpoints held no iteration count (the learning rates did not anneal): 0
        self.learner.set_updates(int(state["updates"]), int(state.get("iteration", 0)))
        self.sync_actors()


__all__ = ["GroupBatch", "NEXT_ACTION_HEAD", "POLICY_HEAD", "ReplayActorCritic", "ReplayLearner",
           "critic_loss", "fixed_value", "td3_target"]
