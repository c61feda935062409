"""Sim tier: CUDA builds of toolkit kernels in Numba's simulator match NumPy references and the CPU build.

The simulator runs every thread as a Python thread (about 1e3 agent-steps/s), so shapes are tiny; a
block is shrunk to 32 threads so that 70 agents exercise the per-thread striding (3 agents per thread)
that MAX_THREADS_PER_BLOCK = 256 would need 300+ agents for.
"""
import numpy as np
import pytest

import gpurl.kernels.program as program

from gpurl.kernels import freeze_constants

from toolkit_kernels import (double_kernel, rng_args, rng_kernel, rng_ref, swarm_args, swarm_kernel, swarm_ref,
                             width_kernel, width_ref)

pytestmark = [
    pytest.mark.sim,
    # uint64 hashing wraps on purpose; the simulator evaluates it with NumPy scalars, which warn.
    pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning"),
]


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(program, "MAX_THREADS_PER_BLOCK", 32)
    assert program.block_size(70) == 32


def _assert_same(got, want):
    for name, g, w in zip(want._fields, got, want):
        np.testing.assert_array_equal(g, w, err_msg=name)


def test_simulator_is_active():
    import numba

    assert numba.config.ENABLE_CUDASIM
    assert type(double_kernel.build("cuda")).__module__.startswith("numba.cuda.simulator")


def test_plain_kernel_writes_in_place():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    double_kernel.launch("cuda", 2, 3, x)
    np.testing.assert_array_equal(x, 2 * np.arange(6, dtype=np.float32).reshape(2, 3))


@pytest.mark.parametrize("num_envs, num_agents", [(2, 70), (3, 5)])
def test_barrier_phases_match_reference_and_cpu_build(small_blocks, num_envs, num_agents):
    on_sim = swarm_args(num_envs, num_agents)
    swarm_kernel.launch("cuda", num_envs, num_agents, *on_sim)
    _assert_same(on_sim[0], swarm_ref(num_envs, num_agents))

    # The CPU target is unaffected by NUMBA_ENABLE_CUDASIM, so both builds run in this process.
    on_cpu = swarm_args(num_envs, num_agents)
    swarm_kernel.launch("cpu", num_envs, num_agents, *on_cpu)
    _assert_same(on_sim[0], on_cpu[0])


def test_rng_matches_references_exactly(small_blocks):
    shape = dict(num_envs=2, num_agents=40, streams=3)
    for seed, counter in [(0, 0), (2**64 - 1, 2**32 - 1), (123456789, 17)]:
        args = rng_args(**shape, seed=seed, counter=counter)
        rng_kernel.launch("cuda", shape["num_envs"], shape["num_agents"], *args)
        for got, want in zip(args[2:], rng_ref(**shape, seed=seed, counter=counter)):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)


def test_build_constant_in_the_cuda_build():
    out = np.zeros((2, 3), np.float32)
    width_kernel.launch("cuda", 2, 3, out, constants=freeze_constants({"TOOLKIT_FIXED_WIDTH": 5}))
    np.testing.assert_array_equal(out, width_ref(2, 3, 5))
    width_kernel.launch("cuda", 2, 3, out)
    np.testing.assert_array_equal(out, width_ref(2, 3, 3))
