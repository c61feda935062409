"""Networks of the policy-gradient algorithms: one actor-critic per agent group, shared by its agents.

An actor MLP maps an input row to every action head's parameters (the logits of each categorical
head of a Discrete/MultiDiscrete space, concatenated; the mean of a Box space); a critic MLP of the
same widths maps it to a value. Actor and critic are separate networks (as in CleanRL): Tag's rewards
of +-10 per tag give value targets in the tens, whose gradients would swamp the policy's in a shared
trunk.

:meth:`ActorCritic.act` is the one definition of acting: normalise, actor MLP, sample with the counter
RNG. The fused Triton actor (``gpurl.fusion.actor``) and the compiled CPU path are held to it.
"""
from __future__ import annotations

import math
from typing import Sequence

import gymnasium
import torch
from torch import nn

from ..fusion.activations import ACTIVATIONS
from ..fusion.counter_rng import uniform_ref
from .distributions import Categoricals, DiagGaussian


def mlp(in_dim: int, widths: Sequence[int], out_dim: int, activation: str, out_gain: float,
        generator: torch.Generator | None = None) -> nn.Sequential:
    """Linear layers ``in_dim -> widths... -> out_dim``, orthogonal init (PPO's usual gains) drawn
    from ``generator`` (the global RNG when None; a given generator leaves the global one untouched)."""
    layers: list[nn.Module] = []
    dims = [in_dim, *widths]
    for a, b in zip(dims[:-1], dims[1:]):
        layers += [_orthogonal(a, b, math.sqrt(2), generator), ACTIVATIONS[activation]()]
    layers.append(_orthogonal(dims[-1], out_dim, out_gain, generator))
    return nn.Sequential(*layers)


def _orthogonal(in_features: int, out_features: int, gain: float, generator: torch.Generator | None) -> nn.Linear:
    # skip_init: nn.Linear's own (Kaiming) init would draw from the global RNG, only to be overwritten.
    layer = nn.utils.skip_init(nn.Linear, in_features, out_features)
    nn.init.orthogonal_(layer.weight, gain, generator=generator)
    nn.init.zeros_(layer.bias)
    return layer


def make_distribution(space: gymnasium.Space):
    """The action distribution family of a Gymnasium space (Discrete, MultiDiscrete or Box)."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return Categoricals([int(space.n)])
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        if space.nvec.ndim != 1:
            raise ValueError(f"MultiDiscrete action spaces must be 1-D, got nvec of shape {space.nvec.shape}")
        return Categoricals([int(n) for n in space.nvec])
    if isinstance(space, gymnasium.spaces.Box):
        if len(space.shape) != 1:
            raise ValueError(f"Box action spaces must be 1-D, got shape {space.shape}")
        return DiagGaussian(int(space.shape[0]))
    raise TypeError(f"no policy head for action space {space!r} (Discrete, MultiDiscrete or Box)")


class RunningNorm(nn.Module):
    """Input normalisation with running mean and variance (buffers: saved with the policy).

    Updated between iterations from the rollout just collected (``update``), never during one, so the
    update phase sees exactly the inputs the rollout acted on.
    """

    def __init__(self, dim: int, clip: float = 10.0):
        super().__init__()
        self.clip = clip
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("var", torch.ones(dim))
        self.register_buffer("count", torch.tensor(1e-4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ((x - self.mean) * torch.rsqrt(self.var + 1e-8)).clamp(-self.clip, self.clip)

    @torch.no_grad()
    def update(self, x: torch.Tensor, comm=None) -> None:
        """Merge the statistics of ``x`` [B, dim], summed over ranks by ``comm`` (parallel Welford
        update, all on the device; the batch moments in float64 so sums over ranks lose nothing)."""
        moments = torch.cat([x.new_tensor([x.shape[0]], dtype=torch.float64),
                             x.double().sum(0), x.double().square().sum(0)])
        if comm is not None:
            comm.all_reduce_(moments)
        dim = x.shape[1]
        n = moments[0]
        batch_mean = moments[1:1 + dim] / n
        batch_var = (moments[1 + dim:] / n - batch_mean.square()).clamp(min=0)
        batch_mean, batch_var, n = batch_mean.float(), batch_var.float(), n.float()
        total = self.count + n
        delta = batch_mean - self.mean
        self.mean += delta * (n / total)
        self.var.copy_((self.var * self.count + batch_var * n + delta.square() * (self.count * n / total)) / total)
        self.count.copy_(total)


class ActorCritic(nn.Module):
    """Policy and value of one agent group.

    ``obs``: float32 [B, in_dim]; ``actions``: [B, action_dims] (int64 for categorical heads, float32
    for Box). Returned log-probs, entropies and values are float32 [B].
    """

    def __init__(self, in_dim: int, space: gymnasium.Space, widths: Sequence[int] = (64, 64),
                 activation: str = "tanh", norm_obs: bool = True, generator: torch.Generator | None = None):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.in_dim = in_dim
        self.activation = activation
        self.dist = make_distribution(space)
        self.actor = mlp(in_dim, widths, self.dist.num_params, activation, 0.01, generator)
        self.critic = mlp(in_dim, widths, 1, activation, 1.0, generator)
        # Box heads learn a state-independent log standard deviation (empty for categorical heads).
        self.log_std = nn.Parameter(torch.zeros(self.dist.num_log_std))
        self.obs_norm = RunningNorm(in_dim) if norm_obs else nn.Identity()

    @property
    def action_dims(self) -> int:
        return self.dist.action_dims

    @property
    def action_dtype(self) -> torch.dtype:
        return self.dist.action_dtype

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(self.obs_norm(obs)).squeeze(-1)

    def act(self, obs: torch.Tensor, agent_ids: torch.Tensor, step: torch.Tensor, seed: torch.Tensor):
        """Sample actions: ``(action [B, action_dims], log_prob [B], value [B])``.

        The uniforms come from the counter RNG keyed by ``seed`` (int64 [2]: the low and high 32
        bits), ``agent_ids`` (int64 [B], global agent ids), ``step`` (int64 [1]) and the head."""
        x = self.obs_norm(obs)
        heads = torch.arange(self.dist.num_uniforms, device=obs.device)
        u = uniform_ref(seed, agent_ids.unsqueeze(1), step, heads)
        action, log_prob = self.dist.sample(self.actor(x), self.log_std, u)
        return action, log_prob, self.critic(x).squeeze(-1)

    def normalize(self, obs: torch.Tensor) -> torch.Tensor:
        """The networks' input: ``obs`` normalised by the running statistics (none with norm_obs off)."""
        return self.obs_norm(obs)

    def evaluate(self, obs: torch.Tensor, actions: torch.Tensor, normalized: bool = False):
        """``(log_prob [B], entropy [B], value [B])`` of given actions, with gradients. ``normalized``:
        ``obs`` is already :meth:`normalize`'s output (a learner whose statistics are fixed during an
        update normalises its whole batch once)."""
        x = obs if normalized else self.obs_norm(obs)
        log_prob, entropy = self.dist.log_prob_entropy(self.actor(x), self.log_std, actions)
        return log_prob, entropy, self.critic(x).squeeze(-1)


__all__ = ["ActorCritic", "RunningNorm", "make_distribution", "mlp"]
