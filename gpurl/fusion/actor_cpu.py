"""The actor on the CPU: torch runs the GEMMs, one Numba call everything after the logits.

:func:`actor_step_cpu` takes :func:`~.actor.actor_step_ref`'s arguments and gives its results. The two
MLP trunks and the heads' GEMMs stay in torch (:func:`~.actor.actor_logits_value_ref`: MKL is faster
than a per-row loop there). What follows them, counter-RNG uniforms, inverse-CDF samples, log-probs and
the writes into the rollout slot, was ~30 small torch ops per group and step; here it is one call. The
act phase of simple-tag PPO on 2 vCPUs went from 58.5 to 34.3 ms per iteration (615 to 344 us per
step for its 768-row adversary group).

The uniforms are :func:`~.counter_rng.uniform` (bit for bit ``uniform_ref``), the values are the
reference's own tensor. Sums of exponentials may round differently from torch's in the
last bit, so a row whose uniform falls within an ulp of a CDF step could sample the neighbouring action;
the tests hold this path to the reference as the Triton kernel is held (same actions, log-probs within
1e-5).
"""
from __future__ import annotations

import math

import numba
import numpy as np
import torch

from ..kernels.interop import kernel_view
from .actor import actor_logits_value_ref, global_agent_ids
from .counter_rng import split_seed, uniform

#: Rows per parallel chunk: a parallel region costs ~20 us of thread hand-off, more than a chunk's work.
_CHUNK = 2048


@numba.njit(inline="always")
def _sample_row(r, logits, nvec, ids, step, seed_lo, seed_hi, ex, action_row):
    """Row r's actions into action_row [heads]; returns its summed log-prob. ``ex`` [NP]: scratch for the
    row's exponentials (the reference's ``ex``: its sum and running sum come from the same values)."""
    logp = np.float32(0.0)
    for h in range(logits.shape[1]):
        count = nvec[h]
        m = logits[r, h, 0]
        for j in range(1, count):
            m = max(m, logits[r, h, j])
        s = np.float32(0.0)
        for j in range(count):
            ex[j] = math.exp(logits[r, h, j] - m)
            s += ex[j]
        target = uniform(seed_lo, seed_hi, np.uint64(ids[r]), step, np.uint64(h)) * s
        cdf = np.float32(0.0)
        a = 0
        for j in range(count):
            cdf += ex[j]
            a += cdf < target
        a = min(a, count - 1)
        action_row[h] = a
        logp += logits[r, h, a] - m - math.log(s)
    return logp


@numba.njit(parallel=True, error_model="numpy", cache=True)
def _sample_kernel(logits, nvec, ids, value_rows, action, log_prob, value, n, step, seed_lo, seed_hi):
    rows = logits.shape[0]
    for c in numba.prange((rows + _CHUNK - 1) // _CHUNK):
        ex = np.empty(logits.shape[2], np.float32)
        for r in range(c * _CHUNK, min(rows, (c + 1) * _CHUNK)):
            e, i = r // n, r % n
            log_prob[e, i] = _sample_row(r, logits, nvec, ids, step, seed_lo, seed_hi, ex, action[e, i])
            value[e, i] = value_rows[r]


def _host(*tensors: torch.Tensor) -> list:
    return [kernel_view(t, "cpu") for t in tensors]  # CPU tensors only: zero-copy views


@torch.no_grad()
def actor_step_cpu(x: torch.Tensor, packed, step: torch.Tensor, seed: int, env_offset: int, num_agents: int,
                   group_start: int, action: torch.Tensor, log_prob: torch.Tensor, value: torch.Tensor) -> None:
    """:func:`~.actor.actor_step_ref` for CPU tensors (any output strides): x float32 [E, n, in_dim];
    writes action int64 [E, n, heads], log_prob and value float32 [E, n]."""
    E, n, _ = x.shape
    logits, v = actor_logits_value_ref(x, packed)
    ids = global_agent_ids(E, n, env_offset, num_agents, group_start, x.device)
    step_now = np.uint64(int(step))  # host-ok: a CPU tensor
    lo, hi = split_seed(seed)
    # The kernel reads each head's real columns only: the padded ones add exactly 0 to the reference's
    # sums and never stop its inverse CDF.
    _sample_kernel(*_host(logits, packed.nvec_t, ids, v, action, log_prob, value), n, step_now, np.uint64(lo),
                   np.uint64(hi))


__all__ = ["actor_step_cpu"]
