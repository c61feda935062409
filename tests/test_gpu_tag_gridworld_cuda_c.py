"""GPU tier: tag_gridworld's CUDA C build (CuPy) vs its Numba CUDA build on the device (skips without CUDA).

Both envs get the same params, seed and actions; every buffer a launch writes must match exactly:
integers (state, flags, RNG draws) bit for bit, and the floats too, since the only float arithmetic is
float32 division (obs) and table lookups (reward), correctly rounded on both builds. Also: the CUDA C
build against the NumPy spec, more agents than a block, int32 actions, out=, frozen envs and masked
reseeding, a launch recorded by a CUDA-graph capture (so it runs on torch's current stream), and the
loader itself (gpurl.cuh's RNG on the device, argument checks with CUDA tensors).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import gpurl
from gpurl.envs.base import StepOutputs
from gpurl.kernels.cuda_c import CudaCModule

from cuda_c_kernels import (SEEDS, SOURCE, assert_rng_matches_reference, doc_cuda_sources, rng_keys, run_rng,
                            run_walk_against_reference)
from gridworld_harness import STATE_KEYS, make_small, random_actions, run_against_reference

pytestmark = pytest.mark.gpu

PARAMS = dict(num_taggers=12, grid_length=6, episode_length=9)
WRITTEN = ("obs", "final_obs", "reward", "terminated", "truncated", "global_state",
           "final_global_state")  # and every array of env._tensors


def make_pair(device, **overrides):
    params = {**PARAMS, **overrides}
    c_env = make_small(device=device, kernel_source="cuda_c", **params)
    numba_env = make_small(device=device, **params)
    assert (c_env.kernel_language, numba_env.kernel_language) == ("cuda_c", "numba")
    return c_env, numba_env


def assert_envs_match(c_env, numba_env, where: str) -> None:
    for k in STATE_KEYS:
        np.testing.assert_array_equal(getattr(c_env.state, k).cpu().numpy(), getattr(numba_env.state, k).cpu().numpy(),
                                      err_msg=f"{where}: state.{k}")
    for name in WRITTEN:
        if getattr(numba_env, name) is None:  # global_state=False
            assert getattr(c_env, name) is None, f"{where}: {name}"
            continue
        np.testing.assert_array_equal(getattr(c_env, name).cpu().numpy(), getattr(numba_env, name).cpu().numpy(),
                                      err_msg=f"{where}: {name}")
    for name in numba_env._tensors:  # the declared arrays and the toolkit's flags (tags, hit_wall, status, restart, ...)
        np.testing.assert_array_equal(c_env._tensors[name].cpu().numpy(), numba_env._tensors[name].cpu().numpy(),
                                      err_msg=f"{where}: {name}")


def step_pair(c_env, numba_env, steps, gen, dtype=torch.int64, where="") -> np.ndarray:
    events = np.zeros(2, dtype=int)
    for t in range(steps):
        actions = random_actions(numba_env, gen, dtype).to(numba_env.device)
        c_env.step(actions)
        numba_env.step(actions)
        assert_envs_match(c_env, numba_env, f"{where}step {t}")
        events += [int(numba_env.terminated.sum()), int(numba_env.truncated.sum())]
    return events


@pytest.mark.parametrize("full, state", [(True, True), (False, True), (False, False)],
                         ids=["full_obs", "partial_obs", "partial_obs-no_global_state"])
def test_cuda_c_build_matches_numba_cuda_build_across_autoresets(requires_cuda, full, state):
    c_env, numba_env = make_pair(requires_cuda, use_full_observation=full, global_state=state)
    c_env.reset()
    numba_env.reset()
    assert_envs_match(c_env, numba_env, "reset")
    tags, truncations = step_pair(c_env, numba_env, steps=30, gen=torch.Generator().manual_seed(0))
    assert tags >= 3 and truncations >= 3


@pytest.mark.parametrize("full", [True, False], ids=["full_obs", "partial_obs"])
def test_cuda_c_build_equals_reference(requires_cuda, full):
    env = make_small(device=requires_cuda, kernel_source="cuda_c", use_full_observation=full, env_id_offset=3)
    terminated, truncated = run_against_reference(env, steps=30)
    assert terminated >= 1 and truncated >= 1


def test_more_agents_than_a_block_matches_numba_build(requires_cuda):
    # 300 agents > 256 threads per block: threads stride over agents across every barrier.
    c_env, numba_env = make_pair(requires_cuda, num_envs=3, num_taggers=299, grid_length=20, episode_length=4)
    c_env.reset()
    numba_env.reset()
    assert_envs_match(c_env, numba_env, "reset")
    step_pair(c_env, numba_env, steps=6, gen=torch.Generator().manual_seed(1))


def test_frozen_envs_masked_reseed_int32_actions_and_out_match_numba_build(requires_cuda):
    c_env, numba_env = make_pair(requires_cuda, autoreset=False, use_full_observation=False, random_start=False)
    gen = torch.Generator().manual_seed(1)
    for env in (c_env, numba_env):
        env.reset()
    ends = step_pair(c_env, numba_env, steps=12, gen=gen, dtype=torch.int32, where="frozen after their end, ")
    assert ends.sum() >= 7
    mask = torch.tensor([False, True, False, True, False, False, True], device=requires_cuda)
    for env in (c_env, numba_env):
        env.reset(seed=11, mask=mask)
    assert_envs_match(c_env, numba_env, "masked reset with a new seed")
    actions = random_actions(numba_env, gen, torch.int32).to(requires_cuda)
    outs = []
    for env in (c_env, numba_env):
        E, N, D = env.num_envs, env.num_agents, env.obs_dim
        dev = requires_cuda
        out = StepOutputs(obs=torch.zeros(E, N, D, device=dev), reward=torch.zeros(E, N, device=dev),
                          terminated=torch.zeros(E, dtype=torch.bool, device=dev),
                          truncated=torch.zeros(E, dtype=torch.bool, device=dev),
                          final_obs=torch.zeros(E, N, D, device=dev),
                          global_state=torch.zeros(E, env.global_state_dim, device=dev),
                          final_global_state=torch.zeros(E, env.global_state_dim, device=dev))
        env.step(actions, out=out)
        outs.append(out)
    for name in StepOutputs._fields:
        np.testing.assert_array_equal(getattr(outs[0], name).cpu().numpy(), getattr(outs[1], name).cpu().numpy(),
                                      err_msg=name)
    assert_envs_match(c_env, numba_env, "after a step with out=")


def test_cuda_graph_replays_the_cuda_c_step_on_torchs_stream(requires_cuda):
    # A launch on any stream but the capturing one would not be recorded (or would break the capture).
    c_env, numba_env = make_pair(requires_cuda, num_envs=64, validate=False)
    actions = torch.zeros(64, c_env.num_agents, 1, dtype=torch.int64, device=requires_cuda)
    gen = torch.Generator().manual_seed(2)
    for env in (c_env, numba_env):
        env.reset()
    c_env.step(actions)  # warm-up: compile and load the module before capturing
    numba_env.step(actions)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # makes its capture stream torch's current stream
        c_env.step(actions)
    assert_envs_match(c_env, numba_env, "after capture (nothing ran)")
    for t in range(5):
        actions.copy_(random_actions(c_env, gen).to(requires_cuda))
        graph.replay()
        numba_env.step(actions)
        torch.cuda.synchronize()
        assert_envs_match(c_env, numba_env, f"replay {t}")


@pytest.mark.parametrize("seed", SEEDS)
def test_gpurl_cuh_rng_on_the_device_equals_gpurl_kernels_rng(requires_cuda, seed):
    module = CudaCModule(SOURCE)
    keys = rng_keys()
    for below_n in (1, 7, 2**24 + 1):
        assert_rng_matches_reference(run_rng(module, seed, keys, below_n, requires_cuda), seed, keys, below_n)


def test_loader_checks_cuda_arguments_and_reduces_with_threads(requires_cuda):
    module = CudaCModule(SOURCE)
    dev = requires_cuda
    values = (torch.arange(5 * 37, dtype=torch.int32, device=dev).reshape(5, 37) - 50)
    sums = torch.zeros(5, dtype=torch.int64, device=dev)
    count = torch.zeros(1, dtype=torch.int32, device=dev)
    module.launch("row_sums", 5, 64, (5, 37, 3, values, sums, count))
    torch.testing.assert_close(sums, (values.to(torch.int64) * 3).sum(dim=1), rtol=0, atol=0)
    assert int(count) == 5 * 64
    with pytest.raises(TypeError, match=r"argument 3 \(values\) must be a torch.int32 tensor"):
        module.launch("row_sums", 5, 64, (5, 37, 3, values.float(), sums, count))
    with pytest.raises(ValueError, match=r"argument 4 \(sums\) must be a cuda tensor"):
        module.launch("row_sums", 5, 64, (5, 37, 3, values, sums.cpu(), count))
    with pytest.raises(ValueError, match=r"argument 3 \(values\) must be contiguous"):
        module.launch("row_sums", 5, 64, (5, 37, 3, values.t(), sums, count))


def test_docs_walk_example_equals_its_numpy_reference_on_the_device(requires_cuda):
    assert run_walk_against_reference(CudaCModule(doc_cuda_sources()[0]), requires_cuda, block=32) >= 20


def test_prepared_cuda_c_steps_neither_check_nor_pack_and_match_numba_build(requires_cuda, monkeypatch):
    # Issue 42: after the first step, a step rewrites the actions' and outputs' pointers in the block packed
    # then and calls cuLaunchKernel; CuPy's launch and the argument checks are patched to fail after that step.
    import gpurl.kernels.cuda_c as cuda_c

    c_env, numba_env = make_pair(requires_cuda, num_envs=300)
    assert c_env.launch_path == "cuda: CUDA C via CuPy, prepared launches"
    gen = torch.Generator().manual_seed(3)
    for env in (c_env, numba_env):
        env.reset()
    step_pair(c_env, numba_env, steps=1, gen=gen, where="the ordinary first step, ")

    def refuse(*args, **kwargs):
        raise AssertionError("a prepared step checked or packed its arguments")

    monkeypatch.setattr(cuda_c, "bind_args", refuse)
    monkeypatch.setattr(CudaCModule, "launch", refuse)
    ends = step_pair(c_env, numba_env, steps=20, gen=gen, where="prepared, ")
    assert ends.sum() >= 3
