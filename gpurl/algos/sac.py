"""MASAC and ISAC: soft actor-critic plug-ins for Box actions, members of the off-policy actor-critic family
(:mod:`.replay_actor_critic`: networks and acting; :mod:`.replay_learner`: the learner loop, the update's
step).

One :class:`~.box_nets.SquashedGaussianActor` per trained group, shared by the group's agents, two critics with
target copies, and a learned temperature ``alpha`` per group. Acting samples the policy with the counter RNG's
normals (the mean's squash when evaluating deterministically). One update of a group, ``a ~ pi(.|s)``
reparameterised, every agent of the group sampling its own:
- critics: the soft TD target ``r + gamma (1 - terminated) (min_k Q'_k(s', a') - alpha log pi(a'|s'))``,
  ``a' ~ pi(.|s')`` (the current policy), each critic's squared error;
- actor: ``alpha log pi(a|s) - min_k Q_k(s, a)`` (the critics' parameters held fixed in this term);
- temperature: :func:`temperature_loss`, which moves ``log alpha`` so the entropy ``-log pi`` approaches
  ``target_entropy`` times the action dimensions;
then the target critics move towards the online ones by ``target_tau``. One backward pass and one all-reduce per
update, as the DDPG family. MASAC's critics read the env's global state, every action of the group and the
agent's one-hot id; ISAC's each agent's own input and action.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import torch
from torch import nn

from ..fusion.counter_rng import uniform_ref
from .box_nets import SquashedGaussianActor
from .distributions import standard_normal
from .replay_actor_critic import (NEXT_ACTION_HEAD, POLICY_HEAD, GroupBatch, ReplayActorCritic, critic_loss,
                                  fixed_value, td3_target)
from .sac_params import SACParams


class SACTerms(NamedTuple):
    """One group's figures of one update, float32 scalars: the critics' TD loss, the actor's loss, the mean Q of
    the actions taken (the first critic), the temperature and the policy's entropy estimate (``-log pi``)."""

    critic_loss: torch.Tensor
    actor_loss: torch.Tensor
    q_taken: torch.Tensor
    alpha: torch.Tensor
    entropy: torch.Tensor


STAT_NAMES = (*SACTerms._fields, "updates")


def soft_target(reward: torch.Tensor, terminated: torch.Tensor, gamma: float, next_values: list[torch.Tensor],
                alpha: torch.Tensor, next_log_prob: torch.Tensor) -> torch.Tensor:
    """SAC's target ``reward + gamma (1 - terminated) (min_k next_values[k] - alpha next_log_prob)``: reward,
    next_log_prob and each of ``next_values`` [B, n], terminated bool [B], alpha a scalar."""
    return td3_target(reward, terminated, gamma, [value - alpha * next_log_prob for value in next_values])


def temperature_loss(log_alpha: torch.Tensor, log_prob: torch.Tensor, target_entropy: float,
                     mean: Callable[[torch.Tensor], torch.Tensor] = torch.mean) -> torch.Tensor:
    """``-log_alpha mean(log_prob + target_entropy)``, ``log_prob`` held fixed: its gradient lowers alpha while
    the entropy ``-log_prob`` is above ``target_entropy`` and raises it while below. log_alpha a float32 scalar,
    log_prob [...] (``mean``: a weighted mean over the batch, the plain one by default)."""
    return -log_alpha * mean(log_prob.detach() + target_entropy)


class MASAC(ReplayActorCritic):
    """Multi-agent SAC: squashed-Gaussian actors, twin critics on the env's global state and every action of the
    group, a learned temperature per group."""

    name = "masac"
    params_type = SACParams
    stat_names = STAT_NAMES
    actor_type = SquashedGaussianActor

    def add_learned(self) -> None:
        """The temperature: ``log alpha`` per group, learned with its own optimizer."""
        p: SACParams = self.params
        start = torch.tensor(p.init_alpha, device=self.spec.device).log()
        self.log_alpha = nn.ParameterDict({name: nn.Parameter(start.clone()) for name in self.trained})
        self.nets["log_alpha"] = self.log_alpha
        self.optimized["alpha_optimizer"] = {"log_alpha": self.log_alpha}
        self.learning_rates["alpha_optimizer"] = p.alpha_lr

    def group_loss(self, name: str, batch: GroupBatch, draw: torch.Tensor,
                   actor_due: bool) -> tuple[torch.Tensor, torch.Tensor]:
        p, actor, critics = self.params, self.actors[name], self.critics[name]
        log_alpha = self.log_alpha[name]
        alpha = log_alpha.detach().exp()
        with torch.no_grad():
            noise = standard_normal(uniform_ref(self.seed, batch.rows, draw, NEXT_ACTION_HEAD + actor.heads))
            next_actions, next_log_prob = actor.sample(batch.x_next, noise)
            target = soft_target(batch.reward, batch.terminated, p.gamma,
                                 [c(batch.seen_next, next_actions) for c in self.target_critics[name]], alpha,
                                 next_log_prob)
        q = [critic(batch.seen, batch.taken) for critic in critics]
        noise = standard_normal(uniform_ref(self.seed, batch.rows, draw, POLICY_HEAD + actor.heads))
        actions, log_prob = actor.sample(batch.x, noise)
        value = torch.minimum(*(fixed_value(critic, batch.seen, actions) for critic in critics))
        actor_loss = batch.mean(alpha * log_prob - value)
        alpha_loss = temperature_loss(log_alpha, log_prob, p.target_entropy * actor.action_dims, batch.mean)
        loss = critic_loss(q, target, batch)
        terms = SACTerms(loss.detach(), actor_loss.detach(), batch.mean(q[0].detach()), alpha,
                         -batch.mean(log_prob.detach()))
        return loss + actor_loss + alpha_loss, torch.stack(terms)


class ISAC(MASAC):
    """Independent SAC: each agent's critics read its own input and action."""

    name = "isac"
    reads_global_state = False
    central_critic = False


__all__ = ["ISAC", "MASAC", "SACTerms", "STAT_NAMES", "soft_target", "temperature_loss"]
