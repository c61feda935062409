"""The fused actor: observation rows in; action, summed log-prob and value out, in one Triton kernel.

For one agent group, each program of ``actor_fused_kernel`` takes BLOCK_B rows of observations and
runs: normalisation -> actor MLP -> every categorical head's logits -> inverse-CDF sample with the
counter RNG (keyed by seed, global agent id, step) -> log-prob; and the critic MLP -> value. It writes
action, log-prob and value straight into the rollout buffer at step t (any row strides), so a group's
act phase is one launch instead of dozens of small kernels.

Its reference is the one definition of acting, :meth:`gpurl.algos.nets.ActorCritic.act`, which does
the same arithmetic in torch (the tests hold the kernel to it, in Triton's interpreter). It reads the
static padded weights of :class:`~.packing.PackedPolicy`. ``step`` and the seed are read from device
tensors, so a CUDA graph replaying the launch sees the current step (a scalar argument would be frozen
at capture).
"""
from __future__ import annotations

from .packing import PackedPolicy

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - triton is a declared extra
    triton = None


if triton is not None:

    @triton.jit
    def _mix32(x):
        x = x ^ (x >> 16)
        x = x * 0x7FEB352D
        x = x ^ (x >> 15)
        x = x * tl.full((), 0x846CA68B, tl.uint32)
        return x ^ (x >> 16)

    @triton.jit
    def _rational_tanh(v):
        # gpurl.fusion.activations.rational_tanh, coefficient for coefficient.
        x = tl.minimum(tl.maximum(v, -7.90531110763549805), 7.90531110763549805)
        x2 = x * x
        p = x2 * -2.76076847742355e-16 + 2.00018790482477e-13
        p = x2 * p + -8.60467152213735e-11
        p = x2 * p + 5.12229709037114e-08
        p = x2 * p + 1.48572235717979e-05
        p = x2 * p + 6.37261928875436e-04
        p = x2 * p + 4.89352455891786e-03
        q = x2 * 1.19825839466702e-06 + 1.18534705686654e-04
        q = x2 * q + 2.26843463243900e-03
        q = x2 * q + 4.89352518554385e-03
        return tl.where(tl.abs(v) < 4e-4, v, x * p / q)

    @triton.jit
    def _activation(x, TANH: tl.constexpr):
        if TANH:
            return _rational_tanh(x)
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
        step_ptr, seed_ptr, env_offset, num_agents, group_start,
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
        seed_lo = tl.load(seed_ptr).to(tl.uint32)
        seed_hi = tl.load(seed_ptr + 1).to(tl.uint32)
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
            key = _mix32(key ^ seed_hi)
            key = _mix32(key ^ seed_lo)
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


def actor_step_triton(x, packed: PackedPolicy, step, seed, env_offset: int, num_agents: int, group_start: int,
                      action, log_prob, value) -> None:
    """The fused kernel. x float32 [E, n, in_dim]; step int64 [1]; seed int64 [2] (low, high halves);
    writes action int64 [E, n, heads], log_prob and value float32 [E, n] (views with any row strides).
    Row (e, i) is global agent (env_offset + e) * num_agents + group_start + i."""
    if triton is None:
        raise RuntimeError("the fused actor needs triton (pip install -e '.[triton]')")
    E, n, D = x.shape
    if x.stride(2) != 1 or action.stride(2) != 1:
        raise ValueError("x and action need a contiguous last dimension")
    p = packed
    BLOCK_B = block_rows(p)
    grid = (triton.cdiv(E * n, BLOCK_B),)
    actor_fused_kernel[grid](
        x, x.stride(0), x.stride(1), D, E, n, *p.tensors(),
        step, seed, env_offset, num_agents, group_start,
        action, action.stride(0), action.stride(1), log_prob, log_prob.stride(0), log_prob.stride(1),
        value, value.stride(0), value.stride(1),
        IP=p.IP, HP=p.HP, NP=p.NP, HEADS=p.heads, LAYERS=p.layers, TANH=p.activation == "tanh",
        NORM_CLIP=float(p.norm_clip or 0.0), BLOCK_B=BLOCK_B,
    )


__all__ = ["actor_fused_kernel", "actor_step_triton", "block_rows"]


#: The parameter types of :func:`actor_fused_kernel` other than its ``tl.constexpr`` ones, in order, for
#: compiling it ahead of time (:func:`gpurl.kernels.aot.compile_triton_sm90`: the compile tier, the GPU
#: readiness report).
ACTOR_SM90_SIGNATURE = {
    "x_ptr": "*fp32", "sx_e": "i32", "sx_i": "i32", "D": "i32", "E": "i32", "n": "i32",
    **{name: "*fp32" for name in ("mean_ptr", "rstd_ptr", "a_w0", "a_wh", "a_b", "a_wo", "a_bo",
                                  "c_w0", "c_wh", "c_b", "c_wo", "c_bo")},
    "nvec_ptr": "*i32", "step_ptr": "*i64", "seed_ptr": "*i64", "env_offset": "i32",
    "num_agents": "i32", "group_start": "i32",
    "act_ptr": "*i64", "sa_e": "i32", "sa_i": "i32", "lp_ptr": "*fp32", "sl_e": "i32", "sl_i": "i32",
    "v_ptr": "*fp32", "sv_e": "i32", "sv_i": "i32",
}
