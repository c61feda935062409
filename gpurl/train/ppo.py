"""The PPO update (A2C is the configuration with one epoch, one minibatch and no clipping).

Per group, per minibatch: clipped surrogate on normalised advantages, optionally clipped value loss,
entropy bonus; the groups' losses are summed into one backward pass, each group's gradient norm is
clipped on its own, and one optimizer step follows. Statistics stay on the device until the trainer
reads them once per iteration.

Minibatches are drawn from the *global* rollout (all envs of all ranks, flattened over [T, E, n]) by
a generator every rank holds in the same state; a rank trains on the members of each minibatch that
fall in its env shard, every mean is a sum divided by the global minibatch size, and the placement
sums gradients and advantage moments over ranks. So the update is the same arithmetic however the envs
are split: data-parallel on two ranks gives the parameters single-device training gives.

On the CPU, categorical MLP policies take :mod:`.ppo_cpu` instead of ``group_loss`` + autograd: the
same loss and gradients (the tests hold them to these), written by torch GEMMs and fused Numba passes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from .config import TrainConfig
from .placement import EnvShard, LocalComm, Placement
from .ppo_cpu import fused_cpu_groups


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

    def columns(self) -> torch.Tensor:
        """float32 [B, 4]: old log-prob, advantage, return, old value side by side."""
        return torch.stack([self.log_prob, self.advantages, self.returns, self.values], 1)

    def rows(self, idx: torch.Tensor) -> "GroupBatch":
        """The samples ``idx`` (a minibatch). The float fields are gathered as one matrix: a minibatch's
        rows are scattered over the rollout, and one read per row instead of five took the CPU update's
        gathers from 13-14 to 9.9 ms per simple-tag iteration (2 vCPUs). index_select, not t[idx]: on
        the CPU advanced indexing is ~3x slower for these gathers."""
        if self._floats is None:
            self._floats = torch.cat([self.inputs, self.columns()], 1)
        rows, d = self._floats.index_select(0, idx), self.inputs.shape[1]
        return GroupBatch(rows[:, :d], self.actions.index_select(0, idx), rows[:, d], rows[:, d + 1],
                          rows[:, d + 2], rows[:, d + 3], self.agents)


STAT_NAMES = ("loss", "pg_loss", "v_loss", "entropy", "approx_kl", "clipfrac")


def group_loss(policy: nn.Module, mb: GroupBatch, size: int, cfg: TrainConfig, comm) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, stats [len(STAT_NAMES)])`` of this rank's part ``mb`` of a minibatch of ``size`` samples
    (over all ranks); both are this rank's share of the minibatch means (the ranks' shares sum to them)."""
    log_prob, entropy, value = policy.evaluate(mb.inputs, mb.actions)
    log_ratio = log_prob - mb.log_prob
    ratio = log_ratio.exp()
    adv = mb.advantages
    if cfg.norm_adv and size > 1:
        moments = torch.stack([adv.double().sum(), adv.double().square().sum()])
        comm.all_reduce_(moments)
        mean = moments[0] / size
        std = ((moments[1] - size * mean.square()).clamp(min=0) / (size - 1)).sqrt()
        adv = (adv - mean.float()) / (std.float() + 1e-8)
    pg_loss1 = -adv * ratio
    if cfg.clip_coef > 0:
        pg_loss = torch.max(pg_loss1, -adv * ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef)).sum() / size
    else:
        pg_loss = pg_loss1.sum() / size
    if cfg.clip_vloss and cfg.clip_coef > 0:
        clipped = mb.values + (value - mb.values).clamp(-cfg.clip_coef, cfg.clip_coef)
        v_loss = 0.5 * torch.max((value - mb.returns).square(), (clipped - mb.returns).square()).sum() / size
    else:
        v_loss = 0.5 * (value - mb.returns).square().sum() / size
    entropy_mean = entropy.sum() / size
    loss = pg_loss - cfg.ent_coef * entropy_mean + cfg.vf_coef * v_loss
    with torch.no_grad():
        approx_kl = ((ratio - 1) - log_ratio).sum() / size
        clipfrac = (((ratio - 1).abs() > cfg.clip_coef).float().sum() / size if cfg.clip_coef > 0
                    else ratio.new_zeros(()))
        stats = torch.stack([loss, pg_loss, v_loss, entropy_mean, approx_kl, clipfrac]).detach()
    return loss, stats


def ppo_update(policies: nn.ModuleDict, optimizer: torch.optim.Optimizer, batches: dict[str, GroupBatch],
               cfg: TrainConfig, generator: torch.Generator, shard: EnvShard | None = None,
               placement: Placement | None = None) -> dict[str, torch.Tensor]:
    """Epochs x minibatches over every group's batch; returns mean stats per group (device tensors).

    ``batches`` hold this rank's samples, envs ``shard`` of the global rollout (None: all of it);
    ``generator`` draws the global minibatches and must be in the same state on every rank.
    """
    placement = placement or Placement()
    comm = placement.comm if shard is not None and not shard.whole else LocalComm()
    totals = {name: None for name in batches}
    params = [p for name in batches for p in policies[name].parameters()]
    sizes = {name: len(b) if shard is None else len(b) // shard.size * shard.total  # samples over all ranks
             for name, b in batches.items()}
    fused = fused_cpu_groups(policies, batches, sizes, cfg)
    steps = 0
    for _ in range(cfg.epochs):
        chunks = {}
        for name, b in batches.items():
            chunks[name] = torch.randperm(sizes[name], device=b.inputs.device,
                                          generator=generator).tensor_split(cfg.minibatches)
        for m in range(cfg.minibatches):
            # A rank may hold none of a minibatch's samples: the zero term keeps its gradients defined.
            total_loss = sum(p.sum() * 0.0 for p in params) if comm.world_size > 1 and fused is None else 0
            for name, batch in batches.items():
                chunk = chunks[name][m]
                idx = chunk if shard is None else shard.localize(chunk, batch.agents)
                if fused is not None:  # writes the group's .grad (every element) without autograd
                    stats = fused[name].loss_and_grads(idx, len(chunk), cfg, comm)
                else:
                    loss, stats = group_loss(policies[name], batch.rows(idx), len(chunk), cfg, comm)
                    total_loss = total_loss + loss
                totals[name] = stats if totals[name] is None else totals[name] + stats
            if fused is None:
                optimizer.zero_grad(set_to_none=True)
                total_loss.backward()
            if comm.world_size > 1:
                placement.reduce_gradients(params)
            if cfg.max_grad_norm > 0:
                for name in batches:
                    if fused is not None:
                        fused[name].clip_grad_norm_(cfg.max_grad_norm)
                    else:
                        nn.utils.clip_grad_norm_(policies[name].parameters(), cfg.max_grad_norm)
            optimizer.step()
            steps += 1
    out = {name: t / steps for name, t in totals.items()}
    if comm.world_size > 1:
        stacked = comm.all_reduce_(torch.stack([out[name] for name in batches]))
        out = {name: stacked[i] for i, name in enumerate(batches)}
    return out
