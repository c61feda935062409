"""tag_gridworld through the public env API (docs/specs/API.md): attributes, state injection, action
shapes, errors raised before anything changes, both autoreset modes, ``step(out=)`` and ``step_metrics``,
seeding. Expected values come from the NumPy reference (gpurl.envs.tag_gridworld.reference).
"""
import gymnasium
import numpy as np
import pytest
import torch

import gpurl
from gpurl.envs import StepOutputs
import dataclasses
from gpurl.envs.tag_gridworld.reference import observe_ref, reset_ref, step_ref

from gridworld_harness import STATE_KEYS, make_small, random_actions, snapshot

pytestmark = pytest.mark.cpu

E, T = 5, 4
N = T + 1
OUTPUTS = ("obs", "final_obs", "reward", "terminated", "truncated")


@pytest.fixture
def env():
    env = make_small(num_envs=E, num_taggers=T, grid_length=8)
    env.reset()
    env.step(random_actions(env, torch.Generator().manual_seed(0)))  # non-trivial obs/reward
    return env


def _env_snapshot(env):
    snap = {f"state.{k}": getattr(env.state, k).clone() for k in STATE_KEYS}
    snap.update({k: getattr(env, k).clone() for k in OUTPUTS})
    snap["tags"] = env.step_metrics()["tags"].clone()
    return snap


def _rejected(env, exc, call, *must_contain):
    snap = _env_snapshot(env)
    with pytest.raises(exc) as err:
        call()
    for text in must_contain:
        assert text in str(err.value), f"{text!r} not in {str(err.value)!r}"
    now = _env_snapshot(env)
    assert [k for k in snap if not torch.equal(now[k], snap[k])] == []


# ---- attributes and state --------------------------------------------------------------------------


@pytest.mark.parametrize("full, obs_dim", [(True, 4 * N + 1), (False, 6)], ids=["full_obs", "partial_obs"])
def test_attributes_groups_and_spaces(full, obs_dim):
    env = gpurl.make("tag_gridworld", num_envs=3, device="cpu", num_taggers=T, use_full_observation=full)
    assert "tag_gridworld" in gpurl.registered()
    assert (env.num_envs, env.num_agents, env.obs_dim, env.device) == (3, N, obs_dim, torch.device("cpu"))
    assert list(env.groups) == ["tagger", "runner"]
    assert env.groups["tagger"].agents == slice(0, T) and env.groups["runner"].agents == slice(T, N)
    for name, group in env.groups.items():
        assert group.obs_dim == obs_dim
        assert env.action_space[name] is group.action_space
        assert group.action_space == gymnasium.spaces.Discrete(5)
    assert env.action_dims == 1


def test_defaults_are_the_specs():
    p = gpurl.make("tag_gridworld", num_envs=1, device="cpu").params
    assert (p.num_taggers, p.grid_length, p.episode_length) == (10, 10, 100)
    assert (p.wall_hit_penalty, p.tag_reward_for_tagger, p.tag_penalty_for_runner, p.step_cost_for_tagger) == (
        0.1, 10.0, 2.0, 0.01)
    assert p.use_full_observation is True and p.random_start is True


def test_state_fields_and_injection(env):
    assert dataclasses.is_dataclass(env.state)
    for k, shape in dict(x=(E, N), y=(E, N), timestep=(E,), episode=(E,)).items():
        t = getattr(env.state, k)
        assert t.dtype == torch.int32 and tuple(t.shape) == shape and t.device == env.device
    env.state.x[:, :] = 2
    env.state.y.copy_(torch.arange(N, dtype=torch.int32).expand(E, N))
    env.state.timestep[:] = 3
    before = snapshot(env)
    actions = random_actions(env, torch.Generator().manual_seed(1))
    obs, reward, terminated, truncated, _ = env.step(actions)
    ref = {k: v.copy() for k, v in before.items()}
    ref_obs, ref_reward, ref_term, ref_trunc = step_ref(env.params, ref, actions.numpy())
    np.testing.assert_array_equal(reward.numpy(), ref_reward)
    ongoing = ~(ref_term | ref_trunc)
    assert ongoing.any()
    np.testing.assert_array_equal(obs.numpy()[ongoing], ref_obs[ongoing])
    np.testing.assert_array_equal(env.state.x.numpy()[ongoing], ref["x"][ongoing])


def test_two_dim_actions_and_int32_match_three_dim_int64():
    envs = [make_small(num_envs=E, num_taggers=T, grid_length=8) for _ in range(3)]
    for env in envs:
        env.reset()
    gen = torch.Generator().manual_seed(2)
    for _ in range(12):
        actions = random_actions(envs[0], gen)
        results = [envs[0].step(actions), envs[1].step(actions[..., 0]), envs[2].step(actions.to(torch.int32))]
        for other in results[1:]:
            for a, b in zip(results[0][:4], other[:4]):
                assert torch.equal(a, b)


# ---- errors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(E, N, 2), (E + 1, N), (E, N - 1, 1), (E * N,), (1, E, N, 1)])
def test_actions_wrong_shape(env, shape):
    _rejected(env, ValueError, lambda: env.step(torch.zeros(shape, dtype=torch.int64)), "actions", str(shape),
              str((E, N, 1)), str((E, N)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool, torch.int16, torch.uint8])
def test_actions_wrong_dtype(env, dtype):
    _rejected(env, TypeError, lambda: env.step(torch.zeros(E, N, dtype=dtype)), "actions", str(dtype), "int64")


def test_actions_not_a_tensor_or_wrong_device(env):
    _rejected(env, TypeError, lambda: env.step(np.zeros((E, N), np.int64)), "actions", "ndarray")
    meta = torch.zeros(E, N, dtype=torch.int64, device="meta")
    _rejected(env, ValueError, lambda: env.step(meta), "actions", "meta")


@pytest.mark.parametrize("value", [-1, 5, 2**40])
def test_out_of_range_discrete_action(env, value):
    actions = torch.zeros(E, N, dtype=torch.int64)
    actions[2, T] = value
    _rejected(env, ValueError, lambda: env.step(actions), f"actions[2, {T}, 0] = {value}", "[0, 5)")


def test_validate_false_skips_the_check_and_out_of_range_actions_are_clamped():
    env = make_small(num_envs=E, num_taggers=T, grid_length=8, validate=False)
    env.reset()
    before = snapshot(env)
    actions = torch.full((E, N), 7, dtype=torch.int64)  # clamped to 4: y - 1 (docs/specs/API.md, "Errors")
    env.step(actions)
    np.testing.assert_array_equal(env.state.x.numpy(), before["x"])
    np.testing.assert_array_equal(env.state.y.numpy(), np.maximum(before["y"] - 1, 0))
    np.testing.assert_array_equal(env.state.timestep.numpy(), before["timestep"] + 1)


def test_unknown_env_param_names_it_and_lists_valid_ones():
    with pytest.raises(TypeError) as err:
        gpurl.make("tag_gridworld", num_envs=2, device="cpu", num_runners=3)
    msg = str(err.value)
    assert "'num_runners'" in msg
    for valid in ("num_taggers", "grid_length", "wall_hit_penalty", "step_cost_for_tagger", "random_start"):
        assert valid in msg


@pytest.mark.parametrize("name, value", [
    ("num_taggers", 0), ("grid_length", 0), ("grid_length", 2**24 + 1), ("grid_length", 10.0),
    ("episode_length", 0), ("num_taggers", True), ("use_full_observation", 1), ("random_start", "yes"),
    ("wall_hit_penalty", float("nan")), ("tag_reward_for_tagger", "10"), ("step_cost_for_tagger", None),
])
def test_param_validation_names_the_parameter(name, value):
    with pytest.raises(ValueError, match=name):
        gpurl.make("tag_gridworld", num_envs=2, device="cpu", **{name: value})


def test_bad_reset_mask_changes_nothing(env):
    _rejected(env, ValueError, lambda: env.reset(mask=torch.ones(E + 1, dtype=torch.bool)), "mask")
    _rejected(env, TypeError, lambda: env.reset(seed=9, mask=torch.ones(E, dtype=torch.int64)), "mask")


# ---- autoreset modes --------------------------------------------------------------------------------


def _force_ends(env):
    """Env 1 truncates (last step) and env 3 terminates (tagger 0 on the runner) in the next no-op step."""
    env.state.timestep[1] = env.params.episode_length - 1
    env.state.x[3, 0] = env.state.x[3, T]
    env.state.y[3, 0] = env.state.y[3, T]
    return torch.zeros(E, N, dtype=torch.int64)


def test_autoreset_same_step_with_final_obs(env):
    actions = _force_ends(env)
    before = snapshot(env)
    ref = {k: v.copy() for k, v in before.items()}
    ref_obs, ref_reward, ref_term, ref_trunc = step_ref(env.params, ref, actions.numpy())
    obs, reward, terminated, truncated, info = env.step(actions)
    ended = np.isin(np.arange(E), [1, 3])
    np.testing.assert_array_equal(ref_term | ref_trunc, ended)  # only the forced ends
    assert truncated.tolist() == list(np.arange(E) == 1) and terminated.tolist() == list(np.arange(E) == 3)
    np.testing.assert_array_equal(reward.numpy(), ref_reward)  # the final step's rewards
    np.testing.assert_array_equal(info["final_obs"].numpy()[ended], ref_obs[ended])
    fresh = reset_ref(env.params, E, env.seed, before["episode"])
    after = snapshot(env)
    for k in STATE_KEYS:
        np.testing.assert_array_equal(after[k][ended], fresh[k][ended], err_msg=k)
        np.testing.assert_array_equal(after[k][~ended], ref[k][~ended], err_msg=k)
    np.testing.assert_array_equal(obs.numpy()[ended], observe_ref(env.params, fresh)[ended])
    np.testing.assert_array_equal(obs.numpy()[~ended], ref_obs[~ended])
    assert env.step_metrics()["tags"].tolist() == [0.0, 0.0, 0.0, 1.0, 0.0]


def test_no_autoreset_freezes_finished_envs_until_masked_reset():
    env = make_small(num_envs=E, num_taggers=T, grid_length=8, autoreset=False)
    env.reset()
    gen = torch.Generator().manual_seed(3)
    env.step(random_actions(env, gen))
    _, _, terminated, truncated, info = env.step(_force_ends(env))
    assert "final_obs" not in info
    assert bool(truncated[1]) and bool(terminated[3])
    ended = (terminated | truncated).numpy().copy()
    for _ in range(3):
        before, before_obs = snapshot(env), env.obs.clone()
        flags = (env.terminated.clone(), env.truncated.clone())
        actions = random_actions(env, gen)  # finished envs get moving actions too: they must be ignored
        ref = {k: v[~ended].copy() for k, v in before.items()}
        ref_obs, ref_reward, *_ = step_ref(env.params, ref, actions.numpy()[~ended])
        obs, reward, terminated, truncated, _ = env.step(actions)
        after = snapshot(env)
        for k in STATE_KEYS:
            np.testing.assert_array_equal(after[k][ended], before[k][ended], err_msg=k)
            np.testing.assert_array_equal(after[k][~ended], ref[k], err_msg=k)
        assert torch.equal(obs[ended], before_obs[ended]) and (reward[ended] == 0).all()
        np.testing.assert_array_equal(obs.numpy()[~ended], ref_obs)
        np.testing.assert_array_equal(reward.numpy()[~ended], ref_reward)
        assert torch.equal(terminated[ended], flags[0][ended]) and torch.equal(truncated[ended], flags[1][ended])
        assert (env.step_metrics()["tags"][ended] == 0).all()  # a frozen env tags nobody
        ended |= (terminated | truncated).numpy()
    mask = torch.zeros(E, dtype=torch.bool)
    mask[3] = True
    episode = env.state.episode.numpy().copy()
    env.reset(mask=mask)
    fresh = reset_ref(env.params, E, env.seed, episode)
    np.testing.assert_array_equal(env.state.x[3].numpy(), fresh["x"][3])
    assert not env.terminated[3] and env.state.timestep[3] == 0
    env.step(random_actions(env, gen))
    assert env.state.timestep[3] == 1 and env.state.timestep[1] == env.params.episode_length


# ---- step(out=), metrics, seeding ------------------------------------------------------------------------


def test_step_into_out_matches_twin_env():
    mine, twin = (make_small(num_envs=E, num_taggers=T, grid_length=8) for _ in range(2))
    mine.reset()
    twin.reset()
    own_obs = mine.obs.clone()
    steps = 20
    nan = lambda *shape: torch.full((steps, *shape), float("nan"))  # noqa: E731
    flag = lambda: torch.ones(steps, E, dtype=torch.bool)  # noqa: E731
    S = mine.global_state_dim
    buf = StepOutputs(obs=nan(E, N, mine.obs_dim), reward=nan(E, N), terminated=flag(), truncated=flag(),
                      final_obs=nan(E, N, mine.obs_dim), global_state=nan(E, S), final_global_state=nan(E, S))
    own_state = mine.global_state.clone()
    gen = torch.Generator().manual_seed(4)
    ends = 0
    for t in range(steps):
        actions = random_actions(mine, gen)
        out = StepOutputs(*(b[t] for b in buf))
        got = mine.step(actions, out=out)
        want = twin.step(actions)
        for a, b, o in zip(got[:4], want[:4], out[:4]):
            assert a is o and torch.equal(a, b)
        done = want[2] | want[3]
        ends += int(done.sum())
        assert torch.equal(got[4]["final_obs"][done], want[4]["final_obs"][done])
        assert got[4]["final_global_state"] is out.final_global_state
        assert torch.equal(out.global_state, twin.global_state)
        assert torch.equal(out.final_global_state[done], want[4]["final_global_state"][done])
        assert torch.equal(mine.step_metrics()["tags"], twin.step_metrics()["tags"])
        assert torch.equal(mine.state.x, twin.state.x)
    assert ends >= E
    assert torch.equal(mine.obs, own_obs)  # the env's own obs buffer was left alone
    assert torch.equal(mine.global_state, own_state)  # and its own global state
    bad = StepOutputs(*(b[0] for b in buf))._replace(reward=torch.zeros(E, N + 1))
    _rejected(mine, ValueError, lambda: mine.step(torch.zeros(E, N, dtype=torch.int64), out=bad), "out.reward")


def test_seeds_reseeding_and_env_id_offset():
    a, b = make_small(seed=21), make_small(seed=21)
    c = make_small(seed=22)
    whole = make_small(num_envs=7, seed=5)
    half = make_small(num_envs=4, seed=5, env_id_offset=3)
    gen = torch.Generator().manual_seed(5)
    obs = [env.reset().clone() for env in (a, b, c, whole, half)]
    assert torch.equal(obs[0], obs[1]) and not torch.equal(obs[0], obs[2])
    assert torch.equal(obs[3][3:], obs[4])
    for _ in range(15):
        actions = random_actions(a, gen)
        for env in (a, b, whole):
            env.step(actions)
        half.step(actions[3:])
        assert torch.equal(a.obs, b.obs) and torch.equal(whole.obs[3:], half.obs)
    # reset(seed=s) reproduces a fresh env with seed s
    a.reset(seed=22)
    assert torch.equal(a.obs, obs[2]) and torch.equal(a.state.x, c.state.x)
