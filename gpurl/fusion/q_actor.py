"""The fused epsilon-greedy actor of the value-based algorithms: observation rows in, action out, one kernel.

For one agent group, each program of ``q_actor_fused_kernel`` takes BLOCK_B rows of observations and
runs: Q-network MLP -> the Qs of the Discrete(A) actions -> greedy action (the argmax, lowest index on
ties) -> the explore draw and the random action's draw from the counter RNG (keyed by seed, global agent
id, step and the heads ``EXPLORE_HEAD`` / ``RANDOM_ACTION_HEAD``) -> the action, written straight into the
rollout buffer at step t (any row strides). A group's act phase is one launch.

Its reference is the one definition of epsilon-greedy acting, :meth:`gpurl.algos.q_nets.QNetwork.act`
(the tests hold the kernel to it in Triton's interpreter). The network's layers, dots and counter RNG are
the PPO actor's (:mod:`gpurl.fusion.actor`), so are its precision (3xTF32 dots on the GPU), its padding
(:class:`~.packing.PackedPolicy`: padded actions have Q = -1e30, never the argmax) and its launch geometry.
The step, the seed and epsilon are read from device tensors: a CUDA graph replaying the launch sees the
current values (scalar arguments would be frozen at capture).
"""
from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import nn

from .actor import K_CHUNK, actor_sm90_signature, block_rows, launch_warps, triton
from .packing import PackedPolicy

#: Head indices of the counter RNG's two draws per agent and step (explore or not; which random action).
EXPLORE_HEAD, RANDOM_ACTION_HEAD = 0, 1

if triton is not None:
    import triton.language as tl

    from .actor import _actor_only_rows, _counter_key, _matmul, _uniform

    # The heads as the kernel reads them (a jit function reads module globals only as constexprs).
    _EXPLORE, _RANDOM_ACTION = tl.constexpr(EXPLORE_HEAD), tl.constexpr(RANDOM_ACTION_HEAD)

    @triton.jit
    def q_actor_fused_kernel(
        x_ptr, sx_e, sx_i, D, E, n,
        mean_ptr, rstd_ptr, w0, wh, b, wo, bo, nvec_ptr,
        step_ptr, seed_ptr, eps_ptr, env_offset, num_agents, group_start,
        act_ptr, sa_e, sa_i,
        IP: tl.constexpr, HP: tl.constexpr, NP: tl.constexpr, LAYERS: tl.constexpr, TANH: tl.constexpr,
        BLOCK_B: tl.constexpr, KC: tl.constexpr,
    ):
        live, e, i, h = _actor_only_rows(x_ptr, sx_e, sx_i, D, E, n, mean_ptr, rstd_ptr, w0, wh, b, IP, HP, LAYERS,
                                         TANH, BLOCK_B, KC)
        offs_n = tl.arange(0, NP)
        q = _matmul(h, wo, NP, offs_n, HP, BLOCK_B) + tl.load(bo + offs_n)[None, :]
        best = tl.max(q, axis=1)
        greedy = tl.min(tl.where(q == best[:, None], offs_n[None, :], NP), axis=1)
        step, seed_lo, seed_hi = _counter_key(step_ptr, seed_ptr)
        gid = ((env_offset + e) * num_agents + group_start + i).to(tl.uint32)
        explore = _uniform(step, _EXPLORE, gid, seed_lo, seed_hi)
        num_actions = tl.load(nvec_ptr)
        random_action = tl.minimum((_uniform(step, _RANDOM_ACTION, gid, seed_lo, seed_hi) * num_actions)
                                   .to(tl.int32), num_actions - 1)
        action = tl.where(explore < tl.load(eps_ptr), random_action, greedy)
        tl.store(act_ptr + e * sa_e + i * sa_i, action.to(tl.int64), mask=live)


def pack_q_network(mlp: nn.Sequential, num_actions: int, activation: str) -> PackedPolicy:
    """The padded weights of a Q-network (``mlp``: in_dim -> widths -> num_actions linear layers) that
    the kernel reads: a :class:`PackedPolicy` of one categorical head of ``num_actions``, no normaliser,
    no critic. ``sync()`` after every update, as for the PPO actor."""
    view = SimpleNamespace(actor=mlp, critic=None, obs_norm=nn.Identity(), recurrent=False,
                           dist=SimpleNamespace(nvec=[num_actions]))
    return PackedPolicy(view, activation)


def q_actor_constexprs(packed: PackedPolicy) -> dict:
    """The ``tl.constexpr`` arguments of :func:`q_actor_fused_kernel` for ``packed`` (the launch and the
    ahead-of-time compile of the compile tier)."""
    p = packed
    return dict(IP=p.IP, HP=p.HP, NP=p.NP, LAYERS=p.layers, TANH=p.activation == "tanh", BLOCK_B=block_rows(p),
                KC=min(K_CHUNK, p.IP))


def q_actor_step_triton(x: torch.Tensor, packed: PackedPolicy, step: torch.Tensor, seed: torch.Tensor,
                        epsilon: torch.Tensor, env_offset: int, num_agents: int, group_start: int,
                        action: torch.Tensor) -> None:
    """The fused kernel. x float32 [E, n, in_dim]; step int64 [1]; seed int64 [2] (low, high halves);
    epsilon float32 [1]; writes action int64 [E, n, 1] (a view with any row strides). Row (e, i) is global
    agent (env_offset + e) * num_agents + group_start + i."""
    if triton is None:
        raise RuntimeError("the fused actor needs triton (pip install -e '.[triton]')")
    E, n, D = x.shape
    if x.stride(2) != 1:
        raise ValueError("x needs a contiguous last dimension")
    if packed.heads != 1 or packed.with_value:
        raise ValueError("q_actor_step_triton takes a packed Q-network (pack_q_network)")
    if action.dtype != torch.int64:
        raise ValueError(f"action must be int64 (a Discrete action per agent), got {action.dtype}")
    if epsilon.dtype != torch.float32 or epsilon.numel() != 1:
        raise ValueError(f"epsilon must be a float32 tensor of one element, got {epsilon.dtype} {tuple(epsilon.shape)}")
    p = packed
    grid = (triton.cdiv(E * n, block_rows(p)),)
    q_actor_fused_kernel[grid](
        x, x.stride(0), x.stride(1), D, E, n,
        p.norm_mean, p.norm_rstd, p.a_w0, p.a_wh, p.a_b, p.a_wo, p.a_bo, p.nvec_t,
        step, seed, epsilon, env_offset, num_agents, group_start,
        action, action.stride(0), action.stride(1),
        num_warps=launch_warps(p), **q_actor_constexprs(p),
    )


#: :func:`q_actor_fused_kernel`'s signature (:func:`~.actor.actor_sm90_signature`)
Q_ACTOR_SM90_SIGNATURE = actor_sm90_signature(
    ("w0", "wh", "b", "wo", "bo"),
    {"nvec_ptr": "*i32", "step_ptr": "*i64", "seed_ptr": "*i64", "eps_ptr": "*fp32"}, "*i64")

__all__ = ["EXPLORE_HEAD", "Q_ACTOR_SM90_SIGNATURE", "RANDOM_ACTION_HEAD", "pack_q_network", "q_actor_constexprs",
           "q_actor_fused_kernel", "q_actor_step_triton"]
