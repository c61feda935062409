"""CPU tier: tag_gridworld's CUDA C source (tag_gridworld.cu) built for the host vs the Numba CPU build.

The .cu compiles as plain C++ through gpurl_host.h (HostCudaCModule) and is put behind a CPU env with
``cuda_c.attach``, so it runs through the env's own reset/step/autoreset/out= paths with the exact
arguments a GPU launch gets. Side by side with a Numba env (same params, seed, actions), every buffer
a launch writes must match bit for bit after every step: state, obs, final_obs, global state, final
global state, reward, flags and the internal tags/finished/restart/hit_wall. Block sizes: 1 (each phase
over all agents before the next, the Numba CPU build's order), 4 (< agents: real threads stride over agents across real barriers) and
the GPU's default (32 threads for 13 agents, through run_against_reference vs the NumPy spec).

Cost: one g++ build (~2 s), the Numba CPU build (~13 s when not cached), under a second of stepping.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from gpurl.envs.base import StepOutputs
from gpurl.envs.tag_gridworld.cuda_c import SOURCE, attach, kernel_args
from gpurl.kernels.cuda_c import bind_args, kernel_signatures
from gpurl.kernels.cuda_c_host import HostCudaCModule, find_cxx

from gridworld_harness import STATE_KEYS, make_small, random_actions, run_against_reference

pytestmark = pytest.mark.cpu

# 7 envs x (12 taggers + runner) on a 7 x 7 grid, 9-step episodes: tags and truncations both happen.
PARAMS = dict(num_taggers=12, grid_length=6, episode_length=9)
WRITTEN = ("obs", "final_obs", "reward", "terminated", "truncated", "global_state",
           "final_global_state")  # and every array of env._tensors


@pytest.fixture(scope="module")
def host():
    if find_cxx() is None:
        pytest.skip("no C++ compiler for the host build (install g++ or set CXX)")
    module = HostCudaCModule(path=SOURCE)
    module.build()
    assert module.build_log == ""  # no g++ warnings
    return module


def make_pair(host, block, **overrides):
    """(CUDA C host build, Numba CPU build) envs with the same params."""
    params = {**PARAMS, **overrides}
    c_env, numba_env = make_small(**params), make_small(**params)
    attach(c_env, host, block)
    return c_env, numba_env


def assert_envs_match(c_env, numba_env, where: str) -> None:
    for k in STATE_KEYS:
        np.testing.assert_array_equal(getattr(c_env.state, k).numpy(), getattr(numba_env.state, k).numpy(),
                                      err_msg=f"{where}: state.{k}")
    for name in WRITTEN:
        if getattr(numba_env, name) is None:  # global_state=False
            assert getattr(c_env, name) is None, f"{where}: {name}"
            continue
        np.testing.assert_array_equal(getattr(c_env, name).numpy(), getattr(numba_env, name).numpy(),
                                      err_msg=f"{where}: {name}")
    for name in numba_env._tensors:  # the declared arrays and the toolkit's flags (tags, hit_wall, status, restart, ...)
        np.testing.assert_array_equal(c_env._tensors[name].numpy(), numba_env._tensors[name].numpy(),
                                      err_msg=f"{where}: {name}")


def step_pair(c_env, numba_env, steps, gen, dtype=torch.int64, where="") -> np.ndarray:
    events = np.zeros(2, dtype=int)
    for t in range(steps):
        actions = random_actions(numba_env, gen, dtype)
        c_env.step(actions)
        numba_env.step(actions)
        assert_envs_match(c_env, numba_env, f"{where}step {t}")
        events += [int(numba_env.terminated.sum()), int(numba_env.truncated.sum())]
    return events


def test_kernel_parameters_are_the_layout_fields_in_order():
    params = kernel_signatures(SOURCE.read_text())["tag_gridworld_step"]
    env = make_small(**PARAMS)  # the env's buffers and constants pass every dtype check
    arrays, consts = env.kernel_tensors(), env._consts
    names = ("num_envs", "num_agents", "obs_dim", *arrays._fields, *consts._fields, "actions", "action_bytes")
    assert tuple(p.name for p in params) == names
    args = kernel_args(arrays, consts, env.obs_dim, torch.zeros(7, 13, 1, dtype=torch.int32))
    assert len(bind_args("tag_gridworld_step", params, args, "cpu")) == len(names)


@pytest.mark.parametrize("block", [1, 4], ids=["block1", "block4"])
@pytest.mark.parametrize("full", [True, False], ids=["full_obs", "partial_obs"])
def test_host_build_matches_numba_build_across_autoresets(host, full, block):
    c_env, numba_env = make_pair(host, block, use_full_observation=full)
    c_env.reset()
    numba_env.reset()
    assert_envs_match(c_env, numba_env, "reset")
    tags, truncations = step_pair(c_env, numba_env, steps=30, gen=torch.Generator().manual_seed(0))
    assert tags >= 3 and truncations >= 3
    assert (c_env.state.episode.numpy() >= 3).all()  # every env crossed at least two autoresets


def test_without_global_state_the_host_build_matches_both_numba_builds(host):
    """global_state=False: the .cu gets write_global_state = 0 and writes no state into the [E, 0] buffers
    (an out-of-bounds write would corrupt the heap or fail under ASan); obs, flags and state as the Numba
    build with and without the global state."""
    c_env, numba_env = make_pair(host, 4, global_state=False)
    with_state = make_small(**PARAMS)
    assert c_env.global_state is None and c_env._consts.write_global_state == 0
    gen = torch.Generator().manual_seed(0)
    for env in (c_env, numba_env, with_state):
        env.reset()
    for t in range(12):
        actions = random_actions(numba_env, gen)
        for env in (c_env, numba_env):
            _, _, _, _, info = env.step(actions)
            assert "final_global_state" not in info
        with_state.step(actions)
        assert_envs_match(c_env, numba_env, f"step {t}")
        for name in ("obs", "final_obs", "reward", "terminated", "truncated"):
            np.testing.assert_array_equal(getattr(c_env, name).numpy(), getattr(with_state, name).numpy(),
                                          err_msg=f"step {t}: {name} vs global_state=True")
    assert (c_env.state.episode.numpy() >= 2).all()  # every env crossed an autoreset


def test_host_build_with_the_gpu_block_size_equals_the_reference(host):
    env = make_small(**PARAMS, env_id_offset=5)
    attach(env, host)  # block_size(13) = 32 threads, as on the GPU
    terminated, truncated = run_against_reference(env, steps=12, seed=4)
    assert terminated >= 1 and truncated >= 1


def test_frozen_envs_masked_reseed_int32_actions_and_out_match_numba_build(host):
    c_env, numba_env = make_pair(host, 4, autoreset=False, use_full_observation=False, random_start=False)
    gen = torch.Generator().manual_seed(1)
    for env in (c_env, numba_env):
        env.reset()
    ends = step_pair(c_env, numba_env, steps=12, gen=gen, dtype=torch.int32, where="frozen after their end, ")
    assert ends.sum() >= 7 and c_env._tensors["status"].numpy().all()
    mask = torch.tensor([False, True, False, True, False, False, True])
    for env in (c_env, numba_env):
        env.reset(seed=11, mask=mask)
    assert_envs_match(c_env, numba_env, "masked reset with a new seed")
    # out=: the step writes into caller-owned buffers instead of the env's own obs/reward/flags
    outs = []
    for env in (c_env, numba_env):
        E, N, D = env.num_envs, env.num_agents, env.obs_dim
        S = env.global_state_dim
        outs.append(StepOutputs(obs=torch.full((E, N, D), -1.0), reward=torch.full((E, N), -1.0),
                                terminated=torch.ones(E, dtype=torch.bool), truncated=torch.ones(E, dtype=torch.bool),
                                final_obs=torch.full((E, N, D), -1.0), global_state=torch.full((E, S), -1.0),
                                final_global_state=torch.full((E, S), -1.0)))
    actions = random_actions(numba_env, gen, torch.int32)
    for env, out in zip((c_env, numba_env), outs):
        env.step(actions, out=out)
    for name in StepOutputs._fields:
        np.testing.assert_array_equal(getattr(outs[0], name).numpy(), getattr(outs[1], name).numpy(), err_msg=name)
    assert_envs_match(c_env, numba_env, "after a step with out=")
    np.testing.assert_array_equal(outs[0].reward.numpy()[~mask.numpy()], 0)  # frozen envs: reward 0


def test_steps_after_the_first_are_prepared_and_neither_check_nor_pack_arguments(host, monkeypatch):
    # The prepared launch (issue 42): after a constants tuple's first step, a step rewrites the actions' and the
    # outputs' pointers in the block packed then and hands it to the kernel (cuLaunchKernel's convention; here
    # the host build). The checks and the packing of an ordinary launch are patched to fail after that step.
    import gpurl.kernels.cuda_c as cuda_c
    import gpurl.kernels.cuda_c_host as cuda_c_host

    c_env, numba_env = make_pair(host, 4)
    assert c_env.launch_path == "cpu: CUDA C built for the host (g++, tests), prepared launches"
    gen = torch.Generator().manual_seed(2)
    for env in (c_env, numba_env):
        env.reset()
    step_pair(c_env, numba_env, steps=1, gen=gen, where="the ordinary first step, ")

    def refuse(*args, **kwargs):
        raise AssertionError("a prepared step checked or packed its arguments")

    for module in (cuda_c, cuda_c_host):
        monkeypatch.setattr(module, "bind_args", refuse)
    monkeypatch.setattr(HostCudaCModule, "launch", refuse)
    ends = step_pair(c_env, numba_env, steps=14, gen=gen, where="prepared, ")
    assert ends.sum() >= 3  # autoresets inside prepared steps
    # out=: the prepared block's output pointers are the env's own; a step with out= writes the caller's buffers,
    # and the next step without it the env's own again
    E, N, D = c_env.num_envs, c_env.num_agents, c_env.obs_dim
    S = c_env.global_state_dim
    outs = [StepOutputs(obs=torch.full((E, N, D), -1.0), reward=torch.full((E, N), -1.0),
                        terminated=torch.ones(E, dtype=torch.bool), truncated=torch.ones(E, dtype=torch.bool),
                        final_obs=torch.full((E, N, D), -1.0), global_state=torch.full((E, S), -1.0),
                        final_global_state=torch.full((E, S), -1.0)) for _ in range(2)]
    own_obs = c_env.obs.clone()
    actions = random_actions(numba_env, gen)
    for env, out in zip((c_env, numba_env), outs):
        env.step(actions, out=out)
    for name in StepOutputs._fields:
        np.testing.assert_array_equal(getattr(outs[0], name).numpy(), getattr(outs[1], name).numpy(), err_msg=name)
    assert torch.equal(c_env.obs, own_obs)  # the env's own obs untouched by a step with out=
    step_pair(c_env, numba_env, steps=2, gen=gen, where="prepared, after out=, ")


def test_without_preparing_every_step_checks_its_arguments(host, monkeypatch):
    c_env = make_small(**PARAMS)
    attach(c_env, host, 4, prepare=False)
    assert c_env.launch_path == "cpu: CUDA C built for the host (g++, tests)"
    c_env.reset()
    calls = []
    original = HostCudaCModule.launch
    monkeypatch.setattr(HostCudaCModule, "launch", lambda self, *a, **k: (calls.append(a[0]), original(self, *a, **k)))
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        c_env.step(random_actions(c_env, gen))
    assert calls == ["tag_gridworld_step"] * 3


def test_only_pointer_arguments_may_vary_in_a_prepared_launch(host):
    env = make_small(**PARAMS)
    args = kernel_args(env.kernel_tensors(), env._consts, env.obs_dim, torch.zeros(7, 13, 1, dtype=torch.int64))
    with pytest.raises(ValueError, match="argument 2 cannot vary in a prepared launch"):
        host.prepare("tag_gridworld_step", 7, 4, args, varying=(2,))  # obs_dim, an int parameter
    with pytest.raises(ValueError, match="a prepared launch is 1-D"):
        host.prepare("tag_gridworld_step", (7, 2), 4, args, varying=(3,))
