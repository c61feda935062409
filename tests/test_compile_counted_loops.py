"""Compile tier: what the counted-loop rewrite (gpurl.kernels.counted_loops) buys in sm_90 machine code.

The loop is the shape of every neighbour count in gpurl (``gpurl.kernels.neighbors.count_within``): over an
env's agents, three loads and a few flops per agent. Compiled as a gpurl CUDA build compiles it, its body
must stay under ``MAX_INSTRUCTIONS_PER_AGENT`` and under the same source compiled as Numba lowers ``range``
(about three times as long with numba-cuda 0.30 and ptxas 13.0: 64-bit wraparound and address arithmetic per
load; docs/benchmarks.md, 2026-11-30).
"""
import numpy as np
import pytest
from numba import cuda, types

from gpurl.kernels.aot import SM90, assemble_sm90, pretend_device, sass_loops, sass_sm90
from gpurl.kernels.targets import DeviceFunction

pytestmark = pytest.mark.compile

#: The counted loop's bound per agent: 4 loads' and 4 flops' worth with their addresses and counters, and a
#: margin for other compiler versions.
MAX_INSTRUCTIONS_PER_AGENT = 26
LOADS_PER_AGENT = 3


def count_close(x, y, alive, e, i):
    """Alive others of agent i within distance 2 (squared 4) in env e."""
    close = 0
    for j in range(x.shape[1]):
        dx = x[e, j] - x[e, i]
        dy = y[e, j] - y[e, i]
        close += (j != i) & (alive[e, j] != 0) & (dx * dx + dy * dy <= np.float32(4.0))
    return close


def _kernel_over(device_count):
    def kernel(x, y, alive, out):
        e = cuda.blockIdx.x
        i = cuda.threadIdx.x
        if i < x.shape[1]:
            out[e, i] = device_count(x, y, alive, e, i)
    return kernel


def _instructions_per_agent(device_count, ptxas) -> float:
    arrays = (types.float32[:, ::1], types.float32[:, ::1], types.int32[:, ::1], types.int32[:, ::1])
    with pretend_device(SM90):
        ptx, _ = cuda.compile_ptx(_kernel_over(device_count), arrays, cc=SM90)
    loops = [loop for loop in sass_loops(sass_sm90(assemble_sm90(ptx, ptxas))) if loop.loads]
    assert loops, "the count's loop reads memory"
    main = loops[-1]  # the unrolled main loop (the longest; a remainder loop may follow it)
    assert main.loads % LOADS_PER_AGENT == 0, main.instructions
    return len(main.instructions) / (main.loads // LOADS_PER_AGENT)


def test_a_cuda_build_counts_its_range_loops(ptxas):
    counted = _instructions_per_agent(DeviceFunction(count_close).build("cuda"), ptxas)
    as_numba_lowers_range = _instructions_per_agent(cuda.jit(device=True)(count_close), ptxas)
    assert counted <= MAX_INSTRUCTIONS_PER_AGENT, (counted, as_numba_lowers_range)
    assert counted < as_numba_lowers_range, (counted, as_numba_lowers_range)
