"""The fused actor of the off-policy Box-action algorithms: observation rows in, actions out, one kernel.

For one agent group, each program of ``box_actor_fused_kernel`` takes BLOCK_B rows of observations and
runs the policy MLP, then one of the two Box policies (the constexpr ``SQUASHED``):
- deterministic (MADDPG, IDDPG, MATD3): ``low + (tanh(y) + 1) half_range`` of the A outputs y, plus
  ``std half_range`` times a standard normal per dimension, clipped to the Box;
- squashed Gaussian (MASAC, ISAC): outputs [mean (A), raw (A)], ``log_std = LOG_STD_MIN + (tanh(raw) + 1)
  (LOG_STD_MAX - LOG_STD_MIN) / 2``, ``u = mean + exp(log_std)`` times a standard normal, the action
  ``low + (tanh(u) + 1) half_range``;
and writes the float32 actions straight into the rollout buffer at step t (any row strides). Without
``NOISE`` (a deterministic evaluation, or exploration std 0) no normal is drawn: the policy's own action
(the mean's squash). A group's act phase is one launch.

Its references are the one definition of each policy's acting, :meth:`gpurl.algos.box_nets.DeterministicActor.act`
and :meth:`gpurl.algos.box_nets.SquashedGaussianActor.act` (the tests hold the kernel to both in Triton's
interpreter). The normal of dimension d is Box-Muller of the counter RNG's heads 2d (the radius) and 2d + 1
(the angle), keyed by seed, global agent id and step, as :func:`gpurl.algos.distributions.standard_normal`
of ``uniform_ref(seed, agent, step, arange(2 A))``; its cosine is a float32 polynomial on the exactly reduced
angle (libdevice's ``cosf`` brings a float64 reduction of huge arguments into the PTX). ``tanh(v) + 1`` is
evaluated as ``2 / (1 + exp(-2 v))`` (the same function; written with ``exp(-2 |v|)``, it never overflows and
saturates to exactly 0 and 2, so the action never leaves the Box). The network's layers, dots and counter
RNG are the PPO actor's (:mod:`gpurl.fusion.actor`), so are its precision (3xTF32 dots on the GPU) and launch
geometry; the padded weights are a :class:`~.packing.PackedPolicy` of one head of A outputs (two for the
squashed Gaussian: mean and raw log-std, each padded to NP). The step, the seed and the noise std are read from device
tensors: a CUDA graph replaying the launch sees the current values (scalar arguments would be frozen at
capture).
"""
from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import nn

from .actor import K_CHUNK, actor_sm90_signature, block_rows, launch_warps, triton
from .packing import PackedPolicy

#: The bounds of the squashed Gaussian's log-std, ``LOG_STD_MIN + (tanh(raw) + 1) (LOG_STD_MAX - LOG_STD_MIN) / 2``
#: (smooth, as CleanRL's SAC): defined here, below the algorithms, for the kernel and for
#: ``gpurl.algos.box_nets.SquashedGaussianActor`` alike.
LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0

if triton is not None:
    import triton.language as tl

    from .actor import _actor_only_rows, _counter_key, _matmul, _uniform

    _LOG_STD_MIN, _LOG_STD_SPAN = tl.constexpr(LOG_STD_MIN), tl.constexpr(LOG_STD_MAX - LOG_STD_MIN)

    @triton.jit
    def _tanh_plus_one(v):
        # tanh(v) + 1 = 2 / (1 + exp(-2 v)), with t = exp(-2 |v|) in (0, 1]: no overflow, 0 and 2 exactly
        # where tanh rounds to -1 and 1.
        t = tl.exp(-2.0 * tl.abs(v))
        return tl.where(v >= 0, 2.0, 2.0 * t) / (1.0 + t)

    @triton.jit
    def _cos_two_pi(u):
        # cos(2 pi u) for u in [0, 1) in float32 alone (libdevice's cosf reduces huge arguments in float64): the
        # angle reduced exactly on u (1 - u and 0.5 - a are exact), then cos's Taylor polynomial through x^12 on
        # [0, pi / 2] (truncation below 7e-9).
        a = tl.where(u > 0.5, 1.0 - u, u)               # cos(2 pi u) = cos(2 pi a), a in [0, 0.5]
        flip = a > 0.25
        x = tl.where(flip, 0.5 - a, a) * 6.283185307179586   # cos(2 pi a) = -cos(2 pi (0.5 - a))
        x2 = x * x
        c = x2 * 2.08767569878681e-09 + -2.75573192239859e-07
        c = x2 * c + 2.48015873015873e-05
        c = x2 * c + -1.38888888888889e-03
        c = x2 * c + 4.16666666666667e-02
        c = x2 * c + -0.5
        c = x2 * c + 1.0
        return tl.where(flip, -c, c)

    @triton.jit
    def _standard_normals(step, gid, offs_d, seed_lo, seed_hi):
        # gpurl.algos.distributions.standard_normal of the counter RNG's uniforms: [BLOCK_B, len(offs_d)], the
        # normal of dimension d from heads 2d (radius) and 2d + 1 (angle) of row gid. 1 - u is exact in
        # float32 (u has 24 bits), so log(1 - u) is torch's log1p(-u).
        radius_head = (2 * offs_d).to(tl.uint32)[None, :]
        u_radius = _uniform(step, radius_head, gid[:, None], seed_lo, seed_hi)
        u_angle = _uniform(step, radius_head + 1, gid[:, None], seed_lo, seed_hi)
        return tl.sqrt(-2.0 * tl.log(1.0 - u_radius)) * _cos_two_pi(u_angle)

    @triton.jit
    def box_actor_fused_kernel(
        x_ptr, sx_e, sx_i, D, E, n,
        mean_ptr, rstd_ptr, w0, wh, b, wo, bo, low_ptr, half_ptr, A,
        step_ptr, seed_ptr, std_ptr, env_offset, num_agents, group_start,
        act_ptr, sa_e, sa_i,
        IP: tl.constexpr, HP: tl.constexpr, NP: tl.constexpr, LAYERS: tl.constexpr, TANH: tl.constexpr,
        SQUASHED: tl.constexpr, NOISE: tl.constexpr, BLOCK_B: tl.constexpr, KC: tl.constexpr,
    ):
        live, e, i, h = _actor_only_rows(x_ptr, sx_e, sx_i, D, E, n, mean_ptr, rstd_ptr, w0, wh, b, IP, HP, LAYERS,
                                         TANH, BLOCK_B, KC)
        offs_d = tl.arange(0, NP)
        inside = offs_d < A
        low = tl.load(low_ptr + offs_d, mask=inside, other=0.0)[None, :]
        half = tl.load(half_ptr + offs_d, mask=inside, other=0.0)[None, :]
        # The first head: the deterministic actor's A outputs, or the Gaussian's mean (a row of wo holds
        # HEADS * NP columns: NP, or 2 NP with the raw log-std's head after the mean's).
        heads_width = 2 * NP if SQUASHED else NP
        y = _matmul(h, wo, heads_width, offs_d, HP, BLOCK_B) + tl.load(bo + offs_d)[None, :]
        if NOISE:
            if SQUASHED:
                # The raw log-std's head before the draw: the hidden layer's tile is dead during the hashing.
                raw = _matmul(h, wo + NP, heads_width, offs_d, HP, BLOCK_B) + tl.load(bo + NP + offs_d)[None, :]
                spread = tl.exp(_tanh_plus_one(raw) * (0.5 * _LOG_STD_SPAN) + _LOG_STD_MIN)   # exp(log_std)
            step, seed_lo, seed_hi = _counter_key(step_ptr, seed_ptr)
            gid = ((env_offset + e) * num_agents + group_start + i).to(tl.uint32)
            noise = _standard_normals(step, gid, offs_d, seed_lo, seed_hi)
            if SQUASHED:
                action = low + _tanh_plus_one(y + spread * noise) * half
            else:
                action = low + _tanh_plus_one(y) * half + tl.load(std_ptr) * half * noise
                action = tl.minimum(tl.maximum(action, low), low + 2.0 * half)
        else:
            action = low + _tanh_plus_one(y) * half
        rows = e * sa_e + i * sa_i
        tl.store(act_ptr + rows[:, None] + offs_d[None, :], action, mask=live[:, None] & inside[None, :])


def pack_box_policy(net: nn.Sequential, action_dims: int, outputs_per_dim: int, activation: str) -> PackedPolicy:
    """The padded weights of a Box policy's MLP (``net``: in_dim -> widths -> outputs_per_dim * action_dims
    linear layers) that the kernel reads: a :class:`PackedPolicy` of ``outputs_per_dim`` heads of
    ``action_dims`` outputs each (1: the deterministic actor; 2: the squashed Gaussian's mean, then its raw
    log-std), no normaliser, no critic. ``sync()`` after every update, as for the PPO actor."""
    if outputs_per_dim not in (1, 2):
        raise ValueError(f"outputs_per_dim is 1 (deterministic actor) or 2 (squashed Gaussian), got {outputs_per_dim}")
    out_features = [m for m in net if isinstance(m, nn.Linear)][-1].out_features
    if out_features != outputs_per_dim * action_dims:
        raise ValueError(f"the MLP has {out_features} outputs, expected outputs_per_dim * action_dims = "
                         f"{outputs_per_dim} * {action_dims}")
    view = SimpleNamespace(actor=net, critic=None, obs_norm=nn.Identity(), recurrent=False,
                           dist=SimpleNamespace(nvec=[action_dims] * outputs_per_dim))
    packed = PackedPolicy(view, activation)
    # Padded outputs: 0 rather than the categorical padding's -1e30 (never stored; finite arithmetic).
    packed.a_bo.view(outputs_per_dim, packed.NP)[:, action_dims:].zero_()
    return packed


def _is_box_packing(packed: PackedPolicy) -> bool:
    return packed.heads in (1, 2) and not packed.with_value and len(set(packed.nvec)) == 1


def box_actor_constexprs(packed: PackedPolicy, noise: bool = True) -> dict:
    """The ``tl.constexpr`` arguments of :func:`box_actor_fused_kernel` for ``packed`` (the launch and the
    ahead-of-time compile of the compile tier). ``noise``: draw the normals (exploration noise, or the
    Gaussian's sample); without, the policy's own action."""
    p = packed
    return dict(IP=p.IP, HP=p.HP, NP=p.NP, LAYERS=p.layers, TANH=p.activation == "tanh", SQUASHED=p.heads == 2,
                NOISE=bool(noise), BLOCK_B=block_rows(p), KC=min(K_CHUNK, p.IP))


def _check_tensor(name: str, t: torch.Tensor, dtype: torch.dtype, numel: int, what: str) -> None:
    if t.dtype != dtype or t.numel() != numel:
        raise ValueError(f"{name} must be a {dtype} tensor of {numel} element(s) ({what}), got {t.dtype} "
                         f"{tuple(t.shape)}")


def box_actor_step_triton(x: torch.Tensor, packed: PackedPolicy, low: torch.Tensor, half_range: torch.Tensor,
                          step: torch.Tensor, seed: torch.Tensor, std: torch.Tensor, env_offset: int,
                          num_agents: int, group_start: int, action: torch.Tensor, noise: bool = True) -> None:
    """The fused kernel. x float32 [E, n, in_dim]; ``packed`` from :func:`pack_box_policy`; low, half_range
    float32 [A] (the Box); step int64 [1]; seed int64 [2] (low, high halves); std float32 [1] (the
    deterministic actor's noise scale in half ranges; read only there); writes action float32 [E, n, A] (a
    view with any row strides, a contiguous last dimension). Row (e, i) is global agent (env_offset + e) *
    num_agents + group_start + i. ``noise`` False: the policy's action without noise (no draw)."""
    if triton is None:
        raise RuntimeError("the fused actor needs triton (pip install -e '.[triton]')")
    if not _is_box_packing(packed):
        raise ValueError("box_actor_step_triton takes a packed Box policy (pack_box_policy)")
    p, A = packed, packed.nvec[0]
    if x.dim() != 3 or x.dtype != torch.float32:
        raise ValueError(f"x must be float32 [E, n, in_dim], got {x.dtype} {tuple(x.shape)}")
    E, n, D = x.shape
    if D != p.in_dim:
        raise ValueError(f"x has {D} inputs per row, the policy takes {p.in_dim}")
    if x.stride(2) != 1:
        raise ValueError("x needs a contiguous last dimension")
    if action.dtype != torch.float32:
        raise ValueError(f"action must be float32 (a Box action per agent), got {action.dtype}")
    if tuple(action.shape) != (E, n, A):
        raise ValueError(f"action must be [E, n, A] = {(E, n, A)}, got {tuple(action.shape)}")
    if action.stride(2) != 1:
        raise ValueError("action needs a contiguous last dimension")
    _check_tensor("low", low, torch.float32, A, "the Box's lower bounds")
    _check_tensor("half_range", half_range, torch.float32, A, "the Box's half ranges")
    _check_tensor("step", step, torch.int64, 1, "the global step")
    _check_tensor("seed", seed, torch.int64, 2, "the seed's low and high halves")
    _check_tensor("std", std, torch.float32, 1, "the exploration noise's std")
    grid = (triton.cdiv(E * n, block_rows(p)),)
    box_actor_fused_kernel[grid](
        x, x.stride(0), x.stride(1), D, E, n,
        p.norm_mean, p.norm_rstd, p.a_w0, p.a_wh, p.a_b, p.a_wo, p.a_bo, low, half_range, A,
        step, seed, std, env_offset, num_agents, group_start,
        action, action.stride(0), action.stride(1),
        num_warps=launch_warps(p), **box_actor_constexprs(p, noise),
    )


#: :func:`box_actor_fused_kernel`'s signature (:func:`~.actor.actor_sm90_signature`)
BOX_ACTOR_SM90_SIGNATURE = actor_sm90_signature(
    ("w0", "wh", "b", "wo", "bo", "low_ptr", "half_ptr"),
    {"A": "i32", "step_ptr": "*i64", "seed_ptr": "*i64", "std_ptr": "*fp32"}, "*fp32")

__all__ = ["BOX_ACTOR_SM90_SIGNATURE", "LOG_STD_MAX", "LOG_STD_MIN", "box_actor_constexprs", "box_actor_fused_kernel",
           "box_actor_step_triton", "pack_box_policy"]
