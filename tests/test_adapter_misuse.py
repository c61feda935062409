"""Adapter misuse gets an early, clear error that names the caller's argument, and changes nothing:
an out-of-range ``env_index`` (not gpurl's internal ``env_id_offset``), any call after ``close()`` (all three
adapters alike), and a TorchRL ``"_reset"`` mask of the wrong dtype, shape or device."""
from __future__ import annotations

import dataclasses
import re

import pytest
import torch

import gpurl.envs.adapters as adapters
from gpurl.envs.adapters import gym_vector_env, parallel_env

pytestmark = pytest.mark.cpu
torch.set_num_threads(1)

E = 3  # envs of the TorchRL adapter; simple_spread has 3 agents in one group, "agent"
SPREAD = dict(max_cycles=5)  # the MPE env tests/test_torchrl_adapter.py compiles too


def state_snapshot(env) -> dict[str, torch.Tensor]:
    """Every field of a gpurl env's state, cloned."""
    return {f.name: getattr(env.state, f.name).clone() for f in dataclasses.fields(env.state)}


def assert_same_state(env, before: dict[str, torch.Tensor]) -> None:
    for name, value in before.items():
        assert torch.equal(getattr(env.state, name), value), name


@pytest.fixture(scope="module")
def torchrl_adapter():
    """One reset GpurlTorchRLEnv for the tests that must leave it unchanged (built once: numba compiles)."""
    pytest.importorskip("torchrl")
    env = adapters.torchrl_env("simple_spread", E, device="cpu", seed=3, **SPREAD)
    env.reset()
    return env


def adapter_snapshot(env) -> dict[str, torch.Tensor]:
    """The gpurl env's state plus the adapter's own record of the latest observations and end flags."""
    return {**state_snapshot(env.env), "_obs": env._obs.clone(), "_terminated": env._terminated.clone(),
            "_truncated": env._truncated.clone()}


def assert_adapter_unchanged(env, before: dict[str, torch.Tensor]) -> None:
    for name, value in before.items():
        now = getattr(env, name) if name.startswith("_") else getattr(env.env.state, name)
        assert torch.equal(now, value), name


# ---- env_index: named as the caller wrote it, checked before anything is built -------------------------


@pytest.mark.parametrize("env_index, error, text", [
    (-1, ValueError, r"env_index must be in \[0, 4294967295\] .*got -1"),
    (2**32, ValueError, r"env_index must be in \[0, 4294967295\] .*got 4294967296"),
    (1.5, TypeError, r"env_index must be an int in \[0, 4294967295\] .*got float 1.5"),
    (True, TypeError, r"env_index must be an int .*got bool True"),
])
def test_parallel_env_names_a_bad_env_index(monkeypatch, env_index, error, text):
    monkeypatch.setattr(adapters, "make", lambda *a, **k: pytest.fail("make() reached: nothing may be built"))
    with pytest.raises(error, match=text) as raised:
        parallel_env("simple_spread", env_index=env_index)
    assert "env_id_offset" not in str(raised.value)


def test_parallel_env_refuses_env_id_offset_beside_env_index(monkeypatch):
    monkeypatch.setattr(adapters, "make", lambda *a, **k: pytest.fail("make() reached: nothing may be built"))
    with pytest.raises(ValueError, match=r"env_index \(2\); pass the batch env's id as env_index, not "
                                         r"env_id_offset=5"):
        parallel_env("simple_spread", env_index=2, env_id_offset=5)


def test_parallel_env_takes_the_last_env_index():
    pytest.importorskip("pettingzoo")
    par = parallel_env("simple_spread", env_index=2**32 - 1, **SPREAD)
    assert par.env.env_id_offset == 2**32 - 1


@pytest.mark.parametrize("adapter", ["gym_vector_env", "torchrl_env"])
def test_batch_adapters_name_env_id_offset_as_passed(adapter):
    """gym_vector_env and torchrl_env take env_id_offset itself (through make's keywords): the error names it."""
    if adapter == "torchrl_env":
        pytest.importorskip("torchrl")
    with pytest.raises(ValueError, match=r"env_id_offset must be in \[0, 4294967294\] .*got -1"):
        getattr(adapters, adapter)("simple_spread", 2, device="cpu", env_id_offset=-1)


# ---- after close(): every adapter raises the same RuntimeError ---------------------------------------------


def test_torchrl_adapter_refuses_every_call_after_close():
    pytest.importorskip("torchrl")
    env = adapters.torchrl_env("simple_spread", E, device="cpu", seed=1, **SPREAD)
    td = env.rand_action(env.reset())
    inner = env.env
    before = state_snapshot(inner)
    env.close()
    assert env.env is None and env.is_closed
    closed = r"this GpurlTorchRLEnv is closed: close\(\) released its gpurl env; make a new adapter"
    for call in (lambda: env.step(td.clone()), lambda: env.rand_step(td.clone()), lambda: env.reset(),
                 lambda: env.rollout(2), lambda: env.set_seed(7)):
        with pytest.raises(RuntimeError, match=closed):
            call()
    assert_same_state(inner, before)
    env.close()  # twice: harmless


def test_gym_and_pettingzoo_adapters_word_it_alike():
    pytest.importorskip("pettingzoo")
    venv = gym_vector_env("simple_spread", 2, device="cpu", **SPREAD)
    venv.reset(seed=0)
    venv.close()
    with pytest.raises(RuntimeError, match=r"this GymVectorEnv is closed: close\(\) released its gpurl env"):
        venv.step(venv.action_space.sample())
    par = parallel_env("simple_spread", **SPREAD)
    par.reset(seed=0)
    par.close()
    with pytest.raises(RuntimeError, match=r"this ParallelEnv is closed: close\(\) released its gpurl env"):
        par.reset()


# ---- TorchRL "_reset" masks: dtype, shape, device checked before the env resets ------------------------


def reset_input(key, mask):
    from tensordict import TensorDict

    td = TensorDict({}, batch_size=[E])
    if key == "_reset":
        td.set(key, mask)
    else:  # a group's mask lives in its nested [E, n] TensorDict
        td.set(key[0], TensorDict({key[1]: mask}, batch_size=mask.shape[:2]))
    return td


@pytest.mark.parametrize("key, mask, error, got", [
    ("_reset", torch.ones(E, 1), TypeError, r"got dtype torch.float32, shape \(3, 1\) on cpu"),
    ("_reset", torch.ones(E, 1, dtype=torch.uint8), TypeError, r"got dtype torch.uint8, shape \(3, 1\) on cpu"),
    ("_reset", torch.ones(E, 2, dtype=torch.bool), ValueError, r"got dtype torch.bool, shape \(3, 2\) on cpu"),
    ("_reset", torch.ones(E, 1, 1, dtype=torch.bool), ValueError, r"got dtype torch.bool, shape \(3, 1, 1\)"),
    ("_reset", torch.ones(E, 1, dtype=torch.bool, device="meta"), ValueError,
     r"got dtype torch.bool, shape \(3, 1\) on meta"),
    (("agent", "_reset"), torch.ones(E, 3, 1), TypeError, r"got dtype torch.float32, shape \(3, 3, 1\) on cpu"),
    (("agent", "_reset"), torch.ones(E, 3, 2, dtype=torch.bool), ValueError,
     r"got dtype torch.bool, shape \(3, 3, 2\) on cpu"),
], ids=["float", "uint8", "wide", "extra_dim", "meta_device", "group_float", "group_wide"])
def test_torchrl_reset_mask_is_checked_before_anything_changes(torchrl_adapter, key, mask, error, got):
    env = torchrl_adapter
    env.rand_step(env.rand_action(env.reset()))  # the envs have moved: a reset would show
    before = adapter_snapshot(env)
    batch = (E,) if key == "_reset" else (E, 3)
    expected = re.escape(f"{key!r} (the envs to reset) must be a torch.bool tensor of shape {(*batch, 1)} "
                         f"(TorchRL's done shape: batch {batch} + 1; {batch} is accepted too) on cpu; ")
    with pytest.raises(error, match=expected + got):
        env.reset(reset_input(key, mask))
    assert_adapter_unchanged(env, before)


@pytest.mark.parametrize("key, mask", [("_reset", torch.tensor([True, False, False])),
                                       (("agent", "_reset"), torch.tensor([[False] * 3, [True] * 3, [False] * 3]))],
                         ids=["root_batch_shape", "group_batch_shape"])
def test_torchrl_reset_mask_of_the_batch_shape_is_accepted(torchrl_adapter, key, mask):
    """Without TorchRL's trailing 1 the mask still means what it says: exactly those envs restart."""
    env = torchrl_adapter
    td = env.reset()
    td = env.step(env.rand_action(td))["next"]
    moved = env.env.state.timestep.clone()
    env.reset(reset_input(key, mask))
    restarted = mask if mask.dim() == 1 else mask.any(-1)
    assert (env.env.state.timestep[restarted] == 0).all()
    assert torch.equal(env.env.state.timestep[~restarted], moved[~restarted])
