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

from typing import Sequence

import gymnasium
import torch
from torch import nn

from ..fusion.activations import ACTIVATIONS
from ..fusion.counter_rng import uniform_ref
from .distributions import Categoricals, DiagGaussian
from .gru import RecurrentActor
from .layers import mlp


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
        # The count as a fill, not a tensor built from a Python list (that would copy from the host).
        moments = torch.cat([x.new_full((1,), x.shape[0], dtype=torch.float64),
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
    """Policy (and, for independent learners, value) of one agent group.

    - ``recurrent=False``: the actor is an MLP; ``True``: :class:`~.gru.RecurrentActor` (a GRU after
      its first layer), whose state of H = ``widths[0]`` units per agent the caller carries;
    - ``critic=True``: a critic MLP on the same input (PPO, A2C); ``False``: none (MAPPO's critic reads
      the global state, :class:`~.central_critic.CentralCritic`), and ``value`` results are None.

    ``obs``: float32 [B, in_dim]; ``actions``: [B, action_dims] (int64 for categorical heads, float32
    for Box). Returned log-probs, entropies and values are float32 [B].
    """

    def __init__(self, in_dim: int, space: gymnasium.Space, widths: Sequence[int] = (64, 64),
                 activation: str = "tanh", norm_obs: bool = True, generator: torch.Generator | None = None,
                 recurrent: bool = False, critic: bool = True):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.in_dim = in_dim
        self.activation = activation
        self.dist = make_distribution(space)
        self.recurrent = recurrent
        self.actor = (RecurrentActor(in_dim, widths, self.dist.num_params, activation, 0.01, generator) if recurrent
                      else mlp(in_dim, widths, self.dist.num_params, activation, 0.01, generator))
        self.critic = mlp(in_dim, widths, 1, activation, 1.0, generator) if critic else None
        # Box heads learn a state-independent log standard deviation (empty for categorical heads).
        self.log_std = nn.Parameter(torch.zeros(self.dist.num_log_std))
        self.obs_norm = RunningNorm(in_dim) if norm_obs else nn.Identity()

    @property
    def action_dims(self) -> int:
        return self.dist.action_dims

    @property
    def action_dtype(self) -> torch.dtype:
        return self.dist.action_dtype

    @property
    def hidden_size(self) -> int:
        """Units of the recurrent state per agent (0: not recurrent)."""
        return self.actor.hidden_size if self.recurrent else 0

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(self.obs_norm(obs)).squeeze(-1)

    def act(self, obs: torch.Tensor, agent_ids: torch.Tensor, step: torch.Tensor, seed: torch.Tensor,
            hidden: torch.Tensor | None = None, start: torch.Tensor | None = None, deterministic: bool = False):
        """Sample actions: ``(action [B, action_dims], log_prob [B], value [B] or None, hidden' [B, H]
        or None)``; ``deterministic``: the most likely action instead (evaluation), with its log-prob.

        The uniforms come from the counter RNG keyed by ``seed`` (int64 [2]: the low and high 32
        bits), ``agent_ids`` (int64 [B], global agent ids), ``step`` (int64 [1]) and the head. A
        recurrent actor takes the state carried in, ``hidden`` float32 [B, H], and ``start`` bool [B]
        (this observation starts an episode: the state is zeroed first)."""
        x = self.obs_norm(obs)
        if self.recurrent:
            params, hidden = self.actor.step(x, hidden, start)
        else:
            params, hidden = self.actor(x), None
        if deterministic:
            action = self.dist.mode(params)
            log_prob = self.dist.log_prob_entropy(params, self.log_std, action)[0]
        else:
            heads = torch.arange(self.dist.num_uniforms, device=obs.device)
            u = uniform_ref(seed, agent_ids.unsqueeze(1), step, heads)
            action, log_prob = self.dist.sample(params, self.log_std, u)
        value = self.critic(x).squeeze(-1) if self.critic is not None else None
        return action, log_prob, value, hidden

    def normalize(self, obs: torch.Tensor) -> torch.Tensor:
        """The networks' input: ``obs`` normalised by the running statistics (none with norm_obs off)."""
        return self.obs_norm(obs)

    def evaluate(self, obs: torch.Tensor, actions: torch.Tensor, normalized: bool = False):
        """``(log_prob [B], entropy [B], value [B] or None)`` of given actions, with gradients (a
        feed-forward actor). ``normalized``: ``obs`` is already :meth:`normalize`'s output (a learner
        whose statistics are fixed during an update normalises its whole batch once)."""
        x = obs if normalized else self.obs_norm(obs)
        log_prob, entropy = self.dist.log_prob_entropy(self.actor(x), self.log_std, actions)
        return log_prob, entropy, self.critic(x).squeeze(-1) if self.critic is not None else None

    def evaluate_sequence(self, obs: torch.Tensor, actions: torch.Tensor, hidden: torch.Tensor,
                          starts: torch.Tensor):
        """A recurrent actor's replay of whole sequences (truncated BPTT over T): ``(log_prob [T, B],
        entropy [T, B], value [T, B] or None)`` for normalised ``obs`` [T, B, in_dim], ``actions`` [T,
        B, action_dims], the state entering the first step ``hidden`` [B, H] and ``starts`` bool [T, B]."""
        T, B = starts.shape
        params, _ = self.actor.sequence(obs, hidden, starts)
        log_prob, entropy = self.dist.log_prob_entropy(params.reshape(T * B, -1), self.log_std,
                                                       actions.reshape(T * B, -1))
        value = self.critic(obs).view(T, B) if self.critic is not None else None
        return log_prob.view(T, B), entropy.view(T, B), value


__all__ = ["ActorCritic", "RunningNorm", "make_distribution", "mlp"]
