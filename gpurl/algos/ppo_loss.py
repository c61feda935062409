"""The PPO loss, written once in torch: clipped surrogate, optionally clipped value loss, entropy bonus.

A2C is the same loss with ``clip_coef = 0`` (no ratio clipping, plain value loss). The learner runs
this function eagerly or through ``torch.compile`` (``learner_backend``); the tests hold the two to
each other. Advantage normalisation needs moments over the whole minibatch, which may span ranks:
:func:`advantage_moments` forms them outside the loss (so the compiled loss holds no collective).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

STAT_NAMES = ("loss", "pg_loss", "v_loss", "entropy", "approx_kl", "clipfrac")


@dataclass(frozen=True)
class LossCoefficients:
    """The loss's constants (from the run's config)."""

    clip_coef: float    # PPO ratio clip; 0 disables ratio and value clipping
    clip_vloss: bool    # clip the value loss around the old values
    vf_coef: float      # value loss weight
    ent_coef: float     # entropy bonus weight


@dataclass
class GroupBatch:
    """One group's samples of a rollout, flattened over [T, E, n]: B = T * E * n rows."""

    inputs: torch.Tensor      # float32 [B, in_dim]
    actions: torch.Tensor     # [B, action_dims]
    log_prob: torch.Tensor    # float32 [B]
    advantages: torch.Tensor  # float32 [B]
    returns: torch.Tensor     # float32 [B]
    values: torch.Tensor      # float32 [B]
    agents: int = 1           # n: rows per env step (B = T * E * n)
    # The float fields side by side, float32 [B, in_dim + 4], made at the first rows() call (see there).
    _floats: torch.Tensor | None = field(default=None, init=False, repr=False)

    def __len__(self) -> int:
        return self.inputs.shape[0]

    def rows(self, idx: torch.Tensor) -> "GroupBatch":
        """The samples ``idx`` (a minibatch). A minibatch's rows are scattered over the rollout: the
        float fields are gathered as one matrix, one read per row instead of five (``index_select``:
        on the CPU faster than advanced indexing for these gathers)."""
        if self._floats is None:
            columns = torch.stack([self.log_prob, self.advantages, self.returns, self.values], 1)
            self._floats = torch.cat([self.inputs, columns], 1)
        rows, d = self._floats.index_select(0, idx), self.inputs.shape[1]
        return GroupBatch(rows[:, :d], self.actions.index_select(0, idx), rows[:, d], rows[:, d + 1],
                          rows[:, d + 2], rows[:, d + 3], self.agents)


@dataclass
class SequenceBatch:
    """A recurrent actor's samples: whole rollout sequences of B = envs x n agents (minibatches are
    drawn over envs, the learner replays each sequence from the state that entered its first step)."""

    inputs: torch.Tensor      # float32 [T, B, in_dim], normalised
    actions: torch.Tensor     # [T, B, action_dims]
    log_prob: torch.Tensor    # float32 [T, B]
    advantages: torch.Tensor  # float32 [T, B]
    returns: torch.Tensor     # float32 [T, B] (the policy's own critic; unused with a central one)
    values: torch.Tensor      # float32 [T, B]
    hidden: torch.Tensor      # float32 [B, H]: the state entering step 0
    starts: torch.Tensor      # bool [T, B]: the observation at t starts an episode (state zeroed)

    def __len__(self) -> int:
        return self.log_prob.numel()


@dataclass
class CriticBatch:
    """A central critic's samples: env rows (one per env and step), every agent of the group in each."""

    states: torch.Tensor      # float32 [B, S]: the global state
    returns: torch.Tensor     # float32 [B, n] (normalised when values are)
    values: torch.Tensor      # float32 [B, n]: what the rollout's critic said (normalised likewise)
    # The three side by side, float32 [B, S + 2n], made at the first rows() call (one gather per row).
    _floats: torch.Tensor | None = field(default=None, init=False, repr=False)

    def rows(self, idx: torch.Tensor) -> "CriticBatch":
        """The env rows ``idx`` (a minibatch), gathered as one matrix."""
        if self._floats is None:
            self._floats = torch.cat([self.states, self.returns, self.values], 1)
        rows, S, n = self._floats.index_select(0, idx), self.states.shape[1], self.returns.shape[1]
        return CriticBatch(rows[:, :S], rows[:, S:S + n], rows[:, S + n:])


def advantage_moments(adv: torch.Tensor, size: int, comm) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mean, std)`` float32 scalars of a minibatch of ``size`` advantages over all ranks, of which
    ``adv`` are this rank's: float64 sums, all-reduced by ``comm``, the unbiased std."""
    moments = torch.stack([adv.double().sum(), adv.double().square().sum()])
    comm.all_reduce_(moments)
    mean = moments[0] / size
    std = ((moments[1] - size * mean.square()).clamp(min=0) / max(size - 1, 1)).sqrt()
    return mean.float(), std.float()


def policy_terms(log_prob: torch.Tensor, entropy: torch.Tensor, old_log_prob: torch.Tensor,
                 advantages: torch.Tensor, size: int, adv_mean: torch.Tensor, adv_std: torch.Tensor,
                 coef: LossCoefficients):
    """``(pg_loss, entropy_mean, approx_kl, clipfrac)``: the clipped surrogate and its statistics over
    this rank's samples (any shape, all of the same shape) of a minibatch of ``size`` over all ranks."""
    log_ratio = log_prob - old_log_prob
    ratio = log_ratio.exp()
    adv = (advantages - adv_mean) / (adv_std + 1e-8)
    pg_loss1 = -adv * ratio
    if coef.clip_coef > 0:
        pg_loss = torch.max(pg_loss1, -adv * ratio.clamp(1 - coef.clip_coef, 1 + coef.clip_coef)).sum() / size
    else:
        pg_loss = pg_loss1.sum() / size
    entropy_mean = entropy.sum() / size
    with torch.no_grad():
        approx_kl = ((ratio - 1) - log_ratio).sum() / size
        clipfrac = (((ratio - 1).abs() > coef.clip_coef).float().sum() / size if coef.clip_coef > 0
                    else ratio.new_zeros(()))
    return pg_loss, entropy_mean, approx_kl, clipfrac


def value_terms(value: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, size: int,
                coef: LossCoefficients) -> torch.Tensor:
    """The value loss over this rank's ``value`` predictions (any shape) of ``size`` over all ranks,
    clipped around the values the rollout acted with when ``clip_vloss``."""
    if coef.clip_vloss and coef.clip_coef > 0:
        clipped = old_values + (value - old_values).clamp(-coef.clip_coef, coef.clip_coef)
        return 0.5 * torch.max((value - returns).square(), (clipped - returns).square()).sum() / size
    return 0.5 * (value - returns).square().sum() / size


def group_loss(policy: nn.Module, critic: nn.Module | None, mb, cmb: "CriticBatch | None", size: int,
               value_size: int, adv_mean: torch.Tensor, adv_std: torch.Tensor, coef: LossCoefficients):
    """``(loss, stats float32 [len(STAT_NAMES)])`` of one group's part of a minibatch: ``mb`` the actor's
    samples (:class:`GroupBatch` rows, or a recurrent actor's :class:`SequenceBatch`), ``size`` their
    count over all ranks; the value loss from the policy's own critic on the same samples
    (``critic`` None), or from a central critic on ``cmb``'s env rows, ``value_size`` values over all
    ranks. Both are this rank's share of the minibatch means (the shares of all ranks sum to them), so
    gradients summed over ranks are the whole minibatch's."""
    if isinstance(mb, SequenceBatch):
        log_prob, entropy, value = policy.evaluate_sequence(mb.inputs, mb.actions, mb.hidden, mb.starts)
    else:
        log_prob, entropy, value = policy.evaluate(mb.inputs, mb.actions, normalized=True)
    pg_loss, entropy_mean, approx_kl, clipfrac = policy_terms(log_prob, entropy, mb.log_prob, mb.advantages, size,
                                                              adv_mean, adv_std, coef)
    if critic is None:
        v_loss = value_terms(value, mb.values, mb.returns, value_size, coef)
    else:
        v_loss = value_terms(critic.values(cmb.states), cmb.values, cmb.returns, value_size, coef)
    loss = pg_loss - coef.ent_coef * entropy_mean + coef.vf_coef * v_loss
    stats = torch.stack([loss.detach(), pg_loss.detach(), v_loss.detach(), entropy_mean.detach(), approx_kl,
                         clipfrac])
    return loss, stats


def ppo_loss(policy: nn.Module, mb: GroupBatch, size: int, adv_mean: torch.Tensor, adv_std: torch.Tensor,
             coef: LossCoefficients) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, stats float32 [len(STAT_NAMES)])`` of this rank's part ``mb`` of a minibatch of ``size``
    samples over all ranks (``mb.inputs`` normalised: :meth:`ActorCritic.normalize`), value from the
    policy's own critic. ``adv_mean``/``adv_std`` normalise the advantages (0 and 1 leave them as they
    are: 1 + 1e-8 is 1 in float32)."""
    return group_loss(policy, None, mb, None, size, size, adv_mean, adv_std, coef)


def groups_loss(policies: list[nn.Module], batches: list, sizes: list[int],
                moments: list[tuple[torch.Tensor, torch.Tensor]], coef: LossCoefficients,
                critics: list | None = None, critic_batches: list | None = None, value_sizes: list[int] | None = None):
    """Several groups' minibatches at once: ``(sum of their losses, stats float32 [groups, 6])``. One
    call (one compiled graph, one backward pass) per minibatch instead of one per group. ``critics``
    (central critics, with their ``critic_batches`` and ``value_sizes``) None: each policy's own critic."""
    n = len(policies)
    critics, critic_batches = critics or [None] * n, critic_batches or [None] * n
    value_sizes = value_sizes or sizes
    parts = [group_loss(p, c, mb, cmb, size, vsize, mean, std, coef)
             for p, c, mb, cmb, size, vsize, (mean, std)
             in zip(policies, critics, batches, critic_batches, sizes, value_sizes, moments)]
    return sum(loss for loss, _ in parts), torch.stack([stats for _, stats in parts])


__all__ = ["STAT_NAMES", "CriticBatch", "GroupBatch", "LossCoefficients", "SequenceBatch", "advantage_moments",
           "group_loss", "groups_loss", "policy_terms", "ppo_loss", "value_terms"]
