"""Bad input gets a clear ValueError/TypeError naming the argument, raised before anything changes.

Every call below that the env rejects is made on a stepped env whose state and output buffers are
snapshotted first and compared bit for bit afterwards (API.md "Errors").
"""
import numpy as np
import pytest
import torch

import gpurl
from gpurl.envs.tag_continuous import TagContinuousParams

from tag_env_helpers import assert_env_unchanged, env_snapshot
from tag_harness import make_small, random_actions

pytestmark = pytest.mark.cpu

E, T, R = 3, 2, 3
N = T + R
N_ACC, N_TURN = 4, 6  # nvec [5, 7]: the two action dims have different bounds


@pytest.fixture
def env():
    env = make_small(num_envs=E, num_taggers=T, num_runners=R, num_acceleration_levels=N_ACC,
                     num_turn_levels=N_TURN)
    env.reset()
    env.step(random_actions(env, torch.Generator().manual_seed(0)))  # non-trivial reward/obs
    return env


def _rejected(env, exc, call, *must_contain):
    """Assert ``call()`` raises ``exc`` naming every string of ``must_contain`` and changes nothing."""
    snap = env_snapshot(env)
    seed = env.seed
    with pytest.raises(exc) as err:
        call()
    msg = str(err.value)
    for text in must_contain:
        assert text in msg, f"{text!r} not in error message {msg!r}"
    assert_env_unchanged(env, snap)
    assert env.seed == seed
    return msg


def _valid(dtype=torch.int64):
    return torch.zeros(E, N, 2, dtype=dtype)


# ---- actions ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [np.zeros((E, N, 2), np.int64), [[[0, 0]] * N] * E, None],
                         ids=["numpy", "list", "None"])
def test_actions_not_a_tensor(env, bad):
    _rejected(env, TypeError, lambda: env.step(bad), "actions", "Tensor", type(bad).__name__)


@pytest.mark.parametrize("shape", [(E, N), (E, N, 3), (E, N, 1), (E + 1, N, 2), (E, N - 1, 2), (E * N * 2,),
                                   (1, E, N, 2)])
def test_actions_wrong_shape(env, shape):
    _rejected(env, ValueError, lambda: env.step(torch.zeros(shape, dtype=torch.int64)),
              "actions", str((E, N, 2)), str(shape))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bool, torch.int16, torch.uint8])
def test_actions_wrong_dtype(env, dtype):
    _rejected(env, TypeError, lambda: env.step(_valid(dtype)), "actions", "torch.int64", "torch.int32", str(dtype))


def test_actions_wrong_device(env):
    meta = torch.zeros(E, N, 2, dtype=torch.int64, device="meta")
    _rejected(env, ValueError, lambda: env.step(meta), "actions", "meta", "cpu")


OUT_OF_RANGE = [(0, -1), (0, N_ACC + 1), (0, 2**40), (1, -1), (1, N_TURN + 1), (1, -(2**40))]


@pytest.mark.parametrize("dim, value, dtype", [(d, v, t) for t in (torch.int64, torch.int32) for d, v in OUT_OF_RANGE
                                               if t == torch.int64 or abs(v) < 2**31])  # what an int32 can hold
def test_action_index_out_of_range(env, dim, value, dtype):
    bound = (N_ACC + 1, N_TURN + 1)[dim]
    actions = _valid(dtype)
    actions[1, 4, dim] = value
    msg = _rejected(env, ValueError, lambda: env.step(actions), "actions[1, 4, ", str(value), str(bound))
    assert f"actions[1, 4, {dim}]" in msg


def test_action_bounds_are_exclusive_nvec(env):
    actions = _valid()
    actions[0, 0] = torch.tensor([N_ACC + 1, N_TURN])  # first dim one past its last index
    _rejected(env, ValueError, lambda: env.step(actions), f"actions[0, 0, 0] = {N_ACC + 1}", str(N_ACC + 1))
    actions[0, 0] = torch.tensor([N_ACC, N_TURN])  # the largest valid indices
    env.step(actions)
    assert env.state.timestep[0] == 2


def test_validate_false_skips_the_range_check_and_steps_the_same(monkeypatch):
    kwargs = dict(num_envs=E, num_taggers=T, num_runners=R, num_acceleration_levels=N_ACC, num_turn_levels=N_TURN)
    checked, unchecked = make_small(**kwargs), make_small(validate=False, **kwargs)
    checked.reset()
    unchecked.reset()
    gen = torch.Generator().manual_seed(4)
    for _ in range(4):
        actions = random_actions(checked, gen)
        a = checked.step(actions)
        b = unchecked.step(actions.clone())
        for x, y in zip(a[:4], b[:4]):
            assert torch.equal(x, y)
    # The range check is skipped, not just silent: an out-of-range index reaches the launch.
    launched = []
    monkeypatch.setattr(unchecked.launcher, "step", lambda consts, actions, out: launched.append(actions))
    bad = _valid()
    bad[0, 0, 0] = N_ACC + 1
    unchecked.step(bad)
    assert len(launched) == 1 and launched[0][0, 0, 0] == N_ACC + 1
    with pytest.raises(ValueError):
        checked.step(bad)


# ---- make: env params, num_envs, device, seed ------------------------------------------------------


def test_unknown_env_param_names_it_and_lists_valid_ones():
    with pytest.raises(TypeError) as err:
        gpurl.make("tag_continuous", num_envs=2, device="cpu", num_runner=3)
    msg = str(err.value)
    assert "num_runner'" in msg
    for valid in ("num_runners", "num_taggers", "tagging_distance", "runner_exits_game_after_tagged"):
        assert valid in msg


_DEFAULT_N = TagContinuousParams().num_agents  # 11


@pytest.mark.parametrize("name, value", [
    ("num_taggers", 0), ("num_runners", 0), ("grid_length", 0), ("grid_length", -1.0), ("episode_length", 0),
    ("num_acceleration_levels", 0), ("num_turn_levels", 0), ("edge_hit_penalty", 0.5),
    ("tagging_distance", 1.5), ("tagging_distance", -0.1), ("tag_reward_for_tagger", -1),
    ("step_penalty_for_tagger", 0.1), ("tag_penalty_for_runner", 1), ("step_reward_for_runner", -1),
    ("end_of_game_reward_for_runner", -1), ("num_other_agents_observed", 0),
    ("num_other_agents_observed", _DEFAULT_N + 1),
    # not numbers of the right kind
    ("num_runners", 2.0), ("num_taggers", True), ("grid_length", float("nan")), ("episode_length", "10"),
    ("num_taggers", "2"), ("grid_length", "10"), ("tagging_distance", None),
])
def test_param_validation_names_the_parameter(name, value):
    with pytest.raises(ValueError) as err:
        gpurl.make("tag_continuous", num_envs=2, device="cpu", **{name: value})
    assert name in str(err.value)


@pytest.mark.parametrize("name, value", [
    ("edge_hit_penalty", 0.0), ("tagging_distance", 0.0), ("tagging_distance", 1.0), ("tag_reward_for_tagger", 0),
    ("step_penalty_for_tagger", 0), ("tag_penalty_for_runner", 0), ("step_reward_for_runner", 0),
    ("end_of_game_reward_for_runner", 0), ("num_other_agents_observed", 1),
    ("num_other_agents_observed", _DEFAULT_N), ("episode_length", 1), ("num_acceleration_levels", 1),
])
def test_param_validation_boundaries_are_accepted(name, value):
    env = gpurl.make("tag_continuous", num_envs=2, device="cpu", **{name: value})
    assert getattr(env.params, name) == value


@pytest.mark.parametrize("bad, exc", [(0, ValueError), (-3, ValueError), (2.5, TypeError), ("8", TypeError),
                                      (True, TypeError), (None, TypeError)])
def test_bad_num_envs(bad, exc):
    with pytest.raises(exc) as err:
        gpurl.make("tag_continuous", num_envs=bad, device="cpu")
    assert "num_envs" in str(err.value) and repr(bad) in str(err.value)


@pytest.mark.parametrize("bad", ["tpu", "gpu", "cuda", "cuda:3", torch.device("meta"), "cpu:x"])
def test_bad_device(bad):
    if torch.cuda.is_available() and str(bad).startswith("cuda"):
        pytest.skip("CUDA is usable here")
    with pytest.raises(ValueError) as err:
        gpurl.make("tag_continuous", num_envs=2, device=bad)
    assert str(bad) in str(err.value)


@pytest.mark.parametrize("bad, exc", [(-1, ValueError), (2**64, ValueError), (1.5, TypeError), ("0", TypeError),
                                      (True, TypeError)])
def test_bad_seed(env, bad, exc):
    with pytest.raises(exc, match="seed"):
        gpurl.make("tag_continuous", num_envs=2, device="cpu", seed=bad)
    _rejected(env, exc, lambda: env.reset(seed=bad), "seed", repr(bad))


def test_extreme_valid_seeds():
    for seed in (0, 2**64 - 1, np.uint64(2**63)):
        assert gpurl.make("tag_continuous", num_envs=1, device="cpu", seed=seed).seed == int(seed)


@pytest.mark.parametrize("bad", [-1, 1.0, True])
def test_bad_env_id_offset(bad):
    with pytest.raises((ValueError, TypeError), match="env_id_offset"):
        gpurl.make("tag_continuous", num_envs=2, device="cpu", env_id_offset=bad)


# ---- reset mask --------------------------------------------------------------------------------------


@pytest.mark.parametrize("mask, exc, named", [
    (torch.ones(E, dtype=torch.int64), TypeError, "torch.int64"),
    (torch.ones(E, dtype=torch.uint8), TypeError, "torch.uint8"),
    (torch.ones(E + 1, dtype=torch.bool), ValueError, str((E + 1,))),
    (torch.ones(E, 1, dtype=torch.bool), ValueError, str((E, 1))),
    (torch.ones((), dtype=torch.bool), ValueError, "()"),
    (torch.ones(E, dtype=torch.bool, device="meta"), ValueError, "meta"),
    (np.ones(E, dtype=bool), TypeError, "ndarray"),
    ([True] * E, TypeError, "list"),
], ids=["int64", "uint8", "long", "2d", "scalar", "meta", "numpy", "list"])
def test_bad_reset_mask(env, mask, exc, named):
    _rejected(env, exc, lambda: env.reset(mask=mask), "mask", named)
    # With a new seed too: nothing is re-keyed when the mask is rejected.
    _rejected(env, exc, lambda: env.reset(seed=123, mask=mask), "mask", named)
