"""Sim tier: the example env's (examples/custom_env.py) CUDA build in Numba's simulator vs its CPU build.

Both envs get the same params, seed and actions; everything a launch writes must match exactly:
cells, counters and flags are integers, and the only float arithmetic is float32 divisions (obs) and
one float32 product (reward), correctly rounded on every backend. Sizes are tiny: the simulator runs
one Python thread per CUDA thread.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import gpurl
import gpurl.kernels.program as program

from custom_env_harness import STATE_KEYS, custom_env, random_actions

pytestmark = [
    pytest.mark.sim,
    # uint64 hashing wraps on purpose; the simulator evaluates it with NumPy scalars, which warn.
    pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning"),
]

# 2 envs x 3 agents, 3 food items on a 3 x 3 torus: food is eaten most steps; 4-step episodes that
# terminate at 3 items.
SMALL = dict(num_agents=3, num_food=3, grid_size=3, episode_length=4, food_target=3)
WRITTEN = ("obs", "final_obs", "reward", "terminated", "truncated", "global_state",
           "final_global_state")


def make_pair(num_envs=2, seed=3, **overrides):
    params = {**SMALL, **overrides}
    sim = gpurl.make("foraging", num_envs=num_envs, device="cpu", target="cuda", seed=seed, **params)
    cpu = gpurl.make("foraging", num_envs=num_envs, device="cpu", target="cpu", seed=seed, **params)
    assert (sim.target, cpu.target) == ("cuda", "cpu")
    return sim, cpu


def assert_envs_match(sim, cpu, where: str) -> None:
    for k in STATE_KEYS:
        np.testing.assert_array_equal(getattr(sim.state, k).numpy(), getattr(cpu.state, k).numpy(),
                                      err_msg=f"{where}: state.{k}")
    for name in WRITTEN:
        np.testing.assert_array_equal(getattr(sim, name).numpy(), getattr(cpu, name).numpy(),
                                      err_msg=f"{where}: {name}")
    for name in cpu._tensors:  # every declared array and the toolkit's flags (food, hit, status, restart, ...)
        np.testing.assert_array_equal(sim._tensors[name].numpy(), cpu._tensors[name].numpy(),
                                      err_msg=f"{where}: {name}")


def step_pair(sim, cpu, steps: int, gen: torch.Generator, where: str = "") -> np.ndarray:
    """Step both with the same random actions, compare after every step; returns [terminations, truncations]."""
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
    assert type(custom_env.Foraging.class_kernel().build("cuda")).__module__.startswith("numba.cuda.simulator")
    assert isinstance(custom_env.Foraging.class_kernel().build("cpu"), numba.core.registry.CPUDispatcher)


def test_simulator_matches_cpu_build_across_autoreset():
    sim, cpu = make_pair()
    sim.reset()
    cpu.reset()
    assert_envs_match(sim, cpu, "reset")
    terminations, truncations = step_pair(sim, cpu, steps=8, gen=torch.Generator().manual_seed(0))
    assert terminations + truncations >= 2
    assert (sim.state.episode.numpy() >= 2).all()  # every env crossed an autoreset


def test_frozen_envs_and_masked_reseeded_reset_match_cpu_build():
    sim, cpu = make_pair(num_envs=3, autoreset=False, food_target=0, episode_length=2)
    gen = torch.Generator().manual_seed(1)
    for env in (sim, cpu):
        env.reset()
    step_pair(sim, cpu, steps=3, gen=gen, where="frozen after their end, ")
    assert sim._tensors["status"].numpy().all()
    mask = torch.tensor([False, True, False])
    for env in (sim, cpu):
        env.reset(seed=11, mask=mask)
    assert_envs_match(sim, cpu, "masked reset with a new seed")
    step_pair(sim, cpu, steps=1, gen=gen, where="after the masked reset, ")
    np.testing.assert_array_equal(sim.reward.numpy()[[0, 2]], 0)


def test_more_agents_than_one_block_holds(monkeypatch):
    # 35 agents on 32 threads: threads 0..2 stride over two agents each, across every barrier.
    monkeypatch.setattr(program, "MAX_THREADS_PER_BLOCK", 32)
    assert program.block_size(35) == 32
    sim, cpu = make_pair(num_envs=1, num_agents=35, num_food=2, grid_size=4, food_target=3)
    sim.reset()
    cpu.reset()
    assert_envs_match(sim, cpu, "reset")
    terminations, _ = step_pair(sim, cpu, steps=2, gen=torch.Generator().manual_seed(2))
    assert terminations >= 1  # 35 agents on 16 cells eat 3 items quickly
    assert custom_env.Foraging.class_kernel().build("cuda").block_dim == (32, 1, 1)
