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


def advantage_moments(adv: torch.Tensor, size: int, comm) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mean, std)`` float32 scalars of a minibatch of ``size`` advantages over all ranks, of which
    ``adv`` are this rank's: float64 sums, all-reduced by ``comm``, the unbiased std."""
    moments = torch.stack([adv.double().sum(), adv.double().square().sum()])
    comm.all_reduce_(moments)
    mean = moments[0] / size
    std = ((moments[1] - size * mean.square()).clamp(min=0) / max(size - 1, 1)).sqrt()
    return mean.float(), std.float()


def ppo_loss(policy: nn.Module, mb: GroupBatch, size: int, adv_mean: torch.Tensor, adv_std: torch.Tensor,
             coef: LossCoefficients) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, stats float32 [len(STAT_NAMES)])`` of this rank's part ``mb`` of a minibatch of ``size``
    samples over all ranks (``mb.inputs`` normalised: :meth:`ActorCritic.normalize`). Both are this
    rank's share of the minibatch means (the shares of all ranks sum to them), so gradients summed over
    ranks are the whole minibatch's. ``adv_mean``/``adv_std`` normalise the advantages (0 and 1 leave
    them as they are: 1 + 1e-8 is 1 in float32)."""
    log_prob, entropy, value = policy.evaluate(mb.inputs, mb.actions, normalized=True)
    log_ratio = log_prob - mb.log_prob
    ratio = log_ratio.exp()
    adv = (mb.advantages - adv_mean) / (adv_std + 1e-8)
    pg_loss1 = -adv * ratio
    if coef.clip_coef > 0:
        pg_loss = torch.max(pg_loss1, -adv * ratio.clamp(1 - coef.clip_coef, 1 + coef.clip_coef)).sum() / size
    else:
        pg_loss = pg_loss1.sum() / size
    if coef.clip_vloss and coef.clip_coef > 0:
        clipped = mb.values + (value - mb.values).clamp(-coef.clip_coef, coef.clip_coef)
        v_loss = 0.5 * torch.max((value - mb.returns).square(), (clipped - mb.returns).square()).sum() / size
    else:
        v_loss = 0.5 * (value - mb.returns).square().sum() / size
    entropy_mean = entropy.sum() / size
    loss = pg_loss - coef.ent_coef * entropy_mean + coef.vf_coef * v_loss
    with torch.no_grad():
        approx_kl = ((ratio - 1) - log_ratio).sum() / size
        clipfrac = (((ratio - 1).abs() > coef.clip_coef).float().sum() / size if coef.clip_coef > 0
                    else ratio.new_zeros(()))
        stats = torch.stack([loss, pg_loss, v_loss, entropy_mean, approx_kl, clipfrac]).detach()
    return loss, stats


def groups_loss(policies: list[nn.Module], batches: list[GroupBatch], sizes: list[int],
                moments: list[tuple[torch.Tensor, torch.Tensor]], coef: LossCoefficients):
    """Several groups' minibatches at once: ``(sum of their losses, stats float32 [groups, 6])``. One
    call (one compiled graph, one backward pass) per minibatch instead of one per group."""
    parts = [ppo_loss(p, mb, size, mean, std, coef)
             for p, mb, size, (mean, std) in zip(policies, batches, sizes, moments)]
    return sum(loss for loss, _ in parts), torch.stack([stats for _, stats in parts])


__all__ = ["STAT_NAMES", "GroupBatch", "LossCoefficients", "advantage_moments", "groups_loss", "ppo_loss"]
