"""The fused actor: observation rows in; action, summed log-prob and value out, in one Triton kernel.

For one agent group, each program of ``actor_fused_kernel`` takes BLOCK_B rows of observations and
runs: normalisation -> actor MLP -> every categorical head's logits -> inverse-CDF sample with the
counter RNG (keyed by seed, global agent id, step) -> log-prob; and the critic MLP -> value. It writes
action, log-prob and value straight into the rollout buffer at step t (any row strides), so a group's
act phase is one launch instead of dozens of small kernels.

Its reference is the one definition of acting, :meth:`gpurl.algos.nets.ActorCritic.act`, which does
the same arithmetic in torch (the tests hold the kernel to it, in Triton's interpreter). On the GPU its
dots are 3xTF32 tensor-core products, within 3x of fp32's own rounding (tests/
test_fusion_actor_precision.py emulates them, as the interpreter computes every dot in fp32). It reads
the static padded weights of :class:`~.packing.PackedPolicy`. Registers bound the design: on sm_90 no
preset's launch spills (the compile tier checks), from the first layer taken 16 inputs at a time, the
wider dots taken a quarter of the weights at a time, and the critic run after the heads. A policy
without a critic (``critic=False``: MAPPO's actor) is packed without one, and its launch compiles the
kernel without the critic (``WITH_VALUE`` false: no value computed, loaded or stored). ``step`` and
the seed are read from device tensors, so a CUDA graph replaying the launch sees the current step (a
scalar argument would be frozen at capture). The recurrent actor's step (``gpurl.fusion.gru_actor``)
shares the first layer, the dots and the heads' sampling defined here.
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

    #: Every dot of the actor: fp32 operands as three TF32 tensor-core products (the 3xTF32 split of
    #: each operand into a TF32 high part and a TF32 low part), close to fp32 rounding. "ieee" (plain
    #: fp32 on the FMA units) needs every operand tile in registers and spilled at every preset.
    DOT_PRECISION = tl.constexpr("tf32x3")

    @triton.jit
    def _program_rows(E, n, BLOCK_B: tl.constexpr):
        # This program's BLOCK_B rows of the group's E * n: (live, env e, agent i of the group).
        rows = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
        return rows < E * n, rows // n, rows % n

    @triton.jit
    def _first_layers(x_ptr, rows_off, live, D, mean_ptr, rstd_ptr, a_w0, c_w0, offs_h, IP: tl.constexpr,
                      HP: tl.constexpr, KC: tl.constexpr, NORM_CLIP: tl.constexpr, BLOCK_B: tl.constexpr,
                      WITH_VALUE: tl.constexpr):
        # The normalised input times the first layer of both MLPs, KC input columns at a time: the whole
        # [BLOCK_B, IP] tile and two [IP, HP] weight tiles would not fit in registers at IP = 256. Each
        # chunk of the input is read once and feeds both pre-activations [BLOCK_B, HP]. Without a value
        # (WITH_VALUE false: no critic, or the GRU actor) ``c_w0`` is never read and ``acc_c`` stays 0.
        acc_a = tl.zeros((BLOCK_B, HP), dtype=tl.float32)
        acc_c = tl.zeros((BLOCK_B, HP), dtype=tl.float32)
        for k0 in tl.range(0, IP, KC):
            offs_k = k0 + tl.arange(0, KC)
            inside = offs_k < D
            x = tl.load(x_ptr + rows_off[:, None] + offs_k[None, :], mask=live[:, None] & inside[None, :], other=0.0)
            h0 = (x - tl.load(mean_ptr + offs_k)[None, :]) * tl.load(rstd_ptr + offs_k)[None, :]
            if NORM_CLIP > 0:
                h0 = tl.minimum(tl.maximum(h0, -NORM_CLIP), NORM_CLIP)
            h0 = tl.where(inside[None, :], h0, 0.0)
            w_offs = offs_k[:, None] * HP + offs_h[None, :]
            acc_a = tl.dot(h0, tl.load(a_w0 + w_offs), acc_a, input_precision=DOT_PRECISION)
            if WITH_VALUE:
                acc_c = tl.dot(h0, tl.load(c_w0 + w_offs), acc_c, input_precision=DOT_PRECISION)
        return acc_a, acc_c

    @triton.jit
    def _times_rows(h, w_ptr, first, step, stride, offs_out, K: tl.constexpr, acc):
        # acc + h [BLOCK_B, K] @ W[first + step * j, offs_out] for j < K (rows of W with stride ``stride``).
        rows = first + step * tl.arange(0, K)
        return tl.dot(h, tl.load(w_ptr + rows[:, None] * stride + offs_out[None, :]), acc,
                      input_precision=DOT_PRECISION)

    @triton.jit
    def _matmul_into(acc, h, w_ptr, stride, offs_out, K: tl.constexpr, BLOCK_B: tl.constexpr):
        # acc + h [BLOCK_B, K] @ W[K, offs_out]. From K = 64 on, as four dots over the columns 4j + r of
        # h: Triton moves a dot's operands through registers, so only a quarter of W is there at a time.
        # (A dot needs K >= 16, hence one dot below 64.)
        if K < 64:
            acc = _times_rows(h, w_ptr, 0, 1, stride, offs_out, K, acc)
        else:
            h0, h1 = tl.split(tl.reshape(h, (BLOCK_B, K // 2, 2)))          # columns 2j, 2j + 1
            h00, h01 = tl.split(tl.reshape(h0, (BLOCK_B, K // 4, 2)))       # 4j, 4j + 2
            h10, h11 = tl.split(tl.reshape(h1, (BLOCK_B, K // 4, 2)))       # 4j + 1, 4j + 3
            acc = _times_rows(h00, w_ptr, 0, 4, stride, offs_out, K // 4, acc)
            acc = _times_rows(h10, w_ptr, 1, 4, stride, offs_out, K // 4, acc)
            acc = _times_rows(h01, w_ptr, 2, 4, stride, offs_out, K // 4, acc)
            acc = _times_rows(h11, w_ptr, 3, 4, stride, offs_out, K // 4, acc)
        return acc

    @triton.jit
    def _matmul(h, w_ptr, stride, offs_out, K: tl.constexpr, BLOCK_B: tl.constexpr):
        # h [BLOCK_B, K] @ W[K, offs_out] (rows of W with stride ``stride``).
        acc = tl.zeros((BLOCK_B, offs_out.shape[0]), dtype=tl.float32)
        return _matmul_into(acc, h, w_ptr, stride, offs_out, K, BLOCK_B)

    @triton.jit
    def _hidden_layers(acc, wh_ptr, b_ptr, offs_h, HP: tl.constexpr, LAYERS: tl.constexpr, TANH: tl.constexpr,
                       BLOCK_B: tl.constexpr):
        # acc: the first layer's pre-activation [BLOCK_B, HP]; returns the last hidden layer's output.
        h = _activation(acc + tl.load(b_ptr + offs_h)[None, :], TANH)
        for k in tl.static_range(LAYERS - 1):
            z = _matmul(h, wh_ptr + k * HP * HP, HP, offs_h, HP, BLOCK_B)
            h = _activation(z + tl.load(b_ptr + (k + 1) * HP + offs_h)[None, :], TANH)
        return h

    @triton.jit
    def _actor_only_rows(x_ptr, sx_e, sx_i, D, E, n, mean_ptr, rstd_ptr, w0, wh, b, IP: tl.constexpr,
                         HP: tl.constexpr, LAYERS: tl.constexpr, TANH: tl.constexpr, BLOCK_B: tl.constexpr,
                         KC: tl.constexpr):
        # A program's rows through the hidden layers of an MLP with no critic and no normaliser (the Q and Box
        # actors: mean 0, rstd 1, no clip; w0 stands in for the critic's first layer, never read). Returns the
        # rows' (live, e, i) and the last hidden layer [BLOCK_B, HP].
        live, e, i = _program_rows(E, n, BLOCK_B)
        offs_h = tl.arange(0, HP)
        acc, _ = _first_layers(x_ptr, e * sx_e + i * sx_i, live, D, mean_ptr, rstd_ptr, w0, w0, offs_h,
                               IP, HP, KC, 0.0, BLOCK_B, False)
        return live, e, i, _hidden_layers(acc, wh, b, offs_h, HP, LAYERS, TANH, BLOCK_B)

    @triton.jit
    def _counter_key(step_ptr, seed_ptr):
        # (step, seed_lo, seed_hi) as uint32: the counter RNG's key parts, read from device tensors.
        return (tl.load(step_ptr).to(tl.uint32), tl.load(seed_ptr).to(tl.uint32),
                tl.load(seed_ptr + 1).to(tl.uint32))

    @triton.jit
    def _uniform(step, head, gid, seed_lo, seed_hi):
        # gpurl.fusion.counter_rng.uniform_ref: u(seed, gid, step, head) in [0, 1), bit for bit.
        key = _mix32(step * 0x9E3779B9 + head)
        key = _mix32(gid ^ key)
        key = _mix32(key ^ seed_hi)
        key = _mix32(key ^ seed_lo)
        return (key >> 8).to(tl.float32) * (1.0 / 16777216.0)

    @triton.jit
    def _sample_heads(ha, a_wo, a_bo, nvec_ptr, step_ptr, seed_ptr, gid, act_rows, live, HP: tl.constexpr,
                      NP: tl.constexpr, HEADS: tl.constexpr, BLOCK_B: tl.constexpr):
        # Every categorical head of the last hidden layer ha [BLOCK_B, HP]: logits, the counter-RNG
        # uniform of (seed, gid, step, head), the inverse-CDF action (stored at act_rows + head, int64)
        # and the log-probs summed over heads [BLOCK_B] (returned), as Categoricals.sample does them.
        offs_n = tl.arange(0, NP)
        step, seed_lo, seed_hi = _counter_key(step_ptr, seed_ptr)
        total_logp = tl.zeros((BLOCK_B,), dtype=tl.float32)
        for h in tl.static_range(HEADS):
            lg = _matmul(ha, a_wo + h * NP, HEADS * NP, offs_n, HP, BLOCK_B) + tl.load(a_bo + h * NP + offs_n)[None, :]
            m = tl.max(lg, axis=1)
            ex = tl.exp(lg - m[:, None])
            s = tl.sum(ex, axis=1)
            u = _uniform(step, h, gid, seed_lo, seed_hi)
            below = tl.cumsum(ex, axis=1) < (u * s)[:, None]
            a = tl.minimum(tl.sum(below.to(tl.int32), axis=1), tl.load(nvec_ptr + h) - 1)
            chosen = tl.sum(tl.where(offs_n[None, :] == a[:, None], lg, 0.0), axis=1)
            total_logp += chosen - m - tl.log(s)
            tl.store(act_rows + h, a.to(tl.int64), mask=live)
        return total_logp

    @triton.jit
    def actor_fused_kernel(
        x_ptr, sx_e, sx_i, D, E, n,
        mean_ptr, rstd_ptr, a_w0, a_wh, a_b, a_wo, a_bo, c_w0, c_wh, c_b, c_wo, c_bo, nvec_ptr,
        step_ptr, seed_ptr, env_offset, num_agents, group_start,
        act_ptr, sa_e, sa_i, lp_ptr, sl_e, sl_i, v_ptr, sv_e, sv_i,
        IP: tl.constexpr, HP: tl.constexpr, NP: tl.constexpr, HEADS: tl.constexpr, LAYERS: tl.constexpr,
        TANH: tl.constexpr, NORM_CLIP: tl.constexpr, BLOCK_B: tl.constexpr, KC: tl.constexpr,
        WITH_VALUE: tl.constexpr,
    ):
        live, e, i = _program_rows(E, n, BLOCK_B)
        offs_h = tl.arange(0, HP)
        acc_a, acc_c = _first_layers(x_ptr, e * sx_e + i * sx_i, live, D, mean_ptr, rstd_ptr, a_w0, c_w0, offs_h,
                                     IP, HP, KC, NORM_CLIP, BLOCK_B, WITH_VALUE)
        ha = _hidden_layers(acc_a, a_wh, a_b, offs_h, HP, LAYERS, TANH, BLOCK_B)
        gid = ((env_offset + e) * num_agents + group_start + i).to(tl.uint32)
        total_logp = _sample_heads(ha, a_wo, a_bo, nvec_ptr, step_ptr, seed_ptr, gid, act_ptr + e * sa_e + i * sa_i,
                                   live, HP, NP, HEADS, BLOCK_B)
        tl.store(lp_ptr + e * sl_e + i * sl_i, total_logp, mask=live)
        if WITH_VALUE:
            # The critic after the heads: the actor's hidden tiles are dead by then, so the two MLPs
            # never hold theirs in registers at the same time.
            hc = _hidden_layers(acc_c, c_wh, c_b, offs_h, HP, LAYERS, TANH, BLOCK_B)
            v = tl.sum(hc * tl.load(c_wo + offs_h)[None, :], axis=1) + tl.load(c_bo)
            tl.store(v_ptr + e * sv_e + i * sv_i, v, mask=live)


#: Input columns per chunk of the first layer (the smallest padded input, next_pow2's floor).
K_CHUNK = 16


def block_rows(packed: PackedPolicy) -> int:
    """Rows per program: 64 up to 64 hidden units; 16 above, where a 64-row tile spills on sm_90."""
    return 64 if packed.HP <= 64 else 16


def launch_warps(packed: PackedPolicy) -> int:
    """Warps per program: 4 up to 64 hidden units; 8 above (fewer registers per thread)."""
    return 4 if packed.HP <= 64 else 8


def actor_constexprs(packed: PackedPolicy, with_value: bool | None = None) -> dict:
    """The ``tl.constexpr`` arguments of :func:`actor_fused_kernel` for ``packed`` (the launch, and the
    ahead-of-time compiles of the compile tier and the readiness report). ``with_value``: compute the
    value (default: when ``packed`` has a critic)."""
    p = packed
    with_value = p.with_value if with_value is None else with_value
    return dict(IP=p.IP, HP=p.HP, NP=p.NP, HEADS=p.heads, LAYERS=p.layers, TANH=p.activation == "tanh",
                NORM_CLIP=float(p.norm_clip or 0.0), BLOCK_B=block_rows(p), KC=min(K_CHUNK, p.IP),
                WITH_VALUE=bool(with_value))


def actor_step_triton(x, packed: PackedPolicy, step, seed, env_offset: int, num_agents: int, group_start: int,
                      action, log_prob, value=None) -> None:
    """The fused kernel. x float32 [E, n, in_dim]; step int64 [1]; seed int64 [2] (low, high halves);
    writes action int64 [E, n, heads], log_prob and value float32 [E, n] (views with any row strides).
    Row (e, i) is global agent (env_offset + e) * num_agents + group_start + i. ``value`` None: no
    value (the kernel skips the critic; a policy without one must be called so)."""
    if triton is None:
        raise RuntimeError("the fused actor needs triton (pip install -e '.[triton]')")
    E, n, D = x.shape
    if x.stride(2) != 1 or action.stride(2) != 1:
        raise ValueError("x and action need a contiguous last dimension")
    p = packed
    if value is not None and not p.with_value:
        raise ValueError("this policy has no critic: pass value=None")
    # Without a value the kernel never stores through v_ptr: log_prob stands in for the pointer.
    v = log_prob if value is None else value
    grid = (triton.cdiv(E * n, block_rows(p)),)
    actor_fused_kernel[grid](
        x, x.stride(0), x.stride(1), D, E, n, *p.tensors(),
        step, seed, env_offset, num_agents, group_start,
        action, action.stride(0), action.stride(1), log_prob, log_prob.stride(0), log_prob.stride(1),
        v, v.stride(0), v.stride(1),
        num_warps=launch_warps(p), **actor_constexprs(p, value is not None),
    )


__all__ = ["K_CHUNK", "actor_constexprs", "actor_fused_kernel", "actor_sm90_signature", "actor_step_triton",
           "block_rows", "launch_warps"]


def actor_sm90_signature(weights: tuple[str, ...], own: dict[str, str], action: str,
                         after: dict[str, str] | None = None) -> dict[str, str]:
    """The parameter types of a fused actor kernel other than its ``tl.constexpr`` ones, in the order every one of
    them takes: the input rows (pointer, strides, D, E, n), the normaliser's and the ``weights``' float32
    pointers, the kernel's ``own`` (action sizes, recurrent state, step, seed, noise), the group's place (env
    offset, agents, first agent), the actions (pointer type ``action``, strides), then ``after``. For compiling
    it ahead of time (:func:`gpurl.kernels.aot.compile_triton_sm90`: the compile tier, the GPU readiness
    report)."""
    return {"x_ptr": "*fp32", "sx_e": "i32", "sx_i": "i32", "D": "i32", "E": "i32", "n": "i32",
            **{name: "*fp32" for name in ("mean_ptr", "rstd_ptr", *weights)}, **own,
            "env_offset": "i32", "num_agents": "i32", "group_start": "i32",
            "act_ptr": action, "sa_e": "i32", "sa_i": "i32", **(after or {})}


#: :func:`actor_fused_kernel`'s signature (:func:`actor_sm90_signature`)
ACTOR_SM90_SIGNATURE = actor_sm90_signature(
    ("a_w0", "a_wh", "a_b", "a_wo", "a_bo", "c_w0", "c_wh", "c_b", "c_wo", "c_bo"),
    {"nvec_ptr": "*i32", "step_ptr": "*i64", "seed_ptr": "*i64"}, "*i64",
    {"lp_ptr": "*fp32", "sl_e": "i32", "sl_i": "i32", "v_ptr": "*fp32", "sv_e": "i32", "sv_i": "i32"})
