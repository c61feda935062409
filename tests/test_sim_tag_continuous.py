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
from gpurl.kernels.neighbors import k_nearest, k_nearest_ref, knn_scratch_shapes
from gpurl.kernels.neighbors_team import k_nearest_team
from gpurl.kernels.program import EnvKernel, per_agent, per_agent_team
from gpurl.kernels.team import team_range
from gpurl.kernels.scratch import lane, num_lanes

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
    # The k-nearest scratch of a team phase: a row per env on both targets (the team holds one agent at a time),
    # row-major (a team writes and reads along one row).
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


# ---- k_nearest's generic (CUDA) version --------------------------------------------------------------------


def _knn_phase(e, i, x, y, alive, k, radius, dist_row, cand_idx, cand_dist, out_idx, found, result):
    r = lane(e, i, x.shape[1])
    found[e, i] = k_nearest(x, y, alive, e, i, k, radius, dist_row, cand_idx, cand_dist, out_idx, r)
    for s in range(k):
        result[e, i, s] = out_idx[r, s]


knn_kernel = EnvKernel("knn_probe", [per_agent(_knn_phase)], nargs=11)


def _run_knn(target, x, y, alive, k, radius, kernel=knn_kernel, rows=None, capacity=None):
    """(found [E, N], the k nearest [E, N, k]) of ``kernel`` (a probe above) over scratch of ``rows`` rows (default:
    a row per lane) and ``capacity`` candidate slots (default: knn_scratch_shapes')."""
    E, N = x.shape
    shapes = knn_scratch_shapes(target, num_lanes(target, E, N) if rows is None else rows, N, k)
    width = shapes["cand_idx"][1] if capacity is None else capacity + 1
    rows = shapes["cand_idx"][0]
    scratch = [np.zeros(shapes["dist_row"], np.float32), np.full((rows, width), -7, np.int32),
               np.zeros((rows, width), np.float32), np.full((rows, width), -7, np.int32)]
    found = np.full((E, N), -7, np.int32)
    result = np.full((E, N, k), -7, np.int32)
    kernel.launch(target, E, N, x, y, alive, np.int32(k), np.float32(radius), *scratch, found, result)
    return found, result


def _knn_case(name):
    rng = np.random.default_rng(5)
    if name == "random_some_dead":  # radius hint too small: grows, then bisects
        x, y = rng.uniform(0, 4, (2, 2, 11)).astype(np.float32)
        alive = (rng.uniform(size=(2, 11)) < 0.7).astype(np.int32)
        return x, y, alive, 3, 0.05
    if name == "crowd_shrinks_radius":  # 39 others inside the hint > capacity 32: bisects down
        x, y = rng.uniform(0, 4, (2, 1, 40)).astype(np.float32)
        return x, y, np.ones((1, 40), np.int32), 3, 100.0
    if name == "lattice_ties":  # exact equal distances at many radii: ties go to the lower index
        g = np.arange(16) % 4
        x, y = g.astype(np.float32)[None], (np.arange(16) // 4).astype(np.float32)[None]
        return x, y, np.ones((1, 16), np.int32), 5, 1.0
    if name == "fewer_alive_than_k":  # -1 padding
        x, y = rng.uniform(0, 4, (2, 1, 6)).astype(np.float32)
        return x, y, np.array([[1, 0, 1, 0, 0, 1]], np.int32), 4, 1.0
    if name == "tied_beyond_capacity":  # 40 at one point: no radius holds <= 32 of 39, exact fallback
        return np.ones((1, 40), np.float32), np.ones((1, 40), np.float32), np.ones((1, 40), np.int32), 3, 0.5
    if name == "more_neighbours_than_threads":  # k = 20 of 40 (capacity 40)
        x, y = rng.uniform(0, 4, (2, 1, 40)).astype(np.float32)
        return x, y, (rng.uniform(size=(1, 40)) < 0.9).astype(np.int32), 20, 0.5
    raise KeyError(name)


KNN_CASES = ["random_some_dead", "crowd_shrinks_radius", "lattice_ties", "fewer_alive_than_k", "tied_beyond_capacity",
             "more_neighbours_than_threads"]


@pytest.mark.parametrize("name", KNN_CASES)
def test_generic_k_nearest_matches_reference(name):
    x, y, alive, k, radius = _knn_case(name)
    E, N = x.shape
    capacity = knn_scratch_shapes("cuda", E * N, N, k)["cand_idx"][1] - 1
    if name == "tied_beyond_capacity":
        assert capacity == 32 < N - 1
    found, result = _run_knn("cuda", x, y, alive, k, radius)
    for e in range(E):
        for i in range(N):
            want = k_nearest_ref(x[e], y[e], alive[e], i, k)
            np.testing.assert_array_equal(result[e, i], want, err_msg=f"{name}: env {e} agent {i}")
            assert found[e, i] == (want >= 0).sum()
    if name == "tied_beyond_capacity":
        np.testing.assert_array_equal(result[0, 0], [1, 2, 3])
        np.testing.assert_array_equal(result[0, 5], [0, 1, 2])


# ---- k_nearest_team: the env's threads together, one agent after another ---------------------------------
# The simulator runs a Python thread per CUDA thread and a barrier costs it milliseconds, so the crowded cases
# are smaller here, with a smaller candidate capacity (the scratch's width) in place of more agents.


def _knn_team_phase(e, i, x, y, alive, k, radius, dist_row, cand_idx, cand_dist, out_idx, found, result):
    found[e, i] = k_nearest_team(x, y, alive, e, i, k, radius, dist_row, cand_idx, cand_dist, out_idx, e)
    for s in team_range(k):
        result[e, i, s] = out_idx[e, s]


knn_team_kernel = EnvKernel("knn_team_probe", [per_agent_team(_knn_team_phase)], nargs=11)


def _knn_team_case(name):
    """(x, y, alive, k, radius hint, candidate capacity or None for knn_scratch_shapes')."""
    rng = np.random.default_rng(7)
    if name == "crowd_shrinks_radius":  # 11 others inside the hint > capacity 6: bisects down
        x, y = rng.uniform(0, 4, (2, 1, 12)).astype(np.float32)
        return x, y, np.ones((1, 12), np.int32), 3, 100.0, 6
    if name == "tied_beyond_capacity":  # 9 at one point: no radius holds <= 4 of 8, exact fallback
        return np.ones((1, 9), np.float32), np.ones((1, 9), np.float32), np.ones((1, 9), np.int32), 3, 0.5, 4
    if name == "more_neighbours_than_threads":  # 40 agents on 32 threads: two chunks a pass, 20 ranks
        x, y, alive, k, radius = _knn_case(name)
        return x, y, alive, k, radius, None
    return (*_knn_case(name), None)


@pytest.mark.parametrize("name", ["random_some_dead", "lattice_ties", "fewer_alive_than_k", "crowd_shrinks_radius",
                                  "tied_beyond_capacity", "more_neighbours_than_threads"])
def test_team_k_nearest_matches_reference(name, monkeypatch):
    monkeypatch.setattr(program, "MAX_THREADS_PER_BLOCK", 32)  # a team of 32 threads (of block_size(N) at most)
    x, y, alive, k, radius, capacity = _knn_team_case(name)
    E, N = x.shape
    found, result = _run_knn("cuda", x, y, alive, k, radius, knn_team_kernel, rows=E, capacity=capacity)
    assert knn_team_kernel.build("cuda").block_dim == (32, 1, 1)
    for e in range(E):
        for i in range(N):
            want = k_nearest_ref(x[e], y[e], alive[e], i, k)
            np.testing.assert_array_equal(result[e, i], want, err_msg=f"{name}: env {e} agent {i}")
            assert found[e, i] == (want >= 0).sum()
    cpu_found, cpu_result = _run_knn("cpu", x, y, alive, k, radius, knn_team_kernel, rows=E, capacity=capacity)
    np.testing.assert_array_equal(cpu_result, result)
    np.testing.assert_array_equal(cpu_found, found)
