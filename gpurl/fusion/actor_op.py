"""``torch.ops.gpurl.actor_step``: the fused actor as a torch custom op (CPU: the torch reference;
CUDA: the Triton kernel), and :class:`FusedActor`, which owns a group's packed weights and calls it.

The op mutates its three outputs in place (slices of the rollout buffer) and returns nothing, so
torch.compile and CUDA graph capture see it as one opaque call.
"""
from __future__ import annotations

from types import SimpleNamespace

import torch

from .actor import actor_step_ref, actor_step_triton
from .actor_cpu import actor_step_cpu
from .counter_rng import split_seed
from .packing import PackedPolicy

BACKENDS = ("auto", "torch", "fused")


def _packed_from(tensors, activation: str, norm_clip: float, nvec: list[int]) -> SimpleNamespace:
    (norm_mean, norm_rstd, a_w0, a_wh, a_b, a_wo, a_bo, c_w0, c_wh, c_b, c_wo, c_bo, nvec_t) = tensors
    heads = len(nvec)
    return SimpleNamespace(
        norm_mean=norm_mean, norm_rstd=norm_rstd, a_w0=a_w0, a_wh=a_wh, a_b=a_b, a_wo=a_wo, a_bo=a_bo,
        c_w0=c_w0, c_wh=c_wh, c_b=c_b, c_wo=c_wo, c_bo=c_bo, nvec_t=nvec_t, nvec=list(nvec), heads=heads,
        layers=a_b.shape[0], IP=a_w0.shape[0], HP=a_b.shape[1], NP=a_bo.shape[0] // heads,
        activation=activation, norm_clip=norm_clip if norm_clip > 0 else None,
        tensors=lambda: list(tensors),
    )


@torch.library.custom_op("gpurl::actor_step", mutates_args=("action", "log_prob", "value"))
def actor_step_op(x: torch.Tensor, norm_mean: torch.Tensor, norm_rstd: torch.Tensor, a_w0: torch.Tensor,
                  a_wh: torch.Tensor, a_b: torch.Tensor, a_wo: torch.Tensor, a_bo: torch.Tensor,
                  c_w0: torch.Tensor, c_wh: torch.Tensor, c_b: torch.Tensor, c_wo: torch.Tensor,
                  c_bo: torch.Tensor, nvec_t: torch.Tensor, step: torch.Tensor, action: torch.Tensor,
                  log_prob: torch.Tensor, value: torch.Tensor, seed_lo: int, seed_hi: int, env_offset: int,
                  num_agents: int,
                  group_start: int, activation: str, norm_clip: float, nvec: list[int], fused: bool) -> None:
    """Sample actions of one group at one step into ``action``/``log_prob``/``value`` (see actor.py)."""
    tensors = (norm_mean, norm_rstd, a_w0, a_wh, a_b, a_wo, a_bo, c_w0, c_wh, c_b, c_wo, c_bo, nvec_t)
    packed = _packed_from(tensors, activation, norm_clip, nvec)
    run = actor_step_triton if fused else actor_step_ref
    run(x, packed, step, (seed_hi << 32) | seed_lo, env_offset, num_agents, group_start, action, log_prob, value)


@actor_step_op.register_fake
def _(x, *args, **kwargs) -> None:
    return None


class FusedActor:
    """Acting for one agent group through ``torch.ops.gpurl.actor_step``.

    ``backend``: "fused" (the Triton kernel: CUDA, or CPU tensors under TRITON_INTERPRET=1), "torch"
    (the reference), "auto" (fused on CUDA; on the CPU the reference's GEMMs, then one Numba call for
    the sampling: :func:`~.actor_cpu.actor_step_cpu`).
    """

    def __init__(self, policy: torch.nn.Module, activation: str, backend: str, seed: int, env_offset: int,
                 num_agents: int, group_start: int):
        if backend not in BACKENDS:
            raise ValueError(f"policy backend must be one of {BACKENDS}, got {backend!r}")
        self.packed = PackedPolicy(policy, activation)
        device = self.packed.a_w0.device
        self.fused = backend == "fused" or (backend == "auto" and device.type == "cuda")
        # "auto" on the CPU: torch's GEMMs and one Numba call for the sampling (see actor_cpu).
        self._unfused = actor_step_cpu if backend == "auto" and device.type == "cpu" else actor_step_ref
        if self.fused and device.type != "cuda":
            import os

            if os.environ.get("TRITON_INTERPRET") != "1":
                raise RuntimeError("the fused actor runs on CUDA tensors, or on CPU tensors only under "
                                   "TRITON_INTERPRET=1 (Triton's interpreter)")
        self.seed, self.env_offset, self.num_agents, self.group_start = seed, env_offset, num_agents, group_start

    def sync(self) -> None:
        self.packed.sync()

    def __call__(self, x: torch.Tensor, step: torch.Tensor, action: torch.Tensor, log_prob: torch.Tensor,
                 value: torch.Tensor, seed: int | None = None) -> None:
        """x float32 [E, n, in_dim]; step int64 [1] (device); outputs [E, n, heads] / [E, n] views."""
        p = self.packed
        seed = self.seed if seed is None else seed
        if not self.fused:
            # Called directly, not through the op: that saves the custom-op dispatch (tens of microseconds
            # per call, which the CPU rollout pays every step).
            self._unfused(x, p, step, seed, self.env_offset, self.num_agents, self.group_start,
                          action, log_prob, value)
            return
        torch.ops.gpurl.actor_step(
            x, *p.tensors(), step, action, log_prob, value, *split_seed(seed),
            self.env_offset,
            self.num_agents, self.group_start, p.activation, float(p.norm_clip or 0.0), p.nvec, self.fused)


__all__ = ["BACKENDS", "FusedActor", "actor_step_op", "split_seed"]
