"""No Python input can crash the process (issue 21): docs/specs/API.md, "Errors".

- Action, ``out=`` and mask metadata (shape, dtype, device, layout) are checked in both validate modes,
  and out-of-range discrete actions with ``validate=False`` step as the same actions clamped into 0..n-1:
  for each built-in env in a child process (tests/unvalidated_inputs_worker.py), so a segfault fails the
  test instead of ending pytest.
- tag_gridworld's CUDA C twin (host build) clamps exactly as the Numba build does.
- Assigning a tensor to an ``env.state`` field copies it in after the same metadata checks.
- ``env_id_offset`` is refused outside the ids the counter RNG keys exactly.

Cost: each child compiles its env (~20-40 s of CPU on 2 vCPUs); the rest takes a few seconds.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import gpurl

pytestmark = pytest.mark.cpu

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("name", ["tag_continuous", "simple_tag", "tag_gridworld"])
def test_bad_inputs_raise_or_clamp_in_a_child_process(name):
    env = {**os.environ, "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(HERE / "unvalidated_inputs_worker.py"), name], capture_output=True,
                          text=True, env=env, timeout=900)
    assert proc.returncode == 0, (f"worker for {name} exited with {proc.returncode} (negative: killed by that "
                                  f"signal)\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    assert proc.stdout.strip().splitlines()[-1] == f"PASS {name}"


# ---- the CUDA C twin clamps as the Numba source does -------------------------------------------------

def test_cuda_c_host_build_clamps_like_the_numba_build():
    from gpurl.envs.tag_gridworld.cuda_c import SOURCE, attach
    from gpurl.kernels.cuda_c_host import HostCudaCModule, find_cxx

    from gridworld_harness import make_small

    if find_cxx() is None:
        pytest.skip("no C++ compiler for the host build (install g++ or set CXX)")
    host = HostCudaCModule(path=SOURCE)
    host.build()
    params = dict(num_taggers=4, grid_length=3, episode_length=4, validate=False)
    c_env, numba_env = make_small(**params), make_small(**params)
    attach(c_env, host, 4)
    c_env.reset()
    numba_env.reset()
    gen = torch.Generator().manual_seed(2)
    values = torch.tensor([-(2**63), -(2**40), -1, 0, 1, 2, 3, 4, 5, 7, 2**31, 2**40, 2**63 - 1])
    for t in range(6):
        actions = values[torch.randint(len(values), (c_env.num_envs, c_env.num_agents, 1), generator=gen)]
        c_env.step(actions)
        numba_env.step(actions.clamp(0, 4))  # the documented rule, through the Numba build's valid path
        for k in ("x", "y", "timestep", "episode"):
            np.testing.assert_array_equal(getattr(c_env.state, k).numpy(), getattr(numba_env.state, k).numpy(),
                                          err_msg=f"step {t}: state.{k}")
        for k in ("obs", "reward", "terminated", "truncated"):
            np.testing.assert_array_equal(getattr(c_env, k).numpy(), getattr(numba_env, k).numpy(),
                                          err_msg=f"step {t}: {k}")


# ---- env.state fields: assignment copies in, after the metadata checks --------------------------------

def _grid(**kwargs):
    return gpurl.make("tag_gridworld", num_envs=3, device="cpu", seed=4, num_taggers=2, grid_length=5,
                      episode_length=50, **kwargs)


def test_assigning_a_state_field_takes_effect_like_an_in_place_write():
    assigned, written = _grid(validate=False), _grid(validate=False)
    for env in (assigned, written):
        env.reset()
    field = assigned.state.x
    new_x = torch.tensor([[0, 1, 2], [3, 4, 5], [5, 5, 0]], dtype=torch.int32)
    assigned.state.x = new_x
    written.state.x.copy_(new_x)
    assert assigned.state.x is field  # the env keeps its tensor (the kernels' view of it); the values are new
    assert torch.equal(assigned.state.x, new_x)
    new_x.zero_()  # the assigned tensor is not aliased
    actions = torch.tensor([[1, 3, 2], [4, 0, 1], [2, 2, 3]])
    for env in (assigned, written):
        env.step(actions)
    for k in ("x", "y", "timestep"):
        assert torch.equal(getattr(assigned.state, k), getattr(written.state, k)), k
    assert torch.equal(assigned.obs, written.obs) and torch.equal(assigned.reward, written.reward)
    assigned.state.y = assigned.state.y  # itself: a no-op
    assigned.state.y = assigned.state.y.flip(0)  # an overlapping view: copied through a clone
    assert torch.equal(assigned.state.y, written.state.y.flip(0))


@pytest.mark.parametrize("value, exc, parts", [
    (torch.zeros(3, 2, dtype=torch.int32), ValueError, ["env.state.x must have shape (3, 3)", "got (3, 2)"]),
    (torch.zeros(3, 3, dtype=torch.int64), TypeError, ["env.state.x must have dtype torch.int32", "torch.int64"]),
    (torch.zeros(3, 3, dtype=torch.int32, device="meta"), ValueError, ["env.state.x must be on cpu", "meta"]),
    (np.zeros((3, 3), np.int32), TypeError, ["env.state.x must be a torch.Tensor", "ndarray"]),
    (5, TypeError, ["env.state.x must be a torch.Tensor", "int"]),
])
def test_assigning_a_bad_state_field_raises_and_changes_nothing(value, exc, parts):
    env = _grid()
    before = env.state.x.clone()
    field = env.state.x
    with pytest.raises(exc) as err:
        env.state.x = value
    for part in parts:
        assert part in str(err.value)
    assert env.state.x is field and torch.equal(env.state.x, before)


def test_unknown_state_field_raises():
    env = _grid()
    with pytest.raises(AttributeError, match="has no field 'xx'.*fields: x, y, timestep, episode"):
        env.state.xx = torch.zeros(3, 3)


# ---- env_id_offset ----------------------------------------------------------------------------------

@pytest.mark.parametrize("num_envs, offset", [(1, 2**32), (2, 2**32 - 1), (4, 2**32 - 3), (1, 2**40), (1, -1)])
def test_env_id_offset_outside_the_rng_ids_is_refused(num_envs, offset):
    highest = 2**32 - num_envs
    with pytest.raises(ValueError) as err:
        gpurl.make("tag_gridworld", num_envs=num_envs, device="cpu", env_id_offset=offset)
    msg = str(err.value)
    assert msg.startswith(f"env_id_offset must be in [0, {highest}] (2**32 - num_envs")
    assert msg.endswith(f"got {offset}")


@pytest.mark.parametrize("bad", [1.0, True, "3", None])
def test_env_id_offset_of_another_type_is_refused(bad):
    with pytest.raises(TypeError, match=r"env_id_offset must be an int in \[0, 4294967294\]"):
        gpurl.make("tag_gridworld", num_envs=2, device="cpu", env_id_offset=bad)


def test_highest_env_id_offset_is_accepted_and_keys_its_own_streams():
    from gpurl.envs.tag_gridworld.reference import reset_ref

    E = 3
    env = gpurl.make("tag_gridworld", num_envs=E, device="cpu", seed=9, env_id_offset=2**32 - E, random_start=True)
    obs = env.reset()
    start = reset_ref(env.params, E, 9, np.zeros(E, np.int32), 2**32 - E)
    np.testing.assert_array_equal(env.state.x.numpy(), start["x"])
    low = gpurl.make("tag_gridworld", num_envs=E, device="cpu", seed=9, env_id_offset=0, random_start=True)
    assert not torch.equal(low.reset(), obs)  # ids 2**32-3.. are not ids 0..2 again
