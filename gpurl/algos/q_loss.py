"""The value-based losses (IQL, VDN, QMIX), written once in torch: one TD step over sampled transitions.

Shapes: B sampled transitions, n agents of one group, A actions per agent, S the global state's size.

- IQL: every agent learns its own Q from its own reward, a double-Q target (the online network picks the
  next action, the target network values it).
- VDN: the group's Q is the sum of its agents' Qs, learned from the team reward.
- QMIX: the group's Q is a monotonic mix of its agents' Qs, with weights made non-negative (``abs``) by
  hypernetworks of the global state, learned from the team reward.

The team reward of a group is the sum of its agents' rewards, as JaxMARL's baselines (their global reward)
and EPyMARL (reward_scalarisation "sum") take it; where every agent gets the same reward (simple_tag's
adversaries) it is n times that reward. The scale matters: with the mean, VDN on simple_spread ended below
JaxMARL's vdn_rnn at equal env steps, and within its interval with the sum (docs/benchmarks.md, 2026-11-29).

A terminated transition does not bootstrap; a truncated one does (its next input is the final observation,
see gpurl.storage.replay).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .layers import mlp, orthogonal_linear

Q_KINDS = ("iql", "vdn", "qmix")


def chosen(q: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """The Q of the action taken: q [B, n, A], actions int64 [B, n, 1] -> [B, n]."""
    return q.gather(-1, actions).squeeze(-1)


def double_q_next(q_next_online: torch.Tensor, q_next_target: torch.Tensor) -> torch.Tensor:
    """Double Q-learning's next value: the target network's Q [B, n, A] at the online network's argmax
    [B, n, A] -> [B, n]."""
    return chosen(q_next_target, q_next_online.argmax(-1, keepdim=True))


def td_target(reward: torch.Tensor, terminated: torch.Tensor, next_value: torch.Tensor, gamma: float) -> torch.Tensor:
    """``reward + gamma * next_value`` where the episode did not terminate: reward, next_value [B, ...],
    terminated bool [B] (broadcast over the trailing dims)."""
    keep = (~terminated).to(next_value.dtype).view(-1, *([1] * (next_value.dim() - 1)))
    return reward + gamma * keep * next_value


class QMixer(nn.Module):
    """QMIX's mixing network: Q_tot(q [B, n], state [B, S]) = w2 . elu(q . W1 + b1) + b2, with W1 [n, embed]
    and w2 [embed] the absolute values of hypernetwork outputs, so dQ_tot / dq_i >= 0 for every agent."""

    def __init__(self, num_agents: int, state_dim: int, embed: int = 32, hyper_hidden: int = 64,
                 generator: torch.Generator | None = None):
        super().__init__()
        self.num_agents, self.embed = num_agents, embed
        # The weight hypernetworks start small (output gain 0.1): with gain 1, dQ_tot/dq_i starts near
        # embed x |w1| x |w2| ~ 20, and QMIX on simple_spread diverged to worse than random (measured:
        # -56 against random -26 after 768k env steps; -18.6 with 0.1).
        self.hyper_w1 = mlp(state_dim, (hyper_hidden,), num_agents * embed, "relu", 0.1, generator)
        self.hyper_b1 = orthogonal_linear(state_dim, embed, 1.0, generator)
        self.hyper_w2 = mlp(state_dim, (hyper_hidden,), embed, "relu", 0.1, generator)
        self.value = mlp(state_dim, (embed,), 1, "relu", 1.0, generator)

    def forward(self, q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """q [B, n], state [B, S] -> Q_tot [B]."""
        w1 = self.hyper_w1(state).abs().view(-1, self.num_agents, self.embed)
        hidden = F.elu(torch.bmm(q.unsqueeze(1), w1).squeeze(1) + self.hyper_b1(state))
        w2 = self.hyper_w2(state).abs()
        return (hidden * w2).sum(-1) + self.value(state).squeeze(-1)


def _weighted_mse(pred: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """Mean of (pred - target)^2 over every element, the rows (dim 0) weighted by ``weight`` [B] (None: all
    1); the mean divides by all B rows, so ranks that weight disjoint rows add up to the one-device mean."""
    err = (pred - target) ** 2
    if weight is not None:
        err = err * weight.view(-1, *([1] * (err.dim() - 1)))
    return err.sum() / err.numel()


def q_loss(kind: str, q_taken: torch.Tensor, next_value: torch.Tensor, reward: torch.Tensor,
           terminated: torch.Tensor, gamma: float, mixer: QMixer | None = None,
           target_mixer: QMixer | None = None, state: torch.Tensor | None = None,
           next_state: torch.Tensor | None = None, weight: torch.Tensor | None = None) -> torch.Tensor:
    """Mean squared TD error of one group.

    q_taken [B, n]: the online Qs of the actions taken; next_value [B, n]: the (double-Q) next values from
    the target network (no gradient flows into them); reward [B, n]; terminated bool [B]. QMIX also takes
    its online and target mixers and the global state before and after the step ([B, S]). weight [B]: each
    transition's weight (a data-parallel learner's 0 for other ranks' rows; None: all 1).
    """
    next_value = next_value.detach()
    if kind == "iql":
        return _weighted_mse(q_taken, td_target(reward, terminated, next_value, gamma), weight)
    team_reward = reward.sum(-1)
    if kind == "vdn":
        return _weighted_mse(q_taken.sum(-1), td_target(team_reward, terminated, next_value.sum(-1), gamma), weight)
    if kind == "qmix":
        with torch.no_grad():
            next_total = target_mixer(next_value, next_state)
        return _weighted_mse(mixer(q_taken, state), td_target(team_reward, terminated, next_total, gamma), weight)
    raise ValueError(f"unknown value-based algorithm {kind!r}; choose from {Q_KINDS}")
