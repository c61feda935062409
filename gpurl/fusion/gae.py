"""Generalised advantage estimation (GAE(lambda)) with terminated vs truncated episodes: the torch
reference, the fused Triton kernel and the ``gpurl::gae`` torch op that picks one by device.

At step t of env e (agent dims broadcast):
- terminated: the episode really ended; nothing follows: delta = r - V(s_t).
- truncated: cut by the time limit; the future is bootstrapped from the value of the final
  observation: delta = r + gamma * V(final_obs_t) - V(s_t).
- otherwise: delta = r + gamma * V(s_{t+1}) - V(s_t).
Advantages run backwards, A_t = delta_t + gamma * lambda * A_{t+1}, cut at every episode end (with
autoreset, s_{t+1} after an end is the next episode's first observation).

The reference loops over t with whole-[E, N] torch ops: 2T+ small kernels on a GPU. The Triton kernel
gives each program ``BLOCK`` of the M = E * N (env, agent) columns and runs the whole reverse scan in
registers, reading every input once and writing every output once.
"""
from __future__ import annotations

import os

import torch

try:  # Triton is optional: without it the reference (and the op's CPU path) still work.
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - triton is in the dev extra
    triton = None
    tl = None

__all__ = ["GAE_BLOCK", "GAE_NUM_WARPS", "gae", "gae_fused_kernel", "gae_ref", "gae_triton"]

GAE_BLOCK = 256
"""Columns per Triton program: 2 per thread with 4 warps (one coalesced 1 KiB row read per step)."""
GAE_NUM_WARPS = 4
BACKENDS = ("auto", "torch", "triton")


def gae_ref(reward: torch.Tensor, value: torch.Tensor, final_value: torch.Tensor, terminated: torch.Tensor,
            truncated: torch.Tensor, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference GAE: ``(advantages, returns)``, float32 [T, E, N].

    reward [T, E, N]; value [T + 1, E, N] (value[T] bootstraps the step after the rollout);
    final_value [T, E, N] (read only where truncated); terminated, truncated bool [T, E].
    """
    T = reward.shape[0]
    advantages = torch.empty_like(reward)
    last = torch.zeros_like(reward[0])
    for t in range(T - 1, -1, -1):
        ended = (terminated[t] | truncated[t]).unsqueeze(-1)
        next_value = torch.where(ended, torch.where(truncated[t].unsqueeze(-1), final_value[t], 0.0),
                                 value[t + 1])
        delta = reward[t] + gamma * next_value - value[t]
        last = delta + (gamma * lam) * last * (~ended)
        advantages[t] = last
    return advantages, advantages + value[:T]


if triton is not None:

    @triton.jit
    def gae_fused_kernel(reward_ptr, value_ptr, final_value_ptr, terminated_ptr, truncated_ptr,
                         advantages_ptr, returns_ptr, T, M, E, N, gamma, gamma_lam,
                         BLOCK: tl.constexpr):
        """Reverse GAE scan over t for ``BLOCK`` columns; arithmetic in gae_ref's order.

        reward, final_value, advantages, returns: fp32 [T, M]; value fp32 [T + 1, M]; terminated,
        truncated: uint8 [T, E] (column m belongs to env m // N); gamma_lam is gamma * lam multiplied on
        the host in double precision (as the reference's Python product is), then passed as fp32.
        """
        cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = cols < M
        env = cols // N
        # int64 rows: T * M may pass 2**31 on big rollouts (tl.cast: T or M may arrive as constexpr 1).
        M64 = tl.cast(M, tl.int64)
        # value[t + 1] is the previous iteration's value[t]: each value row is read once.
        next_value = tl.load(value_ptr + tl.cast(T, tl.int64) * M64 + cols, mask=mask, other=0.0)
        last = tl.zeros([BLOCK], dtype=tl.float32)
        for i in range(0, T):
            t = tl.cast(T - 1 - i, tl.int64)
            row = t * M64 + cols
            terminated = tl.load(terminated_ptr + t * E + env, mask=mask, other=0) != 0
            truncated = tl.load(truncated_ptr + t * E + env, mask=mask, other=0) != 0
            ended = terminated | truncated
            value = tl.load(value_ptr + row, mask=mask, other=0.0)
            reward = tl.load(reward_ptr + row, mask=mask, other=0.0)
            # Only truncated rows read final_value (0 elsewhere, as the reference's inner where).
            final_value = tl.load(final_value_ptr + row, mask=mask & truncated, other=0.0)
            bootstrap = tl.where(ended, final_value, next_value)
            delta = reward + gamma * bootstrap - value
            last = delta + gamma_lam * last * tl.where(ended, 0.0, 1.0)
            tl.store(advantages_ptr + row, last, mask=mask)
            tl.store(returns_ptr + row, last + value, mask=mask)
            next_value = value

else:  # pragma: no cover
    gae_fused_kernel = None


def _check_shapes(reward, value, final_value, terminated, truncated) -> None:
    if reward.dim() != 3:
        raise ValueError(f"reward must be [T, E, N], got shape {tuple(reward.shape)}")
    T, E, N = reward.shape
    want = {"value": (value, (T + 1, E, N)), "final_value": (final_value, (T, E, N)),
            "terminated": (terminated, (T, E)), "truncated": (truncated, (T, E))}
    for name, (tensor, shape) in want.items():
        if tuple(tensor.shape) != shape:
            raise ValueError(f"{name} must have shape {shape} for reward {tuple(reward.shape)}, "
                             f"got {tuple(tensor.shape)}")
    for name, tensor in (("reward", reward), ("value", value), ("final_value", final_value)):
        if tensor.dtype != torch.float32:
            raise TypeError(f"{name} must be float32, got {tensor.dtype}")
    for name, tensor in (("terminated", terminated), ("truncated", truncated)):
        if tensor.dtype not in (torch.bool, torch.uint8):
            raise TypeError(f"{name} must be bool (or uint8), got {tensor.dtype}")


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def gae_triton(reward: torch.Tensor, value: torch.Tensor, final_value: torch.Tensor, terminated: torch.Tensor,
               truncated: torch.Tensor, gamma: float, lam: float, *, block: int = GAE_BLOCK
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE with the fused Triton kernel: same arguments, shapes and results as :func:`gae_ref`.

    Runs on CUDA tensors, or on CPU tensors under ``TRITON_INTERPRET=1`` (the interpreter). Returns new
    float32 [T, E, N] tensors ``(advantages, returns)``; launches on torch's current stream, no sync.
    block: columns per program (a power of two; tests shrink it to exercise several programs).
    """
    if triton is None:
        raise RuntimeError("gae_triton needs triton (pip install 'gpurl[triton]')")
    if reward.device.type != "cuda" and not _interpreting():
        raise RuntimeError(f"gae_triton runs on CUDA tensors; {reward.device} tensors need the Triton "
                           "interpreter (TRITON_INTERPRET=1 set before triton is imported)")
    _check_shapes(reward, value, final_value, terminated, truncated)
    T, E, N = reward.shape
    M = E * N
    advantages = torch.empty_like(reward, memory_format=torch.contiguous_format)
    returns = torch.empty_like(advantages)
    if T == 0 or M == 0:
        return advantages, returns
    grid = (triton.cdiv(M, block),)
    gae_fused_kernel[grid](
        reward.contiguous().view(T, M), value.contiguous().view(T + 1, M),
        final_value.contiguous().view(T, M),
        terminated.contiguous().view(torch.uint8), truncated.contiguous().view(torch.uint8),
        advantages.view(T, M), returns.view(T, M), T, M, E, N, float(gamma), float(gamma) * float(lam),
        BLOCK=block, num_warps=GAE_NUM_WARPS,
    )
    return advantages, returns


# ---- the torch op: one name for torch.compile / CUDA graphs, the device picks the implementation ----

@torch.library.custom_op("gpurl::gae", mutates_args=(), device_types="cpu")
def _gae_op(reward: torch.Tensor, value: torch.Tensor, final_value: torch.Tensor, terminated: torch.Tensor,
            truncated: torch.Tensor, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    return gae_ref(reward, value, final_value, terminated, truncated, gamma, lam)


@_gae_op.register_kernel("cuda")
def _gae_op_cuda(reward, value, final_value, terminated, truncated, gamma, lam):
    return gae_triton(reward, value, final_value, terminated, truncated, gamma, lam)


@_gae_op.register_fake
def _gae_op_fake(reward, value, final_value, terminated, truncated, gamma, lam):
    return torch.empty_like(reward), torch.empty_like(reward)


def gae(reward: torch.Tensor, value: torch.Tensor, final_value: torch.Tensor, terminated: torch.Tensor,
        truncated: torch.Tensor, gamma: float, lam: float, backend: str = "auto"
        ) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE ``(advantages, returns)``, float32 [T, E, N]; arguments as :func:`gae_ref`.

    backend: ``"auto"`` calls the ``gpurl::gae`` op (CPU tensors: the reference; CUDA tensors: the
    Triton kernel; traceable by torch.compile and capturable in CUDA graphs); ``"torch"`` forces
    :func:`gae_ref`; ``"triton"`` forces :func:`gae_triton` (CPU tensors only under TRITON_INTERPRET=1).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    args = (reward, value, final_value, terminated, truncated, float(gamma), float(lam))
    if backend == "torch":
        return gae_ref(*args)
    if backend == "triton":
        return gae_triton(*args)
    return torch.ops.gpurl.gae(*args)


#: The parameter types of :func:`gae_fused_kernel` other than ``BLOCK``, in order, for compiling it ahead
#: of time (:func:`gpurl.kernels.aot.compile_triton_sm90`).
GAE_SM90_SIGNATURE = {
    "reward_ptr": "*fp32", "value_ptr": "*fp32", "final_value_ptr": "*fp32",
    "terminated_ptr": "*u8", "truncated_ptr": "*u8", "advantages_ptr": "*fp32", "returns_ptr": "*fp32",
    "T": "i32", "M": "i32", "E": "i32", "N": "i32", "gamma": "fp32", "gamma_lam": "fp32",
}
