"""Sim tier: tag_continuous's CUDA build in Numba's simulator vs its CPU build, in one process.

Both envs get the same params, seed and actions; integers (state, flags, tag bookkeeping) must match
exactly, floats within FLOAT_ATOL. They cannot match bit for bit: the CUDA build's cos32/sin32 is a
float32 polynomial (<= ~1.5 ulp from the CPU build's correctly rounded values; see gpurl.kernels.math32),
so positions drift by an ulp or so. Runs are short and the seeds are ones where that drift flips no
discrete decision (tag radius, wall hit, k-nearest order): a flip would show as an integer mismatch or
a float error of order 1, not as a tolerance problem.

Cost: the simulator runs one Python thread per CUDA thread (~1e3 agent-steps/s), and the CPU build of
the tag_continuous kernel takes about a minute to compile on the first launch in this process (shared by every
test here: builds are cached per kernel and argument types, so everything uses int64 actions).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import gpurl
import gpurl.kernels.program as program
from gpurl.envs.tag_continuous import TagContinuous
from gpurl.kernels.program import EnvKernel

from tag_harness import random_actions

pytestmark = [
    pytest.mark.sim,
    # uint64 hashing wraps on purpose; the simulator evaluates it with NumPy scalars, which warn.
    pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning"),
]

FLOAT_ATOL = 1e-5
FLOAT_STATE = ("x", "y", "speed", "direction", "acceleration")
INT_STATE = ("alive", "num_runners", "timestep", "episode")
# 2 envs x (2 taggers + 5 runners) on a 5 x 5 grid; tag radius 0.15 * 5 = 0.75 so that tags happen
# within a few steps; episode_length 6, so 8 steps cross an autoreset.
SMALL = dict(num_taggers=2, num_runners=5, grid_length=5.0, episode_length=6, tagging_distance=0.15,
             max_acceleration=0.5, min_acceleration=-0.5)


# ---- regression: the reset kernel's dummy actions must not alias a state array ----------------------------
# (the simulator copies top-level array args back after a launch, which once undid ``episode += 1``)


def _aliased_top_level_args(args) -> list[str]:
    """Names of top-level ndarray args that share memory with an array inside a NamedTuple arg."""
    inner = [(f"{type(a).__name__}.{name}", v) for a in args if hasattr(a, "_fields")
             for name, v in zip(a._fields, a) if isinstance(v, np.ndarray)]
    return [f"arg {k} aliases {name}" for k, a in enumerate(args) if isinstance(a, np.ndarray)
            for name, v in inner if np.shares_memory(a, v)]


# ---- helpers ----------------------------------------------------------------------------------------------


def make_pair(num_envs=2, seed=3, **overrides):
    params = {**SMALL, **overrides}
    sim = gpurl.make("tag_continuous", num_envs=num_envs, device="cpu", target="cuda", seed=seed, **params)
    cpu = gpurl.make("tag_continuous", num_envs=num_envs, device="cpu", target="cpu", seed=seed, **params)
    assert (sim.target, cpu.target) == ("cuda", "cpu")
    return sim, cpu


def assert_envs_match(sim, cpu, where: str) -> None:
    """Everything a step writes: integers exactly, floats within FLOAT_ATOL."""
    for k in INT_STATE:
        np.testing.assert_array_equal(getattr(sim.state, k).numpy(), getattr(cpu.state, k).numpy(),
                                      err_msg=f"{where}: state.{k}")
    for name in ("terminated", "truncated"):
        np.testing.assert_array_equal(getattr(sim, name).numpy(), getattr(cpu, name).numpy(),
                                      err_msg=f"{where}: {name}")
    for name in ("status", "tagged_by", "tags"):
        np.testing.assert_array_equal(sim._tensors[name].numpy(), cpu._tensors[name].numpy(),
                                      err_msg=f"{where}: {name}")
    floats = {f"state.{k}": (getattr(sim.state, k), getattr(cpu.state, k)) for k in FLOAT_STATE}
    floats.update(obs=(sim.obs, cpu.obs), reward=(sim.reward, cpu.reward),
                  final_obs=(sim.final_obs, cpu.final_obs), global_state=(sim.global_state, cpu.global_state),
                  final_global_state=(sim.final_global_state, cpu.final_global_state))
    for name, (got, want) in floats.items():
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=FLOAT_ATOL,
                                   err_msg=f"{where}: {name}")


def step_pair(sim, cpu, steps: int, gen: torch.Generator, where: str = "") -> dict[str, int]:
    """Step both envs with the same random actions; compare after every step. Returns event counts."""
    events = dict(tags=0, terminated=0, truncated=0)
    for t in range(steps):
        actions = random_actions(cpu, gen)
        _, _, term, trunc, info = sim.step(actions)
        _, _, term_cpu, trunc_cpu, info_cpu = cpu.step(actions)
        assert_envs_match(sim, cpu, f"{where}step {t}")
        assert info["final_obs"] is sim.final_obs and info_cpu["final_obs"] is cpu.final_obs
        events["tags"] += int(cpu.step_metrics()["tags"].sum())
        events["terminated"] += int(term_cpu.sum())
        events["truncated"] += int(trunc_cpu.sum())
    return events


# ---- tests ------------------------------------------------------------------------------------------------


def test_both_builds_run_in_the_simulator_process():
    import numba

    assert numba.config.ENABLE_CUDASIM
    kernel = make_pair(num_envs=1)[0].kernel
    assert type(kernel.build("cuda")).__module__.startswith("numba.cuda.simulator")
    # The CPU target ignores NUMBA_ENABLE_CUDASIM: a real njit(parallel=True) build.
    assert isinstance(kernel.build("cpu"), numba.core.registry.CPUDispatcher)


@pytest.mark.parametrize("full", [True, False], ids=["full_obs", "k_nearest"])
def test_simulator_matches_cpu_build_across_autoreset(full):
    sim, cpu = make_pair(use_full_observation=full, num_other_agents_observed=3)
    # The k-nearest scratch of a team phase: a row per team, and 7 agents make one team (a warp) an env, so a row
    # per env on both targets; row-major (a team writes and reads along one row).
    for name in ("cand_idx", "cand_dist", "nbr_idx"):
        assert sim._tensors[name].shape == cpu._tensors[name].shape, name
        assert sim._tensors[name].shape[0] == sim.num_envs and sim._tensors[name].is_contiguous(), name
    sim.reset()
    cpu.reset()
    assert_envs_match(sim, cpu, "reset")
    events = step_pair(sim, cpu, steps=8, gen=torch.Generator().manual_seed(0))
    assert events["truncated"] == sim.num_envs  # both envs crossed the autoreset at step 6
    assert events["tags"] >= 1
    assert (sim.state.episode.numpy() == 2).all()


def test_two_teams_an_env_match_cpu_build():
    """40 agents: a block of two warps an env, each warp a team observing every other agent (with k = 4 of 39),
    at once, in a scratch row of its own."""
    sim, cpu = make_pair(num_envs=1, num_taggers=4, num_runners=36, grid_length=8.0, use_full_observation=False,
                         num_other_agents_observed=4)
    assert sim.kernel.geometry(1, 40)[1] == 64
    assert sim._tensors["nbr_idx"].shape[0] == 2 and cpu._tensors["nbr_idx"].shape[0] == 1
    sim.reset()
    cpu.reset()
    assert_envs_match(sim, cpu, "reset")
    step_pair(sim, cpu, steps=3, gen=torch.Generator().manual_seed(2))


def test_masked_reset_and_reseed_match_cpu_build():
    sim, cpu = make_pair(num_envs=3, use_full_observation=False, num_other_agents_observed=2)
    gen = torch.Generator().manual_seed(1)
    for env in (sim, cpu):
        env.reset()
    step_pair(sim, cpu, steps=2, gen=gen, where="before masked reset, ")
    mask = torch.tensor([False, True, False])
    for env in (sim, cpu):
        env.reset(mask=mask)
    assert_envs_match(sim, cpu, "masked reset")
    np.testing.assert_array_equal(sim.state.timestep.numpy(), [2, 0, 2])
    np.testing.assert_array_equal(sim.state.episode.numpy(), [1, 2, 1])
    step_pair(sim, cpu, steps=1, gen=gen, where="after masked reset, ")
    mask = torch.tensor([True, False, True])
    for env in (sim, cpu):
        env.reset(seed=11, mask=mask)
    assert_envs_match(sim, cpu, "masked reset with a new seed")
    np.testing.assert_array_equal(sim.state.episode.numpy(), [1, 2, 1])
    step_pair(sim, cpu, steps=2, gen=gen, where="after reseed, ")


def test_more_agents_than_one_block_holds(monkeypatch):
    # 40 agents on 32 threads: threads 0..7 stride over two agents each, across every barrier.
    # block_size() reads MAX_THREADS_PER_BLOCK at launch, so patching before the launch is enough.
    monkeypatch.setattr(program, "MAX_THREADS_PER_BLOCK", 32)
    assert program.block_size(40) == 32
    sim, cpu = make_pair(num_envs=1, num_runners=38, grid_length=8.0, tagging_distance=0.1,
                         use_full_observation=False, num_other_agents_observed=3)
    sim.reset()
    cpu.reset()
    assert_envs_match(sim, cpu, "reset")
    events = step_pair(sim, cpu, steps=3, gen=torch.Generator().manual_seed(2))
    assert events["tags"] >= 1
    assert sim.kernel.build("cuda").block_dim == (32, 1, 1)  # the simulator's record of the last launch


def test_reset_episode_counter_in_simulator():
    sim, cpu = make_pair(num_envs=1)
    launches = []
    original = EnvKernel.launch

    def record(kernel, target, *args, **kwargs):
        launches.append(args[2:])
        return original(kernel, target, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(EnvKernel, "launch", record)
        sim.reset()
    cpu.reset()
    assert _aliased_top_level_args(launches[0]) == []
    np.testing.assert_array_equal(sim.state.episode.numpy(), cpu.state.episode.numpy())
