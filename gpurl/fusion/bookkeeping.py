"""A rollout step's bookkeeping in one pass: episode starts, per-env episode sums and the acting step
counter, as the torch reference and its fused Triton kernel.

After env step t, for every env e (C = G + 1 + M columns: each group's reward, the length, each metric):
- ``starts[e] = terminated[e] | truncated[e]``: the next observation starts an episode;
- ``running[e] += row[e]``, with ``row[e, g]`` the mean reward of group g's agents (``averaging`` [N, G]: 1/n_g
  on g's agents), ``row[e, G] = 1`` (the length) and ``row[e, G + 1 + m] = metrics[m, e]``;
- where the episode ended, ``done_sum[e] += running[e]``, ``done_count[e] += 1`` and ``running[e] = 0``;
- ``step += 1`` (int64 [1]: the counter RNG's step of the next acting step).

Finished episodes are summed per env (never across envs during a rollout): reading the means is a
reduction once per log interval. On a GPU the kernel is one launch per step (one node of the captured
rollout); on the CPU the reference runs compiled.
"""
from __future__ import annotations

import os

import torch

try:  # Triton is optional: without it the reference still works.
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - triton is in the dev extra
    triton = None
    tl = None

__all__ = ["BOOKKEEPING_BLOCK_E", "BOOKKEEPING_SM90_SIGNATURE", "bookkeeping_kernel", "bookkeeping_ref",
           "bookkeeping_triton"]

#: Envs per Triton program.
BOOKKEEPING_BLOCK_E = 128


def bookkeeping_ref(reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor, metrics: torch.Tensor,
                    averaging: torch.Tensor, running: torch.Tensor, done_sum: torch.Tensor, done_count: torch.Tensor,
                    starts: torch.Tensor, step: torch.Tensor, totals: torch.Tensor | None = None) -> None:
    """One step's bookkeeping in place (see the module docstring).

    reward float32 [E, N]; terminated, truncated bool [E]; metrics float32 [M, E]; averaging float32 [N, G];
    running, done_sum float32 [E, G + 1 + M] (in/out); done_count float32 [E] (in/out); starts bool [E] (out);
    step int64 [1] (in/out); ``totals`` float32 [E, G + 1 + M] (out, optional): every env's episode totals
    up to this step, before an ended one restarts (an evaluation reads finished episodes one by one).
    """
    ended = terminated | truncated
    starts.copy_(ended)
    row = torch.cat([reward @ averaging, torch.ones_like(reward[:, :1]), metrics.T], 1)
    total = running + row
    if totals is not None:
        totals.copy_(total)
    done = ended.unsqueeze(1)
    done_sum.copy_(torch.where(done, done_sum + total, done_sum))
    done_count.add_(ended.to(done_count.dtype))
    running.copy_(torch.where(done, 0.0, total))
    step.add_(1)


if triton is not None:

    @triton.jit
    def bookkeeping_kernel(reward_ptr, terminated_ptr, truncated_ptr, metrics_ptr, averaging_ptr, running_ptr,
                           done_sum_ptr, done_count_ptr, starts_ptr, step_ptr, E, N, G, C, metrics_stride,
                           BLOCK_E: tl.constexpr, BLOCK_C: tl.constexpr):
        """``BLOCK_E`` envs x all C columns per program; arithmetic as bookkeeping_ref's (the group means
        summed over agents in order). terminated, truncated, starts: uint8 [E]; metrics [M, E] with row
        stride ``metrics_stride``; running, done_sum [E, C] contiguous."""
        pid = tl.program_id(0)
        envs = pid * BLOCK_E + tl.arange(0, BLOCK_E)
        cols = tl.arange(0, BLOCK_C)
        env_ok = envs < E
        envs64 = tl.cast(envs, tl.int64)
        acc = tl.zeros([BLOCK_E, BLOCK_C], dtype=tl.float32)
        for i in range(0, N):
            r = tl.load(reward_ptr + envs64 * N + i, mask=env_ok, other=0.0)
            a = tl.load(averaging_ptr + i * G + cols, mask=cols < G, other=0.0)
            acc += r[:, None] * a[None, :]
        metric_col = (cols > G) & (cols < C)
        metric = tl.load(metrics_ptr + (cols - G - 1)[None, :] * metrics_stride + envs64[:, None],
                         mask=env_ok[:, None] & metric_col[None, :], other=0.0)
        row = acc + tl.where(cols == G, 1.0, 0.0)[None, :] + metric
        ended = (tl.load(terminated_ptr + envs, mask=env_ok, other=0) != 0) | \
                (tl.load(truncated_ptr + envs, mask=env_ok, other=0) != 0)
        tl.store(starts_ptr + envs, ended.to(tl.uint8), mask=env_ok)
        at = envs64[:, None] * C + cols[None, :]
        ok = env_ok[:, None] & (cols < C)[None, :]
        total = tl.load(running_ptr + at, mask=ok, other=0.0) + row
        done = ended[:, None]
        done_sum = tl.load(done_sum_ptr + at, mask=ok, other=0.0)
        tl.store(done_sum_ptr + at, tl.where(done, done_sum + total, done_sum), mask=ok)
        tl.store(running_ptr + at, tl.where(done, 0.0, total), mask=ok)
        count = tl.load(done_count_ptr + envs, mask=env_ok, other=0.0)
        tl.store(done_count_ptr + envs, count + ended.to(tl.float32), mask=env_ok)
        if pid == 0:
            tl.store(step_ptr, tl.load(step_ptr) + 1)

else:  # pragma: no cover
    bookkeeping_kernel = None


def bookkeeping_triton(reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor,
                       metrics: torch.Tensor, averaging: torch.Tensor, running: torch.Tensor, done_sum: torch.Tensor,
                       done_count: torch.Tensor, starts: torch.Tensor, step: torch.Tensor, *,
                       block: int = BOOKKEEPING_BLOCK_E) -> None:
    """:func:`bookkeeping_ref` as one launch of the fused kernel (CUDA tensors, or CPU ones under
    ``TRITON_INTERPRET=1``); ``reward``, ``averaging``, ``running``, ``done_sum`` contiguous, ``metrics`` rows
    contiguous. On torch's current stream, no sync."""
    if triton is None:
        raise RuntimeError("bookkeeping_triton needs triton (pip install 'gpurl[triton]')")
    if reward.device.type != "cuda" and os.environ.get("TRITON_INTERPRET", "0") != "1":
        raise RuntimeError(f"bookkeeping_triton runs on CUDA tensors; {reward.device} tensors need the Triton "
                           "interpreter (TRITON_INTERPRET=1 set before triton is imported)")
    E, N = reward.shape
    G, C = averaging.shape[1], running.shape[1]
    for name, t in (("reward", reward), ("averaging", averaging), ("running", running), ("done_sum", done_sum)):
        if not t.is_contiguous():
            raise ValueError(f"bookkeeping_triton: {name} must be contiguous")
    if metrics.shape[0] and metrics.stride(1) != 1:
        raise ValueError("bookkeeping_triton: each metric row must be contiguous")
    if E == 0:
        return
    bookkeeping_kernel[(triton.cdiv(E, block),)](
        reward, terminated.view(torch.uint8), truncated.view(torch.uint8), metrics, averaging, running, done_sum,
        done_count, starts.view(torch.uint8), step, E, N, G, C, metrics.stride(0) if metrics.shape[0] else 0,
        BLOCK_E=block, BLOCK_C=triton.next_power_of_2(C), num_warps=4)


#: The parameter types of :func:`bookkeeping_kernel` other than its constexprs, in order, for compiling it
#: ahead of time (:func:`gpurl.kernels.aot.compile_triton_sm90`).
BOOKKEEPING_SM90_SIGNATURE = {
    "reward_ptr": "*fp32", "terminated_ptr": "*u8", "truncated_ptr": "*u8", "metrics_ptr": "*fp32",
    "averaging_ptr": "*fp32", "running_ptr": "*fp32", "done_sum_ptr": "*fp32", "done_count_ptr": "*fp32",
    "starts_ptr": "*u8", "step_ptr": "*i64", "E": "i32", "N": "i32", "G": "i32", "C": "i32",
    "metrics_stride": "i32",
}
