"""Small CUDA C kernels shared by the CUDA C loader tests (host build in the cpu tier, NVRTC in the compile
tier, CuPy on a GPU): gpurl.cuh's RNG against gpurl.kernels.rng, and a per-row reduction that needs
threads, a barrier, shared memory and an atomic; and the walk.cu example of docs/cuda_c.md."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch

from gpurl.kernels.rng import random_below_ref, random_u32_ref, random_uniform_ref

SOURCE = r"""
#include "gpurl.cuh"

// keys: [n, 4] (env, agent, counter, stream); one draw of each kind per key.
extern "C" __global__ void rng_draws(int n, unsigned long long seed, const long long* keys, long long below_n,
                                     unsigned int* u32, float* uniform, int* below)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < n; k += stride) {
        const long long* key = keys + 4 * k;
        u32[k] = gpurl_random_u32(seed, key[0], key[1], key[2], key[3]);
        uniform[k] = gpurl_random_uniform(seed, key[0], key[1], key[2], key[3]);
        below[k] = gpurl_random_below(seed, key[0], key[1], key[2], key[3], below_n);
    }
}

/* One block per row: threads stride over the columns, partial sums meet in shared memory after a
   barrier, thread 0 writes the row's sum; every thread counts itself (count may be null). */
extern "C" __global__ void row_sums(int rows, int cols, int scale, const int* __restrict__ values,
                                    long long* sums, int* count)
{
    __shared__ long long partial[256];
    const int row = blockIdx.x;
    if (row >= rows) return;
    long long acc = 0;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) acc += (long long)values[(long long)row * cols + i] * scale;
    partial[threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        long long total = 0;
        for (unsigned t = 0; t < blockDim.x; ++t) total += partial[t];
        sums[row] = total;
    }
    if (count != nullptr) atomicAdd(count, 1);
}
"""

SEEDS = (0, 3, 2**64 - 1)


def rng_keys(n: int = 257) -> np.ndarray:
    """int64 [n, 4]: small, large (>= 2**32, wrapped like the kernels) and negative key parts."""
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 2**20, size=(n, 4), dtype=np.int64)
    keys[:8] = [[0, 0, 0, 0], [1, 2, 3, 4], [2**32, 5, 2**33 + 7, 1], [-1, -2, -3, -4],
                [2**31 - 1, 2**31, 2**32 - 1, 0], [7, 13, 100, 1], [2**40 + 9, 0, 0, 1], [123456, 999, 17, 0]]
    return keys


def run_rng(module, seed: int, keys: np.ndarray, below_n: int, device) -> dict[str, np.ndarray]:
    n = len(keys)
    out = dict(u32=torch.zeros(n, dtype=torch.uint32, device=device),
               uniform=torch.zeros(n, dtype=torch.float32, device=device),
               below=torch.zeros(n, dtype=torch.int32, device=device))
    keys_t = torch.as_tensor(keys, device=device)
    module.launch("rng_draws", 3, 64, (n, np.uint64(seed), keys_t, below_n, out["u32"], out["uniform"], out["below"]))
    return {k: v.cpu().numpy() for k, v in out.items()}


def assert_rng_matches_reference(got: dict[str, np.ndarray], seed: int, keys: np.ndarray, below_n: int) -> None:
    parts = [keys[:, j] for j in range(4)]
    np.testing.assert_array_equal(got["u32"], random_u32_ref(np.uint64(seed), *parts), err_msg=f"u32 seed={seed}")
    np.testing.assert_array_equal(got["uniform"], random_uniform_ref(np.uint64(seed), *parts),
                                  err_msg=f"uniform seed={seed}")
    np.testing.assert_array_equal(got["below"], random_below_ref(np.uint64(seed), *parts, below_n),
                                  err_msg=f"below seed={seed}")


# ---- the walk.cu example of docs/cuda_c.md ---------------------------------------------------------------

DOC = Path(__file__).resolve().parent.parent / "docs" / "cuda_c.md"


def doc_cuda_sources() -> list[str]:
    """The ```cuda blocks of docs/cuda_c.md (the first is walk.cu)."""
    return re.findall(r"^```cuda\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)


def walk_ref(x, y, actions, grid: int, seed: int, step: int):
    """NumPy twin of walk_step: returns new (x, y, reward, at_home)."""
    a = np.asarray(actions)
    x = (x + np.select([a == 1, a == 2], [1, -1], 0) + grid) % grid
    y = (y + np.select([a == 3, a == 4], [1, -1], 0) + grid) % grid
    home = (x == 0) & (y == 0)
    at_home = home.sum(axis=1).astype(np.int32)
    share = np.float32(1) / np.maximum(at_home, 1).astype(np.float32)
    reward = np.where(home, share[:, None], np.float32(0)).astype(np.float32)
    env, agent = np.arange(x.shape[0])[:, None], np.arange(x.shape[1])[None, :]
    x = np.where(home, random_below_ref(np.uint64(seed), env, agent, step, 0, grid), x).astype(np.int32)
    y = np.where(home, random_below_ref(np.uint64(seed), env, agent, step, 1, grid), y).astype(np.int32)
    return x, y, reward, at_home


def run_walk_against_reference(module, device, block: int, steps: int = 20, E: int = 7, N: int = 13, L: int = 3,
                               seed: int = 7) -> int:
    """Launch walk_step ``steps`` times and compare every buffer with walk_ref; returns how many agents
    reached home in all."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, L, (E, N), dtype=torch.int32, generator=gen)
    y = torch.randint(0, L, (E, N), dtype=torch.int32, generator=gen)
    ref = (x.numpy().copy(), y.numpy().copy())
    x, y = x.to(device), y.to(device)
    reward = torch.zeros(E, N, device=device)
    at_home = torch.zeros(E, dtype=torch.int32, device=device)
    homes = 0
    for step in range(steps):
        actions = torch.randint(0, 5, (E, N), generator=gen)
        args = (E, N, L, x, y, reward, at_home, actions.to(device), np.uint64(seed), step)
        module.launch("walk_step", E, block, args)
        rx, ry, rr, rh = walk_ref(*ref, actions.numpy(), L, seed, step)
        for name, got, want in (("x", x, rx), ("y", y, ry), ("reward", reward, rr), ("at_home", at_home, rh)):
            np.testing.assert_array_equal(got.cpu().numpy(), want, err_msg=f"step {step} {name}")
        ref = (rx, ry)
        homes += int(rh.sum())
    return homes
