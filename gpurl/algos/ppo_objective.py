"""The PPO objective of one minibatch, as the module the learner differentiates (:mod:`.update_step`).

Its parameters are every trained network's (``trainable``: the groups' policies, and MAPPO's central
critics under ``critic:<group>``); ``forward(m, inputs)`` reads minibatch ``m`` (int64 [1] on the device: indexing with
it is a gather, never a host read)
of each group's epoch buffers (:meth:`~.ppo_samples.PPOSamples.group_inputs`) and returns
:func:`~.ppo_loss.groups_loss` of them: the loss is written once there.
"""
from __future__ import annotations

import torch
from torch import nn

from .ppo_loss import CriticBatch, GroupBatch, LossCoefficients, SequenceBatch, groups_loss, moments_of
from .ppo_samples import ADVANTAGE, LOG_PROB, RETURN, START, VALUE, GroupColumns


class PPOObjective(nn.Module):
    """``(loss, statistics float32 [groups, 6])`` of minibatch m of every group (see the module docstring).

    ``columns``: each trained group's :class:`GroupColumns`; ``critic_agents``: the agents of each group's
    central critic (None: the policies' own critics).
    """

    def __init__(self, trainable: nn.ModuleDict, columns: dict[str, GroupColumns], coef: LossCoefficients,
                 central: bool):
        super().__init__()
        self.trainable = trainable
        self.columns, self.coef, self.central = columns, coef, central
        self.names = list(columns)

    def forward(self, m: torch.Tensor, inputs: list[tuple]):
        batches, critic_batches, sizes, value_sizes, moments = [], [], [], [], []
        for name, x in zip(self.names, inputs):
            rows, weight, counts, moment, hidden, critic_rows, critic_weight, value_counts = x
            cols = self.columns[name]
            batches.append(self._batch(cols, rows, pick(weight, m), hidden, m))
            sizes.append(pick(counts, m))
            value_sizes.append(pick(value_counts, m))
            mean_std = pick(moment, m)
            moments.append((mean_std[0], mean_std[1]))
            if self.central:
                c = pick(critic_rows, m)
                n = cols.agents
                S = c.shape[1] - 2 * n
                critic_batches.append(CriticBatch(c[:, :S], c[:, S:S + n], c[:, S + n:], pick(critic_weight, m)))
        policies = [self.trainable[name] for name in self.names]
        critics = [self.trainable[f"critic:{name}"] for name in self.names] if self.central else None
        return groups_loss(policies, batches, sizes, moments, self.coef, critics,
                           critic_batches if self.central else None, value_sizes)

    @staticmethod
    def _batch(cols: GroupColumns, epoch: torch.Tensor, weight: torch.Tensor, hidden, m: torch.Tensor):
        """Group rows of minibatch m as the loss takes them."""
        D, A = cols.inputs, cols.actions
        rows = pick(epoch, m, 1 if cols.recurrent else 0)                        # [T, B, F] or [B, F]
        actions = rows[..., D:D + A]
        if cols.categorical:
            actions = actions.long()
        fields = [rows[..., cols.column(k)] for k in (LOG_PROB, ADVANTAGE, RETURN, VALUE)]
        if cols.recurrent:
            return SequenceBatch(rows[..., :D], actions, *fields, hidden=pick(hidden, m),
                                 starts=rows[..., cols.column(START)] > 0.5, weight=weight)
        return GroupBatch(rows[:, :D], actions, *fields, weight=weight)


def pick(x: torch.Tensor, m: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """Entry ``m`` (int64 [1]) of ``x`` along ``dim``, that dim removed: a gather, no host read."""
    return x.index_select(dim, m).squeeze(dim)


def minibatch_moments(sums: torch.Tensor, counts: torch.Tensor, normalize: bool) -> torch.Tensor:
    """float32 [M, 2]: each minibatch's advantage (mean, std) from its float64 ``sums`` [M, 2] over ``counts``
    [M] samples; (0, 1) (no normalisation) where ``normalize`` is off or a minibatch has at most one sample."""
    mean, std = moments_of(sums, counts.double())
    use = (counts > 1) & normalize
    return torch.stack([torch.where(use, mean, 0.0), torch.where(use, std, 1.0)], -1)


__all__ = ["PPOObjective", "minibatch_moments", "pick"]
