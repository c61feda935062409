"""Sim tier: simple_tag's CUDA build (thread per agent, a barrier per phase) in Numba's simulator vs its CPU
build (env-major, phases inlined), in one process, with the same params, seeds, actions and injected states.

Integers (counters, flags, the finished bookkeeping) must match exactly and the reset draws bit for bit;
floats within FLOAT_ATOL. They are not bit-identical: the simulator evaluates ``math.exp``/``math.sqrt``
of float32 values in float64 (Python's math) before rounding, the CPU build in float32. Runs are short
and crowded (contacts, catches) with seeds where that rounding flips no catch.

Cost: the simulator runs one Python thread per CUDA thread, so sizes are tiny; the CPU build compiles
once in this process (one kernel for reset, step and every action dtype: ~15-40 s on 2 vCPUs).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import gpurl
import gpurl.kernels.program as program
from gpurl.kernels.program import EnvKernel

from simple_tag_harness import crowd, random_actions

pytestmark = [
    pytest.mark.sim,
    # uint64 hashing wraps on purpose; the simulator evaluates it with NumPy scalars, which warn.
    pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning"),
]

FLOAT_ATOL = 1e-5
INT_STATE = ("timestep", "episode")
FLOAT_STATE = ("pos", "vel", "landmark_pos")
SMALL = dict(num_adversaries=2, num_good=2, num_obstacles=1, max_cycles=4)


def make_pair(num_envs=2, seed=3, **overrides):
    params = {**SMALL, **overrides}
    sim = gpurl.make("simple_tag", num_envs=num_envs, device="cpu", target="cuda", seed=seed, **params)
    cpu = gpurl.make("simple_tag", num_envs=num_envs, device="cpu", target="cpu", seed=seed, **params)
    assert (sim.target, cpu.target) == ("cuda", "cpu")
    return sim, cpu


def assert_envs_match(sim, cpu, where: str) -> None:
    for k in INT_STATE:
        np.testing.assert_array_equal(getattr(sim.state, k).numpy(), getattr(cpu.state, k).numpy(),
                                      err_msg=f"{where}: state.{k}")
    for name in ("terminated", "truncated"):
        np.testing.assert_array_equal(getattr(sim, name).numpy(), getattr(cpu, name).numpy(),
                                      err_msg=f"{where}: {name}")
    np.testing.assert_array_equal(sim._tensors["status"].numpy(), cpu._tensors["status"].numpy(),
                                  err_msg=f"{where}: status")
    floats = {f"state.{k}": (getattr(sim.state, k), getattr(cpu.state, k)) for k in FLOAT_STATE}
    floats.update(obs=(sim.obs, cpu.obs), reward=(sim.reward, cpu.reward), final_obs=(sim.final_obs, cpu.final_obs),
                  global_state=(sim.global_state, cpu.global_state),
                  final_global_state=(sim.final_global_state, cpu.final_global_state),
                  collisions=(sim.step_metrics()["collisions"], cpu.step_metrics()["collisions"]))
    for name, (got, want) in floats.items():
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=FLOAT_ATOL, err_msg=f"{where}: {name}")


def step_pair(sim, cpu, steps: int, gen: torch.Generator, crowd_every: int = 0, where: str = "") -> dict:
    """Same random actions (and crowding injections) into both; compare after every step."""
    events = dict(catches=0, terminated=0, truncated=0)
    for t in range(steps):
        if crowd_every and t % crowd_every == 0:
            state = torch.Generator().manual_seed(100 + t)
            crowd(cpu, state, range(cpu.num_envs))
            for k in FLOAT_STATE:
                getattr(sim.state, k).copy_(getattr(cpu.state, k))
        actions = random_actions(cpu, gen)
        _, _, term, trunc, _ = sim.step(actions)
        cpu.step(actions)
        assert_envs_match(sim, cpu, f"{where}step {t}")
        events["catches"] += int(cpu.step_metrics()["collisions"].sum())
        events["terminated"] += int(term.sum())
        events["truncated"] += int(trunc.sum())
    return events


def test_both_builds_run_in_the_simulator_process():
    import numba

    assert numba.config.ENABLE_CUDASIM
    sim, cpu = make_pair()
    assert sim.kernel is cpu.kernel  # one kernel per env class, built per target
    assert type(sim.kernel.build("cuda")).__module__.startswith("numba.cuda.simulator")
    assert isinstance(cpu.kernel.build("cpu"), numba.core.registry.CPUDispatcher)


@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "continuous"])
def test_simulator_matches_cpu_build_across_autoreset(continuous):
    sim, cpu = make_pair(continuous_actions=continuous)
    sim.reset()
    cpu.reset()
    assert_envs_match(sim, cpu, "reset")
    events = step_pair(sim, cpu, steps=6, gen=torch.Generator().manual_seed(int(continuous)), crowd_every=2)
    assert events["truncated"] == sim.num_envs and events["catches"] >= 1, events
    assert (sim.state.episode.numpy() == 2).all()


def test_more_obstacles_than_agents_terminations_and_frozen_envs():
    # 2 agents, 3 obstacles: thread i draws agent i and obstacles i, i + 2 (striding over entities).
    sim, cpu = make_pair(num_envs=3, num_adversaries=1, num_good=1, num_obstacles=3, autoreset=False,
                         terminate_on_success=True, max_cycles=5)
    for env in (sim, cpu):
        env.reset()
        env.state.pos[1, 0] = env.state.pos[1, 1] + 0.03  # env 1 terminates in the first step
    assert_envs_match(sim, cpu, "reset")
    gen = torch.Generator().manual_seed(2)
    events = step_pair(sim, cpu, steps=6, gen=gen)
    assert events["terminated"] >= 1 and events["truncated"] >= 1, events
    assert (sim._tensors["status"].numpy() != 0).all()  # every env ended and stays frozen
    mask = torch.tensor([False, True, True])
    for env in (sim, cpu):
        env.reset(seed=9, mask=mask)
    assert_envs_match(sim, cpu, "masked reset with a new seed")
    step_pair(sim, cpu, steps=2, gen=gen, where="after reset, ")


def test_more_agents_than_one_block_holds(monkeypatch):
    # 40 agents on 32 threads: threads 0..7 stride over two agents each, across every barrier.
    monkeypatch.setattr(program, "MAX_THREADS_PER_BLOCK", 32)
    sim, cpu = make_pair(num_envs=1, num_adversaries=25, num_good=15, num_obstacles=2, max_cycles=3)
    sim.reset()
    cpu.reset()
    assert_envs_match(sim, cpu, "reset")
    events = step_pair(sim, cpu, steps=3, gen=torch.Generator().manual_seed(4), crowd_every=2)
    assert events["catches"] >= 1 and events["truncated"] == 1
    assert sim.kernel.build("cuda").block_dim == (32, 1, 1)  # the simulator's record of the last launch


def test_reset_launch_arguments_do_not_alias_state():
    # The simulator copies top-level array args back after a launch: the reset's dummy actions must not
    # share memory with an array of the argument tuple (that once undid ``episode += 1`` in tag).
    sim, cpu = make_pair(num_envs=1)
    launches = []
    original = EnvKernel.launch

    def record(kernel, target, *args, **kwargs):
        launches.append(args[2:])
        return original(kernel, target, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(EnvKernel, "launch", record)
        sim.reset()
    arrays, _, actions = launches[0]
    assert not any(np.shares_memory(actions, a) for a in arrays)
    cpu.reset()
    np.testing.assert_array_equal(sim.state.episode.numpy(), cpu.state.episode.numpy())
