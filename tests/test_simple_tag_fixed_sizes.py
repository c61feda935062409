"""simple_tag's CPU build with the world sizes compiled in (large batches) computes the same bits as the
build with run-time sizes that small batches use: the same float operations in the same order, only
unrolled (the agent loops too, inlined into one env-major loop). Every output and state array is compared exactly, step after step, through contacts, catches,
autoresets and (for continuous actions) terminations.

Cost: one compile of the fixed-size kernel per world size and action dtype (~15-40 s on 2 vCPUs), three here.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import gpurl
from gpurl.envs import base
from gpurl.envs.mpe import simple_tag as simple_tag_module
from gpurl.envs.mpe.simple_tag import FIXED_SIZE_LIMIT, FIXED_SIZE_MIN_ENVS, SimpleTagParams, fixed_sizes
from gpurl.kernels.program import FIXED_AGENTS

from simple_tag_harness import STATE_KEYS, crowd, random_actions

pytestmark = pytest.mark.cpu

WORLDS = {
    "3v1v2_discrete": dict(num_adversaries=3, num_good=1, num_obstacles=2, max_cycles=7),
    "2v3v0_continuous_terminating": dict(num_adversaries=2, num_good=3, num_obstacles=0, max_cycles=9,
                                         continuous_actions=True, terminate_on_success=True),
}


def _pair(world: dict, monkeypatch) -> tuple:
    """(run-time sizes, fixed sizes): the same 12 envs, the second forced onto the fixed-size build."""
    runtime = gpurl.make("simple_tag", num_envs=12, seed=5, **world)
    monkeypatch.setattr(simple_tag_module, "FIXED_SIZE_MIN_ENVS", 1)
    monkeypatch.setattr(base, "FIXED_AGENTS_MIN_ENVS", 1)
    fixed = gpurl.make("simple_tag", num_envs=12, seed=5, **world)
    constants = dict(fixed._build_constants)
    assert runtime._build_constants == () and constants["SIMPLE_TAG_AGENTS"] == constants[FIXED_AGENTS] == fixed.num_agents
    return runtime, fixed


@pytest.mark.parametrize("world", WORLDS, ids=str)
def test_fixed_size_build_is_bit_identical_to_the_run_time_size_build(world, monkeypatch):
    runtime, fixed = _pair(WORLDS[world], monkeypatch)
    for env in (runtime, fixed):
        env.reset()
    gen = torch.Generator().manual_seed(11)
    ended = catches = 0
    for t in range(30):
        if t % 6 == 0:  # crowd some envs: deep and shallow contacts, catches
            crowd(runtime, torch.Generator().manual_seed(t), range(0, 12, 2))
            for k in ("pos", "vel", "landmark_pos"):
                getattr(fixed.state, k).copy_(getattr(runtime.state, k))
        actions = random_actions(runtime, gen)
        out_r = runtime.step(actions)
        out_f = fixed.step(actions)
        for name, a, b in zip(("obs", "reward", "terminated", "truncated"), out_r[:4], out_f[:4]):
            assert torch.equal(a, b), (t, name)
        assert torch.equal(out_r[4]["final_obs"], out_f[4]["final_obs"]), t
        for k in STATE_KEYS:
            assert torch.equal(getattr(runtime.state, k), getattr(fixed.state, k)), (t, k)
        ended += int((out_r[2] | out_r[3]).sum())
        catches += int(runtime.step_metrics()["collisions"].sum())
    assert ended > 0 and catches > 0  # the runs went through autoresets and catches
    key = ("cpu", fixed._build_constants)
    assert key in fixed.kernel._builds  # the fixed build ran, not the shared one


def test_fixed_size_build_reads_int32_and_int64_actions_alike(monkeypatch):
    """int32 actions are widened into the env's int64 buffer, so the kernel has one action dtype (one build;
    no int32 clamp for sm_90's ptxas to get wrong): int32 and int64 actions give the same steps."""
    monkeypatch.setattr(simple_tag_module, "FIXED_SIZE_MIN_ENVS", 1)
    monkeypatch.setattr(base, "FIXED_AGENTS_MIN_ENVS", 1)
    wide, narrow = (gpurl.make("simple_tag", num_envs=12, seed=5, **WORLDS["3v1v2_discrete"]) for _ in range(2))
    assert wide._build_constants
    for env in (wide, narrow):
        env.reset()
    seen = []
    direct = narrow.launcher.direct
    monkeypatch.setattr(narrow.launcher, "direct",
                        lambda key, *args: (seen.append((key, args[-1])), direct(key, *args)))
    gen = torch.Generator().manual_seed(3)
    for t in range(10):  # crosses the autoreset at step 7
        actions = random_actions(wide, gen)
        for name, a, b in zip(("obs", "reward", "terminated", "truncated"), wide.step(actions)[:4],
                              narrow.step(actions.to(torch.int32))[:4]):
            assert torch.equal(a, b), (t, name)
    assert {key for key, _ in seen} == {(np.dtype(np.int64), 3)}  # the kernel never saw int32
    assert len({arr.ctypes.data for _, arr in seen}) == 1  # one buffer of the env's, rewritten each step
    for k in STATE_KEYS:
        assert torch.equal(getattr(wide.state, k), getattr(narrow.state, k)), k


def test_fixed_sizes_only_for_large_cpu_batches_of_small_worlds():
    small = SimpleTagParams.from_kwargs(num_adversaries=3, num_good=1, num_obstacles=2)
    assert dict(fixed_sizes(small, "cpu", FIXED_SIZE_MIN_ENVS)) == {
        "SIMPLE_TAG_AGENTS": 4, "SIMPLE_TAG_OBSTACLES": 2, "SIMPLE_TAG_ADVERSARIES": 3}
    assert fixed_sizes(small, "cpu", FIXED_SIZE_MIN_ENVS - 1) == {}
    assert fixed_sizes(small, "cuda", 4096) == {}
    big = SimpleTagParams.from_kwargs(num_adversaries=10, num_good=FIXED_SIZE_LIMIT, num_obstacles=2)
    assert fixed_sizes(big, "cpu", 4096) == {}
    many_obstacles = SimpleTagParams.from_kwargs(num_obstacles=FIXED_SIZE_LIMIT + 1)
    assert fixed_sizes(many_obstacles, "cpu", 4096) == {}


def test_fixed_size_env_matches_the_reference_through_reset():
    """A 256-env batch (the fixed build, chosen by size alone) starts exactly as the reset draws say."""
    from simple_tag_reference import observe_ref, reset_ref

    env = gpurl.make("simple_tag", num_envs=FIXED_SIZE_MIN_ENVS, seed=2)
    assert env._build_constants != ()
    obs = env.reset()
    state = reset_ref(env.params, env.num_envs, 2, np.zeros(env.num_envs, np.int32))
    np.testing.assert_array_equal(env.state.pos.numpy(), state["pos"])
    np.testing.assert_allclose(obs.numpy(), observe_ref(env.params, state), rtol=0, atol=1e-7)
