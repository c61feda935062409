"""What the off-policy actor-critics for Box actions share (MADDPG, IDDPG, MATD3 in :mod:`.ddpg`; MASAC, ISAC in
:mod:`.sac`): one actor per trained group (:mod:`.box_nets`, shared by the group's agents), one or two critics
with target copies and the acting fragment (the learner loop: :mod:`.replay_learner`). An algorithm of the family
names its actor and its parameters and writes one group's loss of one update
(:meth:`ReplayActorCritic.group_loss`).

- Actor fragment: :class:`~.box_acting.BoxActor` writes every trained group's actions at slot t by the actor's
  ``act`` (the counter RNG's noise, inside the Box), as ``policy_backend`` generates it (eager, compiled, or the
  fused Triton kernel).
- Learner fragment: :class:`~.replay_learner.ReplayLearner` learns from the replay buffer: an update sums every
  group's loss, takes its gradient, sums the gradients over ranks in one call, clips each network's gradient
  norm and steps the critics' optimizer, and the actors' (with the target update) when
  :meth:`ReplayActorCritic.actor_due`.

Every trained network is a view of one flat parameter (:mod:`.flat`; the critics, then the actors, then what a
member adds), each optimizer a :class:`~.flat_adam.FlatAdam` over its span; the target networks are views of a
second flat parameter laid out as the first one's start, so the target update is one ``lerp_``.
"""
from __future__ import annotations

import copy

import torch
from torch import nn
from torch.func import functional_call

from ..fusion.counter_rng import seed_tensor
from .base import Algorithm, EnvSpec, Field
from .box_acting import BoxActor
from .box_nets import BoxPolicy, Critic
from .flat import FlatParameters
from .flat_adam import FlatAdam, flat_adam_state
from .q_params import ReplayParams
from .replay_learner import GroupBatch, ReplayLearner

#: The counter RNG's first heads of the learner's noise (apart from acting's and the replay draw's): the next
#: actions' (TD3's target smoothing, SAC's next-state sample) and the current policy's (SAC's actor term).
NEXT_ACTION_HEAD, POLICY_HEAD = 5000, 6000

#: Adam's epsilon for every network of the family: torch.optim.Adam's default, which the family trained with before
#: its optimizers became FlatAdams (its learning checks)
ADAM_EPS = 1e-8


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
        self.nets = nn.ModuleDict({"actors": self.actors, "critics": self.critics,
                                   "target_critics": self.target_critics})
        target_nets = {f"critic{k}:{name}": c for name in trained for k, c in enumerate(self.target_critics[name])}
        if self.target_actors:
            self.nets["target_actors"] = target = copy.deepcopy(self.actors).requires_grad_(False)
            target_nets.update({f"actor:{name}": target[name] for name in trained})
        #: the networks each optimizer steps (by checkpoint key; in the flat parameter's order) and its learning
        #: rate: the critics' ("optimizer") every update, the others when the actors' update is due
        self.optimized = {
            "optimizer": {f"critic{k}:{name}": c for name in trained for k, c in enumerate(self.critics[name])},
            "actor_optimizer": {f"actor:{name}": self.actors[name] for name in trained}}
        self.learning_rates = {"optimizer": p.lr, "actor_optimizer": p.actor_lr}
        self.add_learned()
        #: the trained networks as views of one flat parameter (each clipped to its own gradient norm), their
        #: targets as views of another laid out as its start
        self.flat_nets = nn.ModuleDict({k: m for nets in self.optimized.values() for k, m in nets.items()})
        self.flat = FlatParameters(self.flat_nets)
        self.target_flat = FlatParameters(nn.ModuleDict(target_nets))
        self.target_flat.param.requires_grad_(False)
        spans = self.flat.spans
        self.optimizers = {key: FlatAdam(self.flat.data, self.learning_rates[key], eps=ADAM_EPS,
                                         span=(spans[next(iter(nets))][0], spans[list(nets)[-1]][1]))
                           for key, nets in self.optimized.items()}
        self.seed = seed_tensor(seed, spec.device)
        self.actor = BoxActor(groups, self.actors, spec, self.seed, self.exploration_std(), p.policy_backend,
                              p.activation)
        self.learner = ReplayLearner(self, config.iters)

    def add_learned(self) -> None:
        """What a member learns beside the actors and critics: its modules into ``nets`` (checkpoints), each of its
        optimizers' networks into ``optimized`` with the learning rate into ``learning_rates`` (none here)."""

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

    @torch.no_grad()
    def update_targets(self) -> None:
        """The target networks towards the online ones by ``target_tau`` (after an update whose actors stepped)."""
        self.target_flat.data.lerp_(self.flat.data[:self.target_flat.data.numel()], self.params.target_tau)

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
        for key, optimizer in self.optimizers.items():  # checkpoints before the flat parameter: per network tensor
            optimizer.load_state_dict(flat_adam_state(state[key]))
        # MADDPG's first checkpoints held no iteration count (the learning rates did not anneal): 0
        self.learner.set_updates(int(state["updates"]), int(state.get("iteration", 0)))
        self.sync_actors()


__all__ = ["ADAM_EPS", "GroupBatch", "NEXT_ACTION_HEAD", "POLICY_HEAD", "ReplayActorCritic", "critic_loss",
           "fixed_value", "td3_target"]
