"""Generalised advantage estimation (GAE(lambda)) with terminated vs truncated episodes.

At step t of env e (agent dims broadcast):
- terminated: the episode really ended; nothing follows: delta = r - V(s_t).
- truncated: cut by the time limit; the future is bootstrapped from the value of the final
  observation: delta = r + gamma * V(final_obs_t) - V(s_t).
- otherwise: delta = r + gamma * V(s_{t+1}) - V(s_t).
Advantages run backwards, A_t = delta_t + gamma * lambda * A_{t+1}, cut at every episode end (with
autoreset, s_{t+1} after an end is the next episode's first observation).
"""
from __future__ import annotations

import torch


def gae_ref(reward: torch.Tensor, value: torch.Tensor, final_value: torch.Tensor, terminated: torch.Tensor,
            truncated: torch.Tensor, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference GAE: ``(advantages, returns)``, float32 [T, E, N].

    reward [T, E, N]; value [T + 1, E, N] (value[T] bootstraps the step after the rollout);
    final_value [T, E, N] (read only where truncated); terminated, truncated bool [T, E].
    """
    T = reward.shape[0]
    advantages = torch.empty_like(reward)
    last = torch.zeros_like(reward[0])
    for t in range(T - 1, -1, -1):
        ended = (terminated[t] | truncated[t]).unsqueeze(-1)
        next_value = torch.where(ended, torch.where(truncated[t].unsqueeze(-1), final_value[t], 0.0),
                                 value[t + 1])
        delta = reward[t] + gamma * next_value - value[t]
        last = delta + (gamma * lam) * last * (~ended)
        advantages[t] = last
    return advantages, advantages + value[:T]
