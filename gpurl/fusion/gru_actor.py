"""The fused recurrent actor: one acting step of a GRU policy (observation and carried state in; action,
summed log-prob and the next state out) in one Triton kernel.

For one agent group, each program of ``gru_actor_fused_kernel`` takes BLOCK_B rows (e, i) and runs:
normalisation -> first layer -> the GRU cell on the state carried in (zeroed where ``starts[e]``:
this observation begins an episode) -> the rest of the MLP -> every categorical head's logits ->
inverse-CDF sample with the counter RNG -> log-prob. It reads the state from one slot of the rollout
storage (``hidden[t]``) and writes the new one into another (``hidden[t + 1]``), both with any row
strides, so the acting step of a recurrent group stays one launch. It computes no value: a recurrent
PPO's critic is a feed-forward MLP the caller runs in a separate pass (MAPPO's reads the global state).

Its reference is the one definition of acting, :meth:`gpurl.algos.nets.ActorCritic.act` with
``recurrent=True`` (:meth:`gpurl.algos.gru.RecurrentActor.step`, :func:`gpurl.algos.gru.gru_cell`),
which the tests hold it to in Triton's interpreter. It reuses the feed-forward actor's pieces
(:mod:`gpurl.fusion.actor`): the K-chunked first layer, the quartered dots (3xTF32 on the GPU), the
rational tanh and the heads' sampling, and reads the static padded weights of
:class:`~.packing.PackedRecurrentPolicy`. Registers bound the design (the compile tier checks that
no preset-shaped launch spills on sm_90): the cell is computed transposed, units by rows, so each
gate's weights are the first operand of its dot and the input side and the state the second, which
the sm_90 tensor cores read from shared memory; written rows-first, the six dots kept both operands'
3xTF32 splits in registers and spilled at every preset. Gates run one at a time (r, then the
candidate with r * (h W_hn + b_hn) folded into its accumulator, then z), in blocks of 64 units, on 16
rows per program. ``step`` and the seed are read from device tensors (CUDA-graph safe).
"""
from __future__ import annotations

from torch import nn

from .actor import K_CHUNK, actor_sm90_signature
from .packing import PackedRecurrentPolicy, next_pow2

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - triton is a declared extra
    triton = None


if triton is not None:
    from .actor import (DOT_PRECISION, _activation, _first_layers, _matmul, _program_rows, _rational_tanh,
                        _sample_heads)

    @triton.jit
    def _sigmoid(x):
        # torch.sigmoid's 1 / (1 + e^-x). The exponent is held below 80 (e^80 ~ 5.5e34) so that it never
        # overflows: below x = -80 the result is 1.8e-35 instead of smaller, which nothing can see.
        return 1.0 / (1.0 + tl.exp(tl.minimum(-x, 80.0)))

    @triton.jit
    def _gate_dot(w_ptr, gate: tl.constexpr, offs_u, v_t, HP: tl.constexpr, acc):
        # acc [HB, BLOCK_B] + W[gate][offs_u, :] @ v_t [HP, BLOCK_B]: the gate's pre-activation of units
        # offs_u, transposed. W is [3 * HP, HP] (PyTorch's [out, in]), so the weights are the dot's first
        # operand and the activations its second, which sm_90 reads from shared memory: the input side
        # and the state feed all six dots without holding their TF32 splits in registers.
        offs_k = tl.arange(0, HP)
        w = tl.load(w_ptr + (gate * HP + offs_u)[:, None] * HP + offs_k[None, :])
        return tl.dot(w, v_t, acc, input_precision=DOT_PRECISION)

    @triton.jit
    def _bias(b_ptr, gate: tl.constexpr, offs_u, HP: tl.constexpr):
        return tl.load(b_ptr + gate * HP + offs_u)[:, None]

    @triton.jit
    def _gru_units(xe_t, h_t, h_rows, carried, wx, bx, wh, bh, H, first: tl.constexpr, HB: tl.constexpr,
                   HP: tl.constexpr, BLOCK_B: tl.constexpr):
        # gru_cell for the units first .. first + HB of every row, transposed [HB, BLOCK_B]. One gate at a
        # time, r * (h W_hn + b_hn) folded into the accumulator of the candidate's input side, so at most
        # two [HB, BLOCK_B] tiles live beside the dot in flight.
        offs_u = first + tl.arange(0, HB)
        zero = tl.zeros((HB, BLOCK_B), dtype=tl.float32)
        r = _sigmoid(_gate_dot(wh, 0, offs_u, h_t, HP, _gate_dot(wx, 0, offs_u, xe_t, HP, zero)
                                                          + _bias(bx, 0, offs_u, HP)) + _bias(bh, 0, offs_u, HP))
        rh = r * (_gate_dot(wh, 2, offs_u, h_t, HP, zero) + _bias(bh, 2, offs_u, HP))
        cand = _rational_tanh(_gate_dot(wx, 2, offs_u, xe_t, HP, rh + _bias(bx, 2, offs_u, HP)))
        z = _sigmoid(_gate_dot(wh, 1, offs_u, h_t, HP, _gate_dot(wx, 1, offs_u, xe_t, HP, zero)
                                                          + _bias(bx, 1, offs_u, HP)) + _bias(bh, 1, offs_u, HP))
        # This block's own units of the state: read again (a cached re-read) rather than sliced out of h_t.
        h = tl.load(h_rows[None, :] + offs_u[:, None], mask=carried[None, :] & (offs_u < H)[:, None], other=0.0)
        return cand + z * (h - cand)

    @triton.jit
    def _stack(a, b):
        # [HB, N] on top of [HB, N] -> [2 * HB, N].
        return tl.reshape(tl.permute(tl.join(a, b), (2, 0, 1)), (2 * a.shape[0], a.shape[1]))

    @triton.jit
    def gru_actor_fused_kernel(
        x_ptr, sx_e, sx_i, D, E, n,
        mean_ptr, rstd_ptr, w0, b0, wx, bx, wh, bh, a_wh, a_b, a_wo, a_bo, nvec_ptr,
        h_ptr, sh_e, sh_i, start_ptr, ss_e, ho_ptr, so_e, so_i, H,
        step_ptr, seed_ptr, env_offset, num_agents, group_start,
        act_ptr, sa_e, sa_i, lp_ptr, sl_e, sl_i,
        IP: tl.constexpr, HP: tl.constexpr, NP: tl.constexpr, HEADS: tl.constexpr, LAYERS: tl.constexpr,
        TANH: tl.constexpr, NORM_CLIP: tl.constexpr, BLOCK_B: tl.constexpr, KC: tl.constexpr,
    ):
        live, e, i = _program_rows(E, n, BLOCK_B)
        offs_h = tl.arange(0, HP)
        acc, _ = _first_layers(x_ptr, e * sx_e + i * sx_i, live, D, mean_ptr, rstd_ptr, w0, w0, offs_h,
                               IP, HP, KC, NORM_CLIP, BLOCK_B, False)
        xe_t = tl.trans(_activation(acc + tl.load(b0 + offs_h)[None, :], TANH))
        # The state carried in [HP, BLOCK_B], zeroed where the observation starts an episode (a masked
        # load: that row's old state is never read); padded units load as 0 and stay 0.
        carried = live & (tl.load(start_ptr + e * ss_e, mask=live, other=1) == 0)
        h_rows = h_ptr + e * sh_e + i * sh_i
        h_t = tl.load(h_rows[None, :] + offs_h[:, None], mask=carried[None, :] & (offs_h < H)[:, None], other=0.0)
        # The cell in blocks of 64 units (wgmma's rows): a [64, HP] weight tile at a time in registers.
        if HP <= 64:
            h_t = _gru_units(xe_t, h_t, h_rows, carried, wx, bx, wh, bh, H, 0, HP, HP, BLOCK_B)
        else:
            h_t = _stack(_gru_units(xe_t, h_t, h_rows, carried, wx, bx, wh, bh, H, 0, HP // 2, HP, BLOCK_B),
                         _gru_units(xe_t, h_t, h_rows, carried, wx, bx, wh, bh, H, HP // 2, HP // 2, HP, BLOCK_B))
        tl.store(ho_ptr + (e * so_e + i * so_i)[None, :] + offs_h[:, None], h_t,
                 mask=live[None, :] & (offs_h < H)[:, None])
        # The rest of the MLP (LAYERS = len(widths) - 1 layers after the GRU, whose output is not
        # activated again), then the heads, rows first as in the feed-forward actor.
        h = tl.trans(h_t)
        for k in tl.static_range(LAYERS):
            h = _activation(_matmul(h, a_wh + k * HP * HP, HP, offs_h, HP, BLOCK_B)
                            + tl.load(a_b + k * HP + offs_h)[None, :], TANH)
        gid = ((env_offset + e) * num_agents + group_start + i).to(tl.uint32)
        total_logp = _sample_heads(h, a_wo, a_bo, nvec_ptr, step_ptr, seed_ptr, gid, act_ptr + e * sa_e + i * sa_i,
                                   live, HP, NP, HEADS, BLOCK_B)
        tl.store(lp_ptr + e * sl_e + i * sl_i, total_logp, mask=live)


#: The widest (padded) layer the kernel takes: the cell runs in one or two blocks of 64 units.
MAX_HP = 128


def gru_kernel_fits(policy) -> bool:
    """Whether the fused GRU step takes ``policy`` (an ``ActorCritic(recurrent=True)``): categorical
    heads and no layer wider than :data:`MAX_HP` once padded."""
    if not hasattr(policy.dist, "nvec"):
        return False
    actor = policy.actor
    widths = [m.out_features for m in actor.embed if isinstance(m, nn.Linear)]
    widths += [m.out_features for m in actor.head if isinstance(m, nn.Linear)][:-1]
    return next_pow2(max(widths)) <= MAX_HP


def gru_block_rows(packed: PackedRecurrentPolicy) -> int:
    """Rows per program: 16. (On sm_90 the 64-wide step sits at the 255-register ceiling at 32 rows and
    spills at 64, whatever the warps; the rows are the dots' N, so fewer rows cost no tensor-core
    shape, only more reads of the weights, which L2 serves.)"""
    return 16


def gru_launch_warps(packed: PackedRecurrentPolicy) -> int:
    """Warps per program: 4 (one warpgroup: each 64-unit block of a gate is one wgmma's rows). 8 warps
    spill more at 128 units, where 4 spill a few hundred bytes too (no preset is that wide)."""
    return 4


def gru_actor_constexprs(packed: PackedRecurrentPolicy) -> dict:
    """The ``tl.constexpr`` arguments of :func:`gru_actor_fused_kernel` for ``packed`` (the launch and the
    ahead-of-time compiles)."""
    p = packed
    if p.HP > MAX_HP:
        raise ValueError(f"the fused GRU actor takes widths up to {MAX_HP}, got {p.HP} (padded)")
    return dict(IP=p.IP, HP=p.HP, NP=p.NP, HEADS=p.heads, LAYERS=p.head_layers, TANH=p.activation == "tanh",
                NORM_CLIP=float(p.norm_clip or 0.0), BLOCK_B=gru_block_rows(p), KC=min(K_CHUNK, p.IP))


def gru_actor_step_triton(x, packed: PackedRecurrentPolicy, hidden_in, starts, step, seed, env_offset: int,
                          num_agents: int, group_start: int, action, log_prob, hidden_out) -> None:
    """The fused recurrent step. x float32 [E, n, in_dim]; hidden_in float32 [E, n, H] (the state carried
    in); starts bool (or uint8) [E] (row e's observation starts an episode: its state is zeroed first);
    step int64 [1]; seed int64 [2] (low, high halves). Writes action int64 [E, n, heads], log_prob
    float32 [E, n] and hidden_out float32 [E, n, H] (another tensor than hidden_in: the next slot of
    the storage). Every tensor may be a view with any strides but a contiguous last dimension. Row
    (e, i) is global agent (env_offset + e) * num_agents + group_start + i."""
    if triton is None:
        raise RuntimeError("the fused actor needs triton (pip install -e '.[triton]')")
    E, n, D = x.shape
    H = packed.hidden_size
    if hidden_in.shape != (E, n, H) or hidden_out.shape != (E, n, H):
        raise ValueError(f"hidden_in and hidden_out must be [E, n, H] = {[E, n, H]}, got "
                         f"{list(hidden_in.shape)} and {list(hidden_out.shape)}")
    if starts.shape != (E,):
        raise ValueError(f"starts must be [E] = [{E}], got {list(starts.shape)}")
    if any(t.stride(2) != 1 for t in (x, action, hidden_in, hidden_out)):
        raise ValueError("x, action, hidden_in and hidden_out need a contiguous last dimension")
    p = packed
    grid = (triton.cdiv(E * n, gru_block_rows(p)),)
    gru_actor_fused_kernel[grid](
        x, x.stride(0), x.stride(1), D, E, n, *p.tensors(),
        hidden_in, hidden_in.stride(0), hidden_in.stride(1), starts, starts.stride(0),
        hidden_out, hidden_out.stride(0), hidden_out.stride(1), H,
        step, seed, env_offset, num_agents, group_start,
        action, action.stride(0), action.stride(1), log_prob, log_prob.stride(0), log_prob.stride(1),
        num_warps=gru_launch_warps(p), **gru_actor_constexprs(p),
    )


__all__ = ["GRU_ACTOR_SM90_SIGNATURE", "MAX_HP", "gru_actor_constexprs", "gru_actor_fused_kernel",
           "gru_actor_step_triton", "gru_block_rows", "gru_kernel_fits", "gru_launch_warps"]


#: :func:`gru_actor_fused_kernel`'s signature (:func:`~.actor.actor_sm90_signature`). ``starts`` is the
#: storage's bool flags.
GRU_ACTOR_SM90_SIGNATURE = actor_sm90_signature(
    ("w0", "b0", "wx", "bx", "wh", "bh", "a_wh", "a_b", "a_wo", "a_bo"),
    {"nvec_ptr": "*i32", "h_ptr": "*fp32", "sh_e": "i32", "sh_i": "i32", "start_ptr": "*i1", "ss_e": "i32",
     "ho_ptr": "*fp32", "so_e": "i32", "so_i": "i32", "H": "i32", "step_ptr": "*i64", "seed_ptr": "*i64"},
    "*i64", {"lp_ptr": "*fp32", "sl_e": "i32", "sl_i": "i32"})
