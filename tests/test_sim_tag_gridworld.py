"""Sim tier: tag_gridworld's CUDA build in Numba's simulator vs its CPU build, in one process.

Both envs get the same params, seed and actions, and everything a launch writes must match exactly:
state and flags are integers, and the only float arithmetic is float32 divisions (obs) and table
lookups (reward), which are correctly rounded on every backend (no FMA to contract).

Cost: the CPU build compiles once for this process (~13 s on 2 vCPUs; int64 actions everywhere, so
one build), the simulator runs one Python thread per CUDA thread: sizes are tiny.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import gpurl
import gpurl.kernels.program as program
from gpurl.envs.tag_gridworld import TagGridworld

from gridworld_harness import STATE_KEYS, random_actions

pytestmark = [
    pytest.mark.sim,
    # uint64 hashing wraps on purpose; the simulator evaluates it with NumPy scalars, which warn.
    pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning"),
]

# 2 envs x (3 taggers + runner) on a 3 x 3 grid: tags and wall hits every few steps; 4-step episodes.
SMALL = dict(num_taggers=3, grid_length=2, episode_length=4)
WRITTEN = ("obs", "final_obs", "reward", "terminated", "truncated", "global_state",
           "final_global_state")  # and every array of env._tensors


def make_pair(num_envs=2, seed=3, **overrides):
    params = {**SMALL, **overrides}
    sim = gpurl.make("tag_gridworld", num_envs=num_envs, device="cpu", target="cuda", seed=seed, **params)
    cpu = gpurl.make("tag_gridworld", num_envs=num_envs, device="cpu", target="cpu", seed=seed, **params)
    assert (sim.target, cpu.target) == ("cuda", "cpu")
    return sim, cpu


def assert_envs_match(sim, cpu, where: str) -> None:
    for k in STATE_KEYS:
        np.testing.assert_array_equal(getattr(sim.state, k).numpy(), getattr(cpu.state, k).numpy(),
                                      err_msg=f"{where}: state.{k}")
    for name in WRITTEN:
        if getattr(cpu, name) is None:  # global_state=False
            assert getattr(sim, name) is None, f"{where}: {name}"
            continue
        np.testing.assert_array_equal(getattr(sim, name).numpy(), getattr(cpu, name).numpy(),
                                      err_msg=f"{where}: {name}")
    for name in cpu._tensors:  # the declared arrays and the toolkit's flags (tags, hit_wall, status, restart, ...)
        np.testing.assert_array_equal(sim._tensors[name].numpy(), cpu._tensors[name].numpy(),
                                      err_msg=f"{where}: {name}")


def step_pair(sim, cpu, steps: int, gen: torch.Generator, where: str = "") -> np.ndarray:
    """Step both with the same random actions, compare after every step; returns [tags, truncations]."""
    events = np.zeros(2, dtype=int)
    for t in range(steps):
        actions = random_actions(cpu, gen)
        sim.step(actions)
        cpu.step(actions)
        assert_envs_match(sim, cpu, f"{where}step {t}")
        events += [int(cpu.terminated.sum()), int(cpu.truncated.sum())]
    return events


def test_both_builds_run_in_the_simulator_process():
    import numba

    assert numba.config.ENABLE_CUDASIM
    assert type(TagGridworld.class_kernel().build("cuda")).__module__.startswith("numba.cuda.simulator")
    assert isinstance(TagGridworld.class_kernel().build("cpu"), numba.core.registry.CPUDispatcher)


@pytest.mark.parametrize("full, state", [(True, True), (False, True), (False, False)],
                         ids=["full_obs", "partial_obs", "partial_obs-no_global_state"])
def test_simulator_matches_cpu_build_across_autoreset(full, state):
    sim, cpu = make_pair(use_full_observation=full, global_state=state)
    sim.reset()
    cpu.reset()
    assert_envs_match(sim, cpu, "reset")
    tags, truncations = step_pair(sim, cpu, steps=8, gen=torch.Generator().manual_seed(0))
    assert tags >= 1 and truncations >= 1
    assert (sim.state.episode.numpy() >= 2).all()  # every env crossed an autoreset


def test_masked_reset_reseed_and_frozen_envs_match_cpu_build():
    sim, cpu = make_pair(num_envs=3, autoreset=False, use_full_observation=False, random_start=False)
    gen = torch.Generator().manual_seed(1)
    for env in (sim, cpu):
        env.reset()
    ends = step_pair(sim, cpu, steps=5, gen=gen, where="frozen after their end, ")
    assert ends.sum() >= 3 and sim._tensors["status"].numpy().all()
    mask = torch.tensor([False, True, False])
    for env in (sim, cpu):
        env.reset(seed=11, mask=mask)
    assert_envs_match(sim, cpu, "masked reset with a new seed")
    np.testing.assert_array_equal(sim._tensors["status"].numpy(), [1, 0, 1])
    step_pair(sim, cpu, steps=2, gen=gen, where="after the masked reset, ")
    np.testing.assert_array_equal(sim.reward.numpy()[[0, 2]], 0)


def test_more_agents_than_one_block_holds(monkeypatch):
    # 40 agents on 32 threads: threads 0..7 stride over two agents each, across every barrier.
    monkeypatch.setattr(program, "MAX_THREADS_PER_BLOCK", 32)
    assert program.block_size(40) == 32
    sim, cpu = make_pair(num_envs=1, num_taggers=39, grid_length=3, episode_length=3)
    sim.reset()
    cpu.reset()
    assert_envs_match(sim, cpu, "reset")
    step_pair(sim, cpu, steps=4, gen=torch.Generator().manual_seed(2))
    assert TagGridworld.class_kernel().build("cuda").block_dim == (32, 1, 1)  # the simulator's record of the last launch
