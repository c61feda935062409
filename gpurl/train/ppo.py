"""The PPO update (A2C is the configuration with one epoch, one minibatch and no clipping).

Per group, per minibatch: clipped surrogate on normalised advantages, optionally clipped value loss,
entropy bonus; the groups' losses are summed into one backward pass, each group's gradient norm is
clipped on its own, and one optimizer step follows. Statistics stay on the device until the trainer
reads them once per iteration.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .config import TrainConfig


@dataclass
class GroupBatch:
    """One group's samples of a rollout, flattened over [T, E, n]: B = T * E * n rows."""

    inputs: torch.Tensor      # float32 [B, in_dim]
    actions: torch.Tensor     # [B, action_dims]
    log_prob: torch.Tensor    # float32 [B]
    advantages: torch.Tensor  # float32 [B]
    returns: torch.Tensor     # float32 [B]
    values: torch.Tensor      # float32 [B]

    def __len__(self) -> int:
        return self.inputs.shape[0]


STAT_NAMES = ("loss", "pg_loss", "v_loss", "entropy", "approx_kl", "clipfrac")


def group_loss(policy: nn.Module, mb: GroupBatch, cfg: TrainConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, stats [len(STAT_NAMES)])`` of one minibatch of one group."""
    log_prob, entropy, value = policy.evaluate(mb.inputs, mb.actions)
    log_ratio = log_prob - mb.log_prob
    ratio = log_ratio.exp()
    adv = mb.advantages
    if cfg.norm_adv and adv.numel() > 1:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg_loss1 = -adv * ratio
    if cfg.clip_coef > 0:
        pg_loss = torch.max(pg_loss1, -adv * ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef)).mean()
    else:
        pg_loss = pg_loss1.mean()
    if cfg.clip_vloss and cfg.clip_coef > 0:
        clipped = mb.values + (value - mb.values).clamp(-cfg.clip_coef, cfg.clip_coef)
        v_loss = 0.5 * torch.max((value - mb.returns).square(), (clipped - mb.returns).square()).mean()
    else:
        v_loss = 0.5 * (value - mb.returns).square().mean()
    entropy_mean = entropy.mean()
    loss = pg_loss - cfg.ent_coef * entropy_mean + cfg.vf_coef * v_loss
    with torch.no_grad():
        approx_kl = ((ratio - 1) - log_ratio).mean()
        clipfrac = ((ratio - 1).abs() > cfg.clip_coef).float().mean() if cfg.clip_coef > 0 else ratio.new_zeros(())
        stats = torch.stack([loss, pg_loss, v_loss, entropy_mean, approx_kl, clipfrac]).detach()
    return loss, stats


def ppo_update(policies: nn.ModuleDict, optimizer: torch.optim.Optimizer, batches: dict[str, GroupBatch],
               cfg: TrainConfig, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Epochs x minibatches over every group's batch; returns mean stats per group (device tensors)."""
    totals = {name: None for name in batches}
    steps = 0
    for _ in range(cfg.epochs):
        chunks = {name: torch.randperm(len(b), device=b.inputs.device, generator=generator)
                  .tensor_split(cfg.minibatches) for name, b in batches.items()}
        for m in range(cfg.minibatches):
            total_loss = 0
            for name, batch in batches.items():
                idx = chunks[name][m]
                mb = GroupBatch(*(getattr(batch, f)[idx] for f in GroupBatch.__dataclass_fields__))
                loss, stats = group_loss(policies[name], mb, cfg)
                total_loss = total_loss + loss
                totals[name] = stats if totals[name] is None else totals[name] + stats
            optimizer.zero_grad(set_to_none=True)
            total_loss.backward()
            if cfg.max_grad_norm > 0:
                for name in batches:
                    nn.utils.clip_grad_norm_(policies[name].parameters(), cfg.max_grad_norm)
            optimizer.step()
            steps += 1
    return {name: t / steps for name, t in totals.items()}
