"""Fused actor inference: observation rows in; action, summed log-prob and value out, in one kernel.

For one agent group, each program of ``actor_fused_kernel`` takes BLOCK_B rows of observations and
runs: normalisation -> actor MLP -> every categorical head's logits -> inverse-CDF sample with the
counter RNG (:mod:`counter_rng`, keyed by seed, global agent id, step) -> log-prob; and the critic
MLP -> value. It writes action, log-prob and value straight into the rollout buffer at step t (any
row strides), so a group's act phase is one launch instead of the dozens of eager torch kernels.

``actor_step_ref`` is the torch reference with the same arguments and the same arithmetic; the CPU
uses it, the tests hold the kernel to it. ``step`` is read from a device tensor, so a CUDA graph
replaying the launch sees the current step (a scalar argument would be frozen at capture).
"""
from __future__ import annotations

import functools

import torch

from . import fast_tanh
from .counter_rng import uniform_ref
from .packing import PackedPolicy

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - triton is a declared extra
    triton = None


def _act_ref(x: torch.Tensor, activation: str) -> torch.Tensor:
    # fast_tanh.tanh: torch.tanh off the CPU; on it the policies' own tanh (within 3e-7 of torch's).
    return fast_tanh.tanh(x) if activation == "tanh" else torch.relu(x)


@functools.lru_cache(maxsize=64)
def global_agent_ids(E: int, n: int, env_offset: int, num_agents: int, group_start: int, device) -> torch.Tensor:
    """int64 [E * n]: (env_offset + e) * num_agents + group_start + i for row (e, i). Cached (the
    rollout asks for the same ids every step); callers must not write into it."""
    e = torch.arange(E, device=device).repeat_interleave(n)
    i = torch.arange(n, device=device).repeat(E)
    return (env_offset + e) * num_agents + group_start + i


@torch.no_grad()
def actor_logits_value_ref(x: torch.Tensor, packed: PackedPolicy) -> tuple[torch.Tensor, torch.Tensor]:
    """The GEMM half of the actor: x float32 [E, n, in_dim] -> (logits [E * n, heads, NP], value [E * n]).

    Padded logits carry a -1e30 bias, so they add nothing to the sums and the inverse CDF never stops
    on them."""
    E, n, D = x.shape
    p = packed
    rows = x.reshape(E * n, D)
    h0 = (rows - p.norm_mean[:D]) * p.norm_rstd[:D]
    if p.norm_clip is not None:
        h0 = h0.clamp(-p.norm_clip, p.norm_clip)
    outs = []
    for w0, wh, b in ((p.a_w0, p.a_wh, p.a_b), (p.c_w0, p.c_wh, p.c_b)):
        h = _act_ref(torch.addmm(b[0], h0, w0[:D]), p.activation)
        for k in range(p.layers - 1):
            h = _act_ref(torch.addmm(b[k + 1], h, wh[k]), p.activation)
        outs.append(h)
    ha, hc = outs
    return torch.addmm(p.a_bo, ha, p.a_wo).view(E * n, p.heads, p.NP), torch.addmv(p.c_bo, hc, p.c_wo)


@torch.no_grad()
def actor_step_ref(x: torch.Tensor, packed: PackedPolicy, step: torch.Tensor, seed: int, env_offset: int,
                   num_agents: int, group_start: int, action: torch.Tensor, log_prob: torch.Tensor,
                   value: torch.Tensor) -> None:
    """x float32 [E, n, in_dim]; writes action int64 [E, n, heads], log_prob and value float32 [E, n]."""
    E, n, D = x.shape
    p = packed
    logits, v = actor_logits_value_ref(x, p)
    # All heads at once; the clamp only guards u * s rounding past the last real logit.
    ids = global_agent_ids(E, n, env_offset, num_agents, group_start, x.device)
    heads = torch.arange(p.heads, device=x.device)
    u = uniform_ref(seed, ids.unsqueeze(1), step, heads)                      # [rows, heads]
    m = logits.max(-1, keepdim=True).values
    ex = torch.exp(logits - m)
    s = ex.sum(-1)
    a = (torch.cumsum(ex, -1) < (u * s).unsqueeze(-1)).sum(-1)
    a = torch.minimum(a, p.nvec_t.to(torch.int64) - 1)
    action.copy_(a.view(E, n, p.heads))
    logp = logits.gather(-1, a.unsqueeze(-1)).squeeze(-1) - m.squeeze(-1) - torch.log(s)
    log_prob.copy_(logp.sum(-1).view(E, n))
    value.copy_(v.view(E, n))


if triton is not None:

    @triton.jit
    def _mix32(x):
        x = x ^ (x >> 16)
        x = x * 0x7FEB352D
        x = x ^ (x >> 15)
        x = x * tl.full((), 0x846CA68B, tl.uint32)
        return x ^ (x >> 16)

    @triton.jit
    def _activation(x, TANH: tl.constexpr):
        if TANH:
            t = tl.exp(-2.0 * tl.abs(x))
            y = (1.0 - t) / (1.0 + t)
            return tl.where(x < 0, -y, y)
        else:
            return tl.maximum(x, 0.0)

    @triton.jit
    def _mlp(h0, w0_ptr, wh_ptr, b_ptr, offs_i, offs_h, IP: tl.constexpr, HP: tl.constexpr,
             LAYERS: tl.constexpr, TANH: tl.constexpr):
        w0 = tl.load(w0_ptr + offs_i[:, None] * HP + offs_h[None, :])
        h = _activation(tl.dot(h0, w0, input_precision="ieee") + tl.load(b_ptr + offs_h)[None, :], TANH)
        for k in tl.static_range(LAYERS - 1):
            w = tl.load(wh_ptr + k * HP * HP + offs_h[:, None] * HP + offs_h[None, :])
            h = _activation(tl.dot(h, w, input_precision="ieee") + tl.load(b_ptr + (k + 1) * HP + offs_h)[None, :], TANH)
        return h

    @triton.jit
    def actor_fused_kernel(
        x_ptr, sx_e, sx_i, D, E, n,
        mean_ptr, rstd_ptr, a_w0, a_wh, a_b, a_wo, a_bo, c_w0, c_wh, c_b, c_wo, c_bo, nvec_ptr,
        step_ptr, seed_lo, seed_hi, env_offset, num_agents, group_start,
        act_ptr, sa_e, sa_i, lp_ptr, sl_e, sl_i, v_ptr, sv_e, sv_i,
        IP: tl.constexpr, HP: tl.constexpr, NP: tl.constexpr, HEADS: tl.constexpr, LAYERS: tl.constexpr,
        TANH: tl.constexpr, NORM_CLIP: tl.constexpr, BLOCK_B: tl.constexpr,
    ):
        pid = tl.program_id(0)
        rows = pid * BLOCK_B + tl.arange(0, BLOCK_B)
        live = rows < E * n
        e = rows // n
        i = rows % n
        offs_i = tl.arange(0, IP)
        offs_h = tl.arange(0, HP)
        offs_n = tl.arange(0, NP)
        x = tl.load(x_ptr + e[:, None] * sx_e + i[:, None] * sx_i + offs_i[None, :],
                    mask=live[:, None] & (offs_i[None, :] < D), other=0.0)
        h0 = (x - tl.load(mean_ptr + offs_i)[None, :]) * tl.load(rstd_ptr + offs_i)[None, :]
        if NORM_CLIP > 0:
            h0 = tl.minimum(tl.maximum(h0, -NORM_CLIP), NORM_CLIP)
        h0 = tl.where(offs_i[None, :] < D, h0, 0.0)
        ha = _mlp(h0, a_w0, a_wh, a_b, offs_i, offs_h, IP, HP, LAYERS, TANH)
        hc = _mlp(h0, c_w0, c_wh, c_b, offs_i, offs_h, IP, HP, LAYERS, TANH)

        step = tl.load(step_ptr).to(tl.uint32)
        gid = ((env_offset + e) * num_agents + group_start + i).to(tl.uint32)
        total_logp = tl.zeros((BLOCK_B,), dtype=tl.float32)
        for h in tl.static_range(HEADS):
            w = tl.load(a_wo + offs_h[:, None] * (HEADS * NP) + h * NP + offs_n[None, :])
            lg = tl.dot(ha, w, input_precision="ieee") + tl.load(a_bo + h * NP + offs_n)[None, :]
            m = tl.max(lg, axis=1)
            ex = tl.exp(lg - m[:, None])
            s = tl.sum(ex, axis=1)
            key = _mix32(step * 0x9E3779B9 + h)
            key = _mix32(gid ^ key)
            key = _mix32(key ^ seed_hi.to(tl.uint32))
            key = _mix32(key ^ seed_lo.to(tl.uint32))
            u = (key >> 8).to(tl.float32) * (1.0 / 16777216.0)
            below = tl.cumsum(ex, axis=1) < (u * s)[:, None]
            a = tl.minimum(tl.sum(below.to(tl.int32), axis=1), tl.load(nvec_ptr + h) - 1)
            chosen = tl.sum(tl.where(offs_n[None, :] == a[:, None], lg, 0.0), axis=1)
            total_logp += chosen - m - tl.log(s)
            tl.store(act_ptr + e * sa_e + i * sa_i + h, a.to(tl.int64), mask=live)
        tl.store(lp_ptr + e * sl_e + i * sl_i, total_logp, mask=live)
        v = tl.sum(hc * tl.load(c_wo + offs_h)[None, :], axis=1) + tl.load(c_bo)
        tl.store(v_ptr + e * sv_e + i * sv_i, v, mask=live)


def block_rows(packed: PackedPolicy) -> int:
    """Rows per program: 32 keeps the input tile (32 x IP floats) and weights within shared memory."""
    return 32 if packed.IP >= 128 else 64


def actor_step_triton(x, packed: PackedPolicy, step, seed, env_offset, num_agents, group_start, action,
                      log_prob, value) -> None:
    """The fused kernel; same arguments and effects as :func:`actor_step_ref`."""
    if triton is None:
        raise RuntimeError("the fused actor needs triton (pip install -e '.[triton]')")
    E, n, D = x.shape
    if x.stride(2) != 1 or action.stride(2) != 1:
        raise ValueError("x and action need a contiguous last dimension")
    p = packed
    BLOCK_B = block_rows(p)
    grid = (triton.cdiv(E * n, BLOCK_B),)
    seed_lo, seed_hi = seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF
    actor_fused_kernel[grid](
        x, x.stride(0), x.stride(1), D, E, n, *p.tensors(),
        step, seed_lo, seed_hi, env_offset, num_agents, group_start,
        action, action.stride(0), action.stride(1), log_prob, log_prob.stride(0), log_prob.stride(1),
        value, value.stride(0), value.stride(1),
        IP=p.IP, HP=p.HP, NP=p.NP, HEADS=p.heads, LAYERS=p.layers, TANH=p.activation == "tanh",
        NORM_CLIP=float(p.norm_clip or 0.0), BLOCK_B=BLOCK_B,
    )
