"""MADDPG, IDDPG and MATD3: the deterministic-policy algorithm plug-ins for Box actions, members of the
off-policy actor-critic family (:mod:`.replay_actor_critic`: networks and acting; :mod:`.replay_learner`: the
learner loop, the update's step).

One :class:`~.box_nets.DeterministicActor` per trained group, shared by the group's agents, with one critic
(two with ``twin_critics``) and target copies of both. Acting adds Gaussian exploration noise of the counter RNG
to the policy's action, clipped to the Box (the policy's alone when evaluating). One update of a group:
- critics: the TD target ``r + gamma (1 - terminated) min_k Q'_k(s', a')``, ``a'`` the target actors' actions
  with clipped smoothing noise (TD3; none by default), each critic's squared error;
- actors, every ``policy_delay`` updates: ``-Q_1(s, mu(s))`` with every agent of the group acting by the
  current policy (the critics' parameters held fixed in this term), then the targets move towards the online
  networks by ``target_tau``.
The actor term is computed with the critics before this update's step (TD3 steps the critics first); one
backward and one all-reduce per update instead of two.

MADDPG's critics read the env's global state, every action of the group and the agent's one-hot id; IDDPG's each
agent's own input and action; MATD3 is MADDPG with TD3's defaults (:class:`~.ddpg_params.TD3Params`).
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from ..fusion.counter_rng import uniform_ref
from .box_nets import DeterministicActor
from .ddpg_params import DDPGParams, TD3Params
from .distributions import standard_normal
from .replay_actor_critic import (NEXT_ACTION_HEAD, GroupBatch, ReplayActorCritic, critic_loss, fixed_value,
                                  td3_target)


class DDPGTerms(NamedTuple):
    """One group's figures of one update, float32 scalars: the critics' TD loss, the actor's loss (0 where its
    update was not due) and the mean Q of the actions taken (the first critic)."""

    critic_loss: torch.Tensor
    actor_loss: torch.Tensor
    q_taken: torch.Tensor


STAT_NAMES = (*DDPGTerms._fields, "updates")


def smoothed(actions: torch.Tensor, noise: torch.Tensor, clip: float, low: torch.Tensor,
             half_range: torch.Tensor) -> torch.Tensor:
    """TD3's target policy smoothing: ``actions`` [..., A] plus ``noise`` (in half ranges) clipped to +-``clip``,
    then clipped to the Box ``low .. low + 2 half_range``."""
    out = actions + noise.clamp(-clip, clip) * half_range
    return torch.minimum(torch.maximum(out, low), low + 2 * half_range)


class MADDPG(ReplayActorCritic):
    """Multi-agent DDPG: deterministic actors, critics on the env's global state and every action of the group."""

    name = "maddpg"
    params_type = DDPGParams
    stat_names = STAT_NAMES
    actor_type = DeterministicActor
    target_actors = True

    def critic_count(self) -> int:
        return 2 if self.params.twin_critics else 1

    def exploration_std(self) -> float:
        return self.params.exploration_std

    def actor_due(self, updates: int) -> bool:
        return (updates + 1) % self.params.policy_delay == 0

    def group_loss(self, name: str, batch: GroupBatch, draw: torch.Tensor,
                   actor_due: bool) -> tuple[torch.Tensor, torch.Tensor]:
        p, actor, critics = self.params, self.actors[name], self.critics[name]
        with torch.no_grad():
            next_actions = self.nets["target_actors"][name](batch.x_next)
            if p.target_noise > 0:
                u = uniform_ref(self.seed, batch.rows, draw, NEXT_ACTION_HEAD + actor.heads)
                next_actions = smoothed(next_actions, p.target_noise * standard_normal(u), p.target_noise_clip,
                                        actor.low, actor.half_range)
            target = td3_target(batch.reward, batch.terminated, p.gamma,
                                [c(batch.seen_next, next_actions) for c in self.target_critics[name]])
        q = [critic(batch.seen, batch.taken) for critic in critics]
        actor_loss = torch.zeros((), device=q[0].device)
        if actor_due:  # the first critic's value of the current policy's actions, its parameters held fixed
            actor_loss = -batch.mean(fixed_value(critics[0], batch.seen, actor(batch.x)))
        loss = critic_loss(q, target, batch)
        terms = DDPGTerms(loss.detach(), actor_loss.detach(), batch.mean(q[0].detach()))
        return loss + actor_loss, torch.stack(terms)


class IDDPG(MADDPG):
    """Independent DDPG: each agent's critic reads its own input and action."""

    name = "iddpg"
    reads_global_state = False
    central_critic = False


class MATD3(MADDPG):
    """MADDPG with TD3's twin critics, target policy smoothing and delayed actor updates (its defaults)."""

    name = "matd3"
    params_type = TD3Params


__all__ = ["DDPGTerms", "IDDPG", "MADDPG", "MATD3", "STAT_NAMES", "smoothed", "td3_target"]
