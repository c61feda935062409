"""bench/kernel_inventory.py (the kernel report's and the compile tier's list of GPU launches): recording an
env's CUDA launches runs nothing and leaves the process as it was; the traffic model's pieces.

No compiler here: compiles and ptxas are the compile tier's (tests/test_compile_kernel_limits.py).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.cpu

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import kernel_inventory as inv  # noqa: E402

from gpurl.kernels.program import EnvKernel, block_size  # noqa: E402


@pytest.mark.parametrize("config", sorted(inv.ENV_CONFIGS))
def test_recording_finds_reset_and_step_launches_and_runs_nothing(config):
    launch_before, switch_before = EnvKernel.launch, os.environ.get("NUMBA_ENABLE_CUDASIM")
    env, launches = inv.record_launches(inv.ENV_CONFIGS[config], num_envs=3)
    assert EnvKernel.launch is launch_before and os.environ.get("NUMBA_ENABLE_CUDASIM") == switch_before
    assert env.target == "cuda" and env.num_envs == 3
    assert {launch.phase for launch in launches} >= {"reset", "step"}
    for launch in launches:
        assert isinstance(launch.kernel, EnvKernel)
        assert (launch.num_envs, launch.num_agents) == (3, env.num_agents)
        N = env.num_agents
        if N <= 32:  # the 3 envs packed into one block of whole warps, every agent on a lane of its own
            threads = -(-3 * N // 32) * 32
            assert (launch.blocks, launch.threads, launch.lanes_busy) == (1, threads, 3 * N / threads)
        else:  # a block per env
            assert (launch.blocks, launch.threads) == (3, block_size(N))
        assert len(launch.args) == launch.kernel.nargs
        assert inv.distinct_arrays(launch.args)
    # Nothing ran: the step's observations are still the zeros they were allocated with.
    assert not env.obs.any()


def test_distinct_arrays_names_each_buffer_once():
    from collections import namedtuple

    a, b = np.zeros((3, 4), np.float32), np.ones(3, np.int32)
    S = namedtuple("S", "a b view")
    found = inv.distinct_arrays((S(a, b, a), np.float32(1.0), (b, np.zeros(2, np.uint8))))
    assert list(found) == ["0.a", "0.b", "2.1"]
    assert sum(x.nbytes for x in found.values()) == 48 + 12 + 2


def test_gae_traffic_is_every_input_read_and_every_output_written_once():
    config = inv.EnvConfig("tiny", "tag_continuous", {}, 3, "tag-small", "")
    launch = inv.gae_launch(config, num_agents=4)
    T, M = launch.extra["T"], 3 * 4
    assert launch.items == T * M
    assert launch.bytes_read == 4 * T * M + 4 * (T + 1) * M + 4 * T * M + 2 * T * 3
    assert launch.bytes_written == 2 * 4 * T * M


def test_random_actions_cover_every_group():
    import torch

    env, _ = inv.record_launches(inv.ENV_CONFIGS["simple-tag-3v1v2"], num_envs=2)
    actions = inv.random_actions(env, torch.Generator().manual_seed(0))
    assert actions.shape[:2] == (2, env.num_agents)
