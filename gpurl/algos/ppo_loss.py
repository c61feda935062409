"""The PPO loss, written once in torch: clipped surrogate, optionally clipped value loss, entropy bonus.

A2C is the same loss with ``clip_coef = 0`` (no ratio clipping, plain value loss). The learner runs
this function eagerly or through ``torch.compile`` (``learner_backend``); the tests hold the two to
each other. Advantage normalisation needs moments over the whole minibatch, which may span ranks:
:func:`advantage_moments` forms them outside the loss (so the compiled loss holds no collective).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn


class LossTerms(NamedTuple):
    """One group's PPO loss and the statistics logged beside it, float32 scalars (``loss`` carries the
    gradient; :func:`stat_row` stacks them for the learner's device-side sums)."""

    loss: torch.Tensor
    pg_loss: torch.Tensor
    v_loss: torch.Tensor
    entropy: torch.Tensor
    approx_kl: torch.Tensor
    clipfrac: torch.Tensor


#: The statistics' names, in :func:`stat_row`'s order (the learner's sums and its log columns).
STAT_NAMES = LossTerms._fields


def stat_row(terms: LossTerms) -> torch.Tensor:
    """float32 [len(STAT_NAMES)]: ``terms`` detached, in :data:`STAT_NAMES` order."""
    return torch.stack([term.detach() for term in terms])


@dataclass(frozen=True)
class LossCoefficients:
    """The loss's constants (from the run's config)."""

    clip_coef: float    # PPO ratio clip; 0 disables ratio and value clipping
    clip_vloss: bool    # clip the value loss around the old values
    vf_coef: float      # value loss weight
    ent_coef: float     # entropy bonus weight


@dataclass
class GroupBatch:
    """One group's samples of a minibatch, one row per (t, e, i): B rows."""

    inputs: torch.Tensor      # float32 [B, in_dim], normalised
    actions: torch.Tensor     # [B, action_dims]
    log_prob: torch.Tensor    # float32 [B]
    advantages: torch.Tensor  # float32 [B]
    returns: torch.Tensor     # float32 [B]
    values: torch.Tensor      # float32 [B]
    #: float32 [B]: 1 for a real sample, 0 for padding (None: all real)
    weight: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.inputs.shape[0]


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
    #: float32 [B]: 1 for a real sequence, 0 for padding (None: all real)
    weight: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.log_prob.numel()


@dataclass
class CriticBatch:
    """A central critic's samples: env rows (one per env and step), every agent of the group in each."""

    states: torch.Tensor      # float32 [B, S]: the global state
    returns: torch.Tensor     # float32 [B, n] (normalised when values are)
    values: torch.Tensor      # float32 [B, n]: what the rollout's critic said (normalised likewise)
    #: float32 [B]: 1 for a real row, 0 for padding (None: all real)
    weight: torch.Tensor | None = None


def weighted_sum(x: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """``x.sum()`` with ``x``'s leading dims weighted by ``weight`` (None: unweighted): a weight [B] covers
    row b of x [B] or [B, n]."""
    if weight is None:
        return x.sum()
    return (x * weight.view(*weight.shape, *([1] * (x.dim() - weight.dim())))).sum()


def moments_of(sums: torch.Tensor, size) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mean, std)`` float32 of ``size`` values from their float64 ``sums`` [..., 2] (sum, sum of squares),
    the unbiased std; ``size`` an int or a tensor broadcasting with ``sums[..., 0]``."""
    mean = sums[..., 0] / size
    dof = (size - 1).clamp(min=1) if isinstance(size, torch.Tensor) else max(size - 1, 1)
    std = ((sums[..., 1] - size * mean.square()).clamp(min=0) / dof).sqrt()
    return mean.float(), std.float()


def advantage_sums(adv: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
    """float64 [..., 2]: sum and sum of squares of ``adv`` [..., B] over its last dim (rows weighted)."""
    adv = adv.double()
    if weight is not None:
        adv = adv * weight
    return torch.stack([adv.sum(-1), (adv * adv).sum(-1)], -1)


def advantage_moments(adv: torch.Tensor, size: int, comm) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mean, std)`` float32 scalars of a minibatch of ``size`` advantages over all ranks, of which
    ``adv`` are this rank's: float64 sums, all-reduced by ``comm``, the unbiased std."""
    sums = advantage_sums(adv.reshape(-1))
    comm.all_reduce_(sums)
    return moments_of(sums, size)


def policy_terms(log_prob: torch.Tensor, entropy: torch.Tensor, old_log_prob: torch.Tensor,
                 advantages: torch.Tensor, size, adv_mean: torch.Tensor, adv_std: torch.Tensor,
                 coef: LossCoefficients, weight: torch.Tensor | None = None):
    """``(pg_loss, entropy_mean, approx_kl, clipfrac)``: the clipped surrogate and its statistics over
    this rank's samples (any shape, all of the same shape) of a minibatch of ``size`` (an int or a float32
    tensor) over all ranks; ``weight`` (leading dims of the samples' shape) zeroes padding."""
    log_ratio = log_prob - old_log_prob
    ratio = log_ratio.exp()
    adv = (advantages - adv_mean) / (adv_std + 1e-8)
    pg_loss1 = -adv * ratio
    if coef.clip_coef > 0:
        pg = torch.max(pg_loss1, -adv * ratio.clamp(1 - coef.clip_coef, 1 + coef.clip_coef))
    else:
        pg = pg_loss1
    pg_loss = weighted_sum(pg, weight) / size
    entropy_mean = weighted_sum(entropy, weight) / size
    with torch.no_grad():
        approx_kl = weighted_sum((ratio - 1) - log_ratio, weight) / size
        clipfrac = (weighted_sum(((ratio - 1).abs() > coef.clip_coef).float(), weight) / size if coef.clip_coef > 0
                    else ratio.new_zeros(()))
    return pg_loss, entropy_mean, approx_kl, clipfrac


def value_terms(value: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, size,
                coef: LossCoefficients, weight: torch.Tensor | None = None) -> torch.Tensor:
    """The value loss over this rank's ``value`` predictions (any shape) of ``size`` over all ranks,
    clipped around the values the rollout acted with when ``clip_vloss``; ``weight`` zeroes padding."""
    if coef.clip_vloss and coef.clip_coef > 0:
        clipped = old_values + (value - old_values).clamp(-coef.clip_coef, coef.clip_coef)
        error = torch.max((value - returns).square(), (clipped - returns).square())
    else:
        error = (value - returns).square()
    return 0.5 * weighted_sum(error, weight) / size


def group_loss(policy: nn.Module, critic: nn.Module | None, mb, cmb: "CriticBatch | None", size: int,
               value_size: int, adv_mean: torch.Tensor, adv_std: torch.Tensor, coef: LossCoefficients) -> LossTerms:
    """The :class:`LossTerms` of one group's part of a minibatch: ``mb`` the actor's
    samples (:class:`GroupBatch` rows, or a recurrent actor's :class:`SequenceBatch`), ``size`` their
    count over all ranks; the value loss from the policy's own critic on the same samples
    (``critic`` None), or from a central critic on ``cmb``'s env rows, ``value_size`` values over all
    ranks. Both are this rank's share of the minibatch means (the shares of all ranks sum to them), so
    gradients summed over ranks are the whole minibatch's."""
    if isinstance(mb, SequenceBatch):
        log_prob, entropy, value = policy.evaluate_sequence(mb.inputs, mb.actions, mb.hidden, mb.starts)
    else:
        log_prob, entropy, value = policy.evaluate(mb.inputs, mb.actions, normalized=True)
    # A sequence's weight covers its T steps: weights [B] against samples [T, B].
    weight = mb.weight if mb.weight is None or not isinstance(mb, SequenceBatch) else mb.weight.expand_as(mb.log_prob)
    pg_loss, entropy_mean, approx_kl, clipfrac = policy_terms(log_prob, entropy, mb.log_prob, mb.advantages, size,
                                                              adv_mean, adv_std, coef, weight)
    if critic is None:
        v_loss = value_terms(value, mb.values, mb.returns, value_size, coef, weight)
    else:
        v_loss = value_terms(critic.values(cmb.states), cmb.values, cmb.returns, value_size, coef, cmb.weight)
    loss = pg_loss - coef.ent_coef * entropy_mean + coef.vf_coef * v_loss
    return LossTerms(loss=loss, pg_loss=pg_loss, v_loss=v_loss, entropy=entropy_mean, approx_kl=approx_kl,
                     clipfrac=clipfrac)


def ppo_loss(policy: nn.Module, mb: GroupBatch, size: int, adv_mean: torch.Tensor, adv_std: torch.Tensor,
             coef: LossCoefficients) -> LossTerms:
    """The :class:`LossTerms` of this rank's part ``mb`` of a minibatch of ``size``
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
    return sum(terms.loss for terms in parts), torch.stack([stat_row(terms) for terms in parts])


__all__ = ["STAT_NAMES", "CriticBatch", "GroupBatch", "LossCoefficients", "LossTerms", "SequenceBatch",
           "advantage_moments", "advantage_sums", "group_loss", "groups_loss", "moments_of", "policy_terms", "ppo_loss",
           "stat_row", "value_terms", "weighted_sum"]
