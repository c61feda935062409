"""Action distributions of the policy heads, written for batches of rows, sampled from given uniforms.

Sampling takes its uniforms from the caller (the counter RNG, :func:`gpurl.fusion.counter_rng.uniform_ref`,
keyed by seed, global agent id, step and head), so an action depends on nothing but those keys: not on
batch layout, device count or backend. The fused Triton actor does the same arithmetic and is held to it.

- :class:`Categoricals`: one categorical per MultiDiscrete dimension (Discrete is one dimension),
  inverse-CDF sampling with one uniform per head; log-prob and entropy summed over heads.
- :class:`DiagGaussian`: a Box action with a learned state-independent log standard deviation; normal
  draws by Box-Muller from two uniforms per dimension.

No ``torch.distributions`` objects: building one per step validates arguments and allocates, which
costs more than the math on small batches (and stops torch.compile from fusing it).
"""
from __future__ import annotations

import math
from typing import Sequence

import torch


def log_softmax(logits: torch.Tensor) -> torch.Tensor:
    """``log_softmax(logits, -1)`` from the max-shifted logits (the shift carries no gradient)."""
    shifted = logits - logits.detach().amax(-1, keepdim=True)
    return shifted - shifted.exp().sum(-1, keepdim=True).log()


def inverse_cdf(logits: torch.Tensor, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(action int64 [...], log_prob [...])`` of logits [..., n] for uniforms u [...] in [0, 1).

    The first action whose running sum of exp(logit - max) reaches u * total. The clamp only guards
    u * total rounding past the last sum. The fused actor kernel computes exactly this."""
    m = logits.amax(-1, keepdim=True)
    ex = torch.exp(logits - m)
    s = ex.sum(-1)
    a = (torch.cumsum(ex, -1) < (u * s).unsqueeze(-1)).sum(-1).clamp(max=logits.shape[-1] - 1)
    log_prob = logits.gather(-1, a.unsqueeze(-1)).squeeze(-1) - m.squeeze(-1) - torch.log(s)
    return a, log_prob


class Categoricals:
    """Heads of sizes ``nvec``; the actor's output row is their logits side by side, [B, sum(nvec)]."""

    action_dtype = torch.int64
    num_log_std = 0

    def __init__(self, nvec: Sequence[int]):
        if not nvec or any(n < 1 for n in nvec):
            raise ValueError(f"categorical head sizes must be >= 1, got {list(nvec)}")
        self.nvec = [int(n) for n in nvec]
        self.num_params = sum(self.nvec)
        self.action_dims = len(self.nvec)
        #: uniforms per row: one per head
        self.num_uniforms = self.action_dims
        # Equal-sized heads (Tag's 21 x 21) are one [B, heads, n] tensor: one kernel per op, not per head.
        self._uniform = len(set(self.nvec)) == 1

    def _heads(self, logits: torch.Tensor) -> list[torch.Tensor]:
        """Per-head logits: one [B, heads, n] tensor for equal heads, else one [B, n_h] per head."""
        if self._uniform:
            return [logits.view(logits.shape[0], self.action_dims, self.nvec[0])]
        return list(logits.split(self.nvec, dim=-1))

    def sample(self, logits: torch.Tensor, log_std: torch.Tensor, u: torch.Tensor):
        """``(action int64 [B, heads], log_prob [B])`` from uniforms ``u`` [B, heads]."""
        if self._uniform:
            action, log_prob = inverse_cdf(self._heads(logits)[0], u)
            return action, log_prob.sum(-1)
        parts = [inverse_cdf(part, u[:, h]) for h, part in enumerate(self._heads(logits))]
        return torch.stack([a for a, _ in parts], -1), sum(lp for _, lp in parts)

    def mode(self, logits: torch.Tensor) -> torch.Tensor:
        """The most likely action, int64 [B, heads]: each head's argmax (the lowest index on ties)."""
        if self._uniform:
            return self._heads(logits)[0].argmax(-1)
        return torch.stack([part.argmax(-1) for part in self._heads(logits)], -1)

    def log_prob_entropy(self, logits: torch.Tensor, log_std: torch.Tensor, actions: torch.Tensor):
        """``(log_prob [B], entropy [B])`` of ``actions`` int64 [B, heads], summed over heads."""
        if self._uniform:
            logp = log_softmax(self._heads(logits)[0])
            log_prob = logp.gather(-1, actions.unsqueeze(-1)).squeeze(-1).sum(-1)
            return log_prob, -(logp.exp() * logp).sum((-1, -2))
        log_prob = entropy = 0
        for h, part in enumerate(self._heads(logits)):
            logp = log_softmax(part)
            log_prob = log_prob + logp.gather(-1, actions[:, h:h + 1]).squeeze(-1)
            entropy = entropy - (logp.exp() * logp).sum(-1)
        return log_prob, entropy


class DiagGaussian:
    """A Box action of ``dims`` components: the actor outputs the mean [B, dims]."""

    action_dtype = torch.float32

    def __init__(self, dims: int):
        if dims < 1:
            raise ValueError(f"a Box action needs >= 1 dimension, got {dims}")
        self.action_dims = self.num_params = self.num_log_std = dims
        #: uniforms per row: two per dimension (Box-Muller)
        self.num_uniforms = 2 * dims

    def sample(self, mean: torch.Tensor, log_std: torch.Tensor, u: torch.Tensor):
        """``(action float32 [B, dims], log_prob [B])`` from uniforms ``u`` [B, 2 * dims]."""
        noise = standard_normal(u)
        return mean + noise * log_std.exp(), self._log_prob(noise, log_std)

    def mode(self, mean: torch.Tensor) -> torch.Tensor:
        """The most likely action, float32 [B, dims]: the mean."""
        return mean

    def _log_prob(self, noise: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
        return (-0.5 * noise.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)

    def log_prob_entropy(self, mean: torch.Tensor, log_std: torch.Tensor, actions: torch.Tensor):
        log_prob = self._log_prob((actions - mean) / log_std.exp(), log_std)
        entropy = (0.5 + 0.5 * math.log(2 * math.pi) + log_std).sum().expand(mean.shape[0])
        return log_prob, entropy


def standard_normal(u: torch.Tensor) -> torch.Tensor:
    """Standard normals [..., D] from uniforms ``u`` [..., 2 D] in [0, 1) (Box-Muller: even columns the radius,
    odd ones the angle)."""
    radius = torch.sqrt(-2.0 * torch.log1p(-u[..., 0::2]))  # 1 - u in (0, 1]: the log is finite
    return radius * torch.cos((2.0 * math.pi) * u[..., 1::2])


__all__ = ["Categoricals", "DiagGaussian", "inverse_cdf", "log_softmax", "standard_normal"]
