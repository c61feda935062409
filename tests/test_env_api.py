"""The public env API (docs/specs/API.md) on the CPU backend, with tag_continuous as the env."""
import dataclasses
from collections.abc import Mapping

import gymnasium
import numpy as np
import pytest
import torch

import gpurl
import gpurl.envs.registry as registry
from gpurl.envs.tag_continuous import TagContinuous
from gpurl.envs.tag_continuous.reference import observe_ref, step_ref

from tag_env_helpers import STATE_KEYS, snapshot
from tag_harness import make_small, random_actions

pytestmark = pytest.mark.cpu


@pytest.fixture
def scratch_registry(monkeypatch):
    """A private copy of the registry: names registered by a test vanish with it."""
    monkeypatch.setattr(registry, "_FACTORIES", dict(registry._FACTORIES))
    return registry


# ---- attributes ------------------------------------------------------------------------------------


@pytest.mark.parametrize("full, obs_dim", [(True, 7 * (2 + 5 - 1) + 1), (False, 7 * 3 + 1)],
                         ids=["full_obs", "k_nearest"])
def test_make_attributes_groups_and_spaces(full, obs_dim):
    env = gpurl.make("tag_continuous", num_envs=3, device="cpu", num_taggers=2, num_runners=5,
                     num_acceleration_levels=4, num_turn_levels=6, use_full_observation=full,
                     num_other_agents_observed=3)
    assert env.num_envs == 3
    assert env.num_agents == 7
    assert env.device == torch.device("cpu")
    assert env.obs_dim == obs_dim

    assert isinstance(env.groups, Mapping)
    assert list(env.groups) == ["tagger", "runner"]
    tagger, runner = env.groups["tagger"], env.groups["runner"]
    assert isinstance(tagger, gpurl.Group) and isinstance(runner, gpurl.Group)
    assert tagger.agents == slice(0, 2) and runner.agents == slice(2, 7)
    assert tagger.obs_dim == runner.obs_dim == obs_dim
    assert list(range(7)[tagger.agents]) + list(range(7)[runner.agents]) == list(range(7))

    assert isinstance(env.action_space, dict)
    assert list(env.action_space) == ["tagger", "runner"]
    for name, group in env.groups.items():
        space = env.action_space[name]
        assert space is group.action_space
        assert isinstance(space, gymnasium.spaces.MultiDiscrete)
        np.testing.assert_array_equal(space.nvec, [5, 7])


def test_output_dtypes_shapes_and_preallocated_views():
    env = make_small(num_envs=4, num_taggers=2, num_runners=3)
    E, N, D = 4, 5, 7 * 4 + 1
    obs0 = env.reset()
    assert obs0.dtype == torch.float32 and tuple(obs0.shape) == (E, N, D) and obs0.device == env.device
    gen = torch.Generator().manual_seed(0)
    first = env.step(random_actions(env, gen))
    obs, reward, terminated, truncated, info = first
    assert obs.dtype == torch.float32 and tuple(obs.shape) == (E, N, D)
    assert reward.dtype == torch.float32 and tuple(reward.shape) == (E, N)
    assert terminated.dtype == torch.bool and tuple(terminated.shape) == (E,)
    assert truncated.dtype == torch.bool and tuple(truncated.shape) == (E,)
    assert isinstance(info, dict)
    assert info["final_obs"].dtype == torch.float32 and tuple(info["final_obs"].shape) == (E, N, D)

    kept = obs.clone()
    second = env.step(random_actions(env, gen))
    for a, b in zip(first[:4] + (first[4]["final_obs"],), second[:4] + (second[4]["final_obs"],)):
        assert a.data_ptr() == b.data_ptr()
    # The view returned by the first step was rewritten in place by the second (the timestep
    # feature alone moved from 1/40 to 2/40).
    assert not torch.equal(kept, obs)
    np.testing.assert_array_equal(obs[:, :, -1].numpy(), np.float32(2) / np.float32(40))
    assert obs0.data_ptr() == obs.data_ptr() == env.reset().data_ptr()


def test_state_fields_and_dtypes():
    env = make_small(num_envs=3, num_taggers=2, num_runners=3)
    env.reset()
    assert dataclasses.is_dataclass(env.state)
    names = {f.name for f in dataclasses.fields(env.state)}
    spec = {"x": torch.float32, "y": torch.float32, "speed": torch.float32, "direction": torch.float32,
            "acceleration": torch.float32, "alive": torch.int32}
    assert set(spec) | {"num_runners", "timestep"} <= names
    for name, dtype in spec.items():
        t = getattr(env.state, name)
        assert isinstance(t, torch.Tensor) and t.dtype == dtype and tuple(t.shape) == (3, 5), name
        assert t.device == env.device
    for name in ("num_runners", "timestep"):
        t = getattr(env.state, name)
        assert t.dtype == torch.int32 and tuple(t.shape) == (3,), name


def test_state_written_in_place_is_where_step_continues():
    # 3 taggers, 13 runners, L = 5, episode_length 40; tagging radius 0.05: only the planted tag.
    env = make_small(num_envs=3, autoreset=False, tagging_distance=0.01)
    p = env.params
    E, N, T = env.num_envs, env.num_agents, p.num_taggers
    env.reset()
    rng = np.random.default_rng(11)
    f32 = np.float32
    x = rng.uniform(0, 5, (E, N)).astype(f32)
    y = rng.uniform(0, 5, (E, N)).astype(f32)
    speed = rng.uniform(0, 1, (E, N)).astype(f32)
    direction = rng.uniform(0, 2 * np.pi, (E, N)).astype(f32)
    acceleration = rng.uniform(-0.5, 0.5, (E, N)).astype(f32)
    alive = np.ones((E, N), np.int32)
    alive[0, 5] = 0
    alive[1, 3:9] = 0
    # Env 2: runner 7 sits at rest on tagger 1 (both no-op below): tagged in the first step.
    x[2, 7], y[2, 7] = x[2, 1], y[2, 1]
    speed[2, [1, 7]] = 0
    acceleration[2, [1, 7]] = 0
    # Three ways to write in place: copy_, slice assignment, element assignment.
    env.state.x.copy_(torch.from_numpy(x))
    env.state.y[:] = torch.from_numpy(y)
    env.state.speed[...] = torch.from_numpy(speed)
    env.state.direction.copy_(torch.from_numpy(direction))
    env.state.acceleration.copy_(torch.from_numpy(acceleration))
    env.state.alive.copy_(torch.from_numpy(alive))
    env.state.num_runners.copy_(torch.from_numpy(alive[:, T:].sum(1).astype(np.int32)))
    env.state.timestep[0] = 0
    env.state.timestep[1] = 17
    env.state.timestep[2] = 30

    ref = snapshot(env)
    np.testing.assert_array_equal(ref["x"], x)  # the writes landed in env.state
    gen = torch.Generator().manual_seed(5)
    for t in range(5):
        actions = random_actions(env, gen)
        actions[2, [1, 7]] = 0
        obs, reward, terminated, truncated, _ = env.step(actions)
        want_obs, want_reward, want_term, want_trunc = step_ref(p, ref, actions.numpy())
        np.testing.assert_array_equal(obs.numpy(), want_obs, err_msg=f"step {t} obs")
        np.testing.assert_array_equal(reward.numpy(), want_reward, err_msg=f"step {t} reward")
        np.testing.assert_array_equal(terminated.numpy(), want_term)
        np.testing.assert_array_equal(truncated.numpy(), want_trunc)
        got = snapshot(env)
        for k in STATE_KEYS:
            if k != "episode":
                np.testing.assert_array_equal(got[k], ref[k], err_msg=f"step {t} state.{k}")
        if t == 0:  # the injected tag happened, by hand
            assert got["alive"][2, 7] == 0 and got["num_runners"][2] == p.num_runners - 1
            assert reward[2, 7] == np.float32(p.tag_penalty_for_runner)
            assert reward[2, 1] == np.float32(p.tag_reward_for_tagger)
            np.testing.assert_array_equal(got["timestep"], [1, 18, 31])


def test_observe_ref_matches_reset_obs():
    # The reset obs is computed by the kernels from the drawn state; cross-check it once.
    env = make_small(num_envs=2, use_full_observation=False, num_other_agents_observed=4)
    obs = env.reset()
    np.testing.assert_array_equal(obs.numpy(), observe_ref(env.params, snapshot(env)))


# ---- device choice, registry, call order -----------------------------------------------------------


def test_device_none_picks_available_backend_and_says_so_to_whoever_asks(capsys, caplog):
    capsys.readouterr()
    with caplog.at_level("INFO", logger="gpurl"):
        env = gpurl.make("tag_continuous", num_envs=2, device=None, num_runners=2)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert env.device.type == expected
    assert capsys.readouterr().err == ""  # a successful make prints nothing (issue 43)
    said = [r.getMessage() for r in caplog.records if r.name == "gpurl"]
    assert said == [f"device=None -> using {expected}"]
    # An explicit device says nothing, even to the logger.
    caplog.clear()
    with caplog.at_level("INFO", logger="gpurl"):
        gpurl.make("tag_continuous", num_envs=2, device="cpu", num_runners=2)
    assert capsys.readouterr().err == "" and not [r for r in caplog.records if r.name == "gpurl"]


def test_register_user_factory_and_make_it(scratch_registry):
    calls = []

    def factory(**kwargs):
        calls.append(kwargs)
        return TagContinuous(num_taggers=2, num_runners=3, **kwargs)

    gpurl.register("my_tag", factory)
    assert "my_tag" in gpurl.registered()
    env = gpurl.make("my_tag", num_envs=2, device="cpu", seed=5, episode_length=9)
    assert calls == [dict(num_envs=2, device=torch.device("cpu"), seed=5, autoreset=True, episode_length=9)]
    assert isinstance(env, TagContinuous)
    assert (env.num_envs, env.num_agents, env.seed, env.params.episode_length) == (2, 5, 5, 9)
    env.reset()
    obs, *_ = env.step(torch.zeros(2, 5, 2, dtype=torch.int64))
    assert tuple(obs.shape) == (2, 5, env.obs_dim)

    sentinel = object()
    gpurl.register("anything", lambda **kw: sentinel)
    assert gpurl.make("anything", num_envs=1, device="cpu") is sentinel


def test_register_duplicate_name_is_an_error(scratch_registry):
    original = registry._FACTORIES["tag_continuous"]
    with pytest.raises(ValueError, match="tag_continuous"):
        gpurl.register("tag_continuous", lambda **kw: None)
    assert registry._FACTORIES["tag_continuous"] is original
    gpurl.register("mine", lambda **kw: 1)
    with pytest.raises(ValueError, match="mine"):
        gpurl.register("mine", lambda **kw: 2)
    assert gpurl.make("mine", num_envs=1, device="cpu") == 1
    gpurl.register("mine", lambda **kw: 3, overwrite=True)
    assert gpurl.make("mine", num_envs=1, device="cpu") == 3


@pytest.mark.parametrize("name, factory", [("", lambda **kw: 1), (None, lambda **kw: 1), ("x", 42)])
def test_register_rejects_bad_name_or_factory(scratch_registry, name, factory):
    with pytest.raises(TypeError):
        gpurl.register(name, factory)
    assert name not in registry._FACTORIES


def test_unknown_env_name_lists_registered_ones(scratch_registry):
    gpurl.register("user_env_abc", lambda **kw: None)
    with pytest.raises(ValueError) as err:
        gpurl.make("tag_continous", num_envs=1, device="cpu")
    msg = str(err.value)
    assert "tag_continous" in msg and "tag_continuous" in msg and "user_env_abc" in msg


def test_step_before_reset_raises():
    env = make_small(num_envs=2)
    before = snapshot(env)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(torch.zeros(2, env.num_agents, 2, dtype=torch.int64))
    after = snapshot(env)
    for k in STATE_KEYS:
        np.testing.assert_array_equal(after[k], before[k])


def test_first_reset_must_cover_every_env():
    env = make_small(num_envs=3)
    mask = torch.tensor([True, False, True])
    with pytest.raises(RuntimeError, match="reset"):
        env.reset(mask=mask)
    with pytest.raises(RuntimeError, match="reset"):
        env.reset(seed=9, mask=mask)
    assert env.seed == 3
    with pytest.raises(RuntimeError):
        env.step(torch.zeros(3, env.num_agents, 2, dtype=torch.int64))
    env.reset(seed=9)
    assert env.seed == 9
    assert (env.state.alive == 1).all()



def test_float_actions_that_require_grad_step_like_plain_ones():
    """A policy's continuous actions may carry autograd history: the env reads their values (its view of them
    detaches) and steps exactly as with a plain copy."""
    envs = [gpurl.make("simple", num_envs=3, device="cpu", seed=4, continuous_actions=True) for _ in range(2)]
    for env in envs:
        env.reset()
    actions = torch.rand((3, 1, 5), generator=torch.Generator().manual_seed(1))
    tracked = actions.clone().requires_grad_(True) * 1.0  # a non-leaf with history, as a policy would return
    outputs = [env.step(a)[:2] for env, a in zip(envs, (tracked, actions))]
    assert tracked.requires_grad
    assert torch.equal(outputs[0][0], outputs[1][0]) and torch.equal(outputs[0][1], outputs[1][1])
    assert not torch.equal(envs[0].state.vel, torch.zeros_like(envs[0].state.vel))
