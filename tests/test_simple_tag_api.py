"""simple_tag through the public env API (docs/specs/API.md): attributes, groups, state injection,
autoreset modes, seeding, step(out=), step_metrics, and errors raised before anything changes."""
import dataclasses

import gymnasium
import numpy as np
import pytest
import torch

import gpurl
from gpurl.envs import StepOutputs
from gpurl.envs.mpe.simple_tag import SimpleTag

from simple_tag_harness import STATE_KEYS, make_env, random_actions, snapshot
from simple_tag_reference import collisions_ref, reset_ref, step_ref

pytestmark = pytest.mark.cpu

OUTPUTS = ("obs", "final_obs", "reward", "terminated", "truncated")


def env_snapshot(env) -> dict[str, torch.Tensor]:
    snap = {f"state.{k}": getattr(env.state, k).clone() for k in STATE_KEYS}
    snap.update({k: getattr(env, k).clone() for k in OUTPUTS})
    return snap


def assert_unchanged(env, snap) -> None:
    changed = [k for k, v in env_snapshot(env).items() if not torch.equal(v, snap[k])]
    assert not changed, f"a rejected call changed {changed}"


# ---- attributes -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("sizes, dims", [((3, 1, 2), (16, 14)), ((6, 4, 3), (36, 34)), ((1, 1, 0), (8, 6))])
@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "continuous"])
def test_make_attributes_groups_and_spaces(sizes, dims, continuous):
    A, G, L = sizes
    env = gpurl.make("simple_tag", num_envs=3, device="cpu", num_adversaries=A, num_good=G, num_obstacles=L,
                     continuous_actions=continuous)
    assert isinstance(env, SimpleTag)
    assert (env.num_envs, env.num_agents, env.obs_dim, env.device) == (3, A + G, dims[0], torch.device("cpu"))
    assert list(env.groups) == ["adversary", "good"] and list(env.action_space) == ["adversary", "good"]
    adversary, good = env.groups["adversary"], env.groups["good"]
    assert (adversary.agents, good.agents) == (slice(0, A), slice(A, A + G))
    assert (adversary.obs_dim, good.obs_dim) == dims
    for name, group in env.groups.items():
        space = env.action_space[name]
        assert space is group.action_space
        if continuous:
            assert isinstance(space, gymnasium.spaces.Box) and space.shape == (5,) and space.dtype == np.float32
            assert (space.low == 0).all() and (space.high == 1).all()
        else:
            assert space == gymnasium.spaces.Discrete(5)
    obs = env.reset()
    assert obs.shape == (3, A + G, dims[0]) and obs.dtype == torch.float32
    assert (obs[:, A:, dims[1]:] == 0).all()  # good agents' rows end in 2 zeros


def test_state_fields_dtypes_and_outputs():
    env = make_env(num_envs=3)
    env.reset()
    assert dataclasses.is_dataclass(env.state)
    E, N, L = 3, 5, 3
    spec = dict(pos=((E, N, 2), torch.float32), vel=((E, N, 2), torch.float32),
                landmark_pos=((E, L, 2), torch.float32), timestep=((E,), torch.int32))
    for name, (shape, dtype) in spec.items():
        t = getattr(env.state, name)
        assert tuple(t.shape) == shape and t.dtype == dtype and t.device == env.device, name
    first = env.step(random_actions(env, torch.Generator().manual_seed(0)))
    obs, reward, term, trunc, info = first
    assert (reward.shape, reward.dtype, term.dtype, trunc.dtype) == ((E, N), torch.float32, torch.bool, torch.bool)
    assert info["final_obs"].shape == obs.shape
    second = env.step(random_actions(env, torch.Generator().manual_seed(1)))
    assert all(a.data_ptr() == b.data_ptr() for a, b in zip(first[:4], second[:4]))  # rewritten in place
    metric = env.step_metrics()["collisions"]
    assert metric.shape == (E,) and metric.dtype == torch.float32 and metric is env.step_metrics()["collisions"]


def test_state_written_in_place_is_where_step_continues():
    env = make_env(num_envs=3, autoreset=False)
    env.reset()
    rng = np.random.default_rng(4)
    pos = rng.uniform(-0.3, 0.3, (3, 5, 2)).astype(np.float32)
    pos[2, 3] = pos[2, 0] + 0.01  # good agent 3 caught by adversary 0 in env 2
    env.state.pos.copy_(torch.from_numpy(pos))
    env.state.vel[:] = torch.from_numpy(rng.uniform(-1, 1, (3, 5, 2)).astype(np.float32)) * 0
    env.state.landmark_pos[...] = torch.from_numpy(rng.uniform(-0.9, 0.9, (3, 3, 2)).astype(np.float32))
    env.state.timestep[1] = 7
    ref = snapshot(env)
    actions = torch.zeros(3, 5, dtype=torch.int64)
    obs, reward, term, trunc, _ = env.step(actions)
    want_obs, want_reward, want_term, want_trunc, _ = step_ref(env.params, ref, actions.numpy())
    np.testing.assert_allclose(obs.numpy(), want_obs, rtol=0, atol=1e-5)
    np.testing.assert_allclose(reward.numpy(), want_reward, rtol=0, atol=1e-4)
    np.testing.assert_array_equal(trunc.numpy(), [False, False, False])
    np.testing.assert_array_equal(env.state.timestep.numpy(), [1, 8, 1])
    assert collisions_ref(env.params, ref["pos"])[2, 0, 0] and reward[2, 0] >= 10 and reward[2, 3] <= -10


def test_discrete_int32_and_trailing_dim_and_dynamic_rescaling_step_the_same():
    envs = [make_env(), make_env(), make_env(dynamic_rescaling=False)]
    for env in envs:
        env.reset()
    gen = torch.Generator().manual_seed(2)
    for _ in range(12):
        actions = random_actions(envs[0], gen)
        outs = [envs[0].step(actions), envs[1].step(actions.to(torch.int32).unsqueeze(-1)),
                envs[2].step(actions)]
        for other in outs[1:]:
            for a, b in zip(outs[0][:4], other[:4]):
                assert torch.equal(a, b)


def test_box_actions_are_clipped_into_unit_interval():
    inside, outside = make_env(continuous_actions=True), make_env(continuous_actions=True)
    inside.reset()
    outside.reset()
    gen = torch.Generator().manual_seed(3)
    for _ in range(5):
        wild = torch.randn((7, 5, 5), generator=gen) * 3
        a = inside.step(wild.clamp(0, 1))
        b = outside.step(wild)
        for x, y in zip(a[:4], b[:4]):
            assert torch.equal(x, y)


# ---- episode ends ---------------------------------------------------------------------------------------


def test_autoreset_same_step_with_final_obs():
    env = make_env(num_envs=4)
    env.reset()
    env.step(random_actions(env, torch.Generator().manual_seed(5)))
    env.state.timestep[[1, 3]] = env.params.max_cycles - 1
    before = snapshot(env)
    ref = {k: v.copy() for k, v in before.items()}
    actions = random_actions(env, torch.Generator().manual_seed(6))
    obs, reward, term, trunc, info = env.step(actions)
    ref_obs, ref_reward, *_ = step_ref(env.params, ref, actions.numpy())
    np.testing.assert_array_equal(trunc.numpy(), [False, True, False, True])
    assert not term.any()
    np.testing.assert_allclose(info["final_obs"][[1, 3]].numpy(), ref_obs[[1, 3]], rtol=0, atol=1e-5)
    np.testing.assert_allclose(reward.numpy(), ref_reward, rtol=0, atol=1e-4)  # the last step's rewards
    fresh = reset_ref(env.params, 4, env.seed, before["episode"])
    for e in (1, 3):
        assert env.state.timestep[e] == 0 and env.state.episode[e] == 2
        np.testing.assert_array_equal(env.state.pos[e].numpy(), fresh["pos"][e])
        assert (env.state.vel[e] == 0).all() and (obs[e, :, :2] == 0).all()  # new episode's obs: at rest
    np.testing.assert_array_equal(env.state.timestep[[0, 2]].numpy(), [2, 2])


def test_terminate_on_success_and_frozen_envs_without_autoreset():
    env = make_env(num_envs=3, num_adversaries=2, num_good=1, num_obstacles=1, autoreset=False,
                   terminate_on_success=True, max_cycles=6)
    env.reset()
    env.state.pos[1, 0] = env.state.pos[1, 2] + 0.02  # env 1: its one good agent is caught: terminated
    obs, reward, term, trunc, info = env.step(torch.zeros(3, 3, dtype=torch.int64))
    assert "final_obs" not in info
    np.testing.assert_array_equal(term.numpy(), [False, True, False])
    assert reward[1, 0] == reward[1, 1] == 10 and reward[1, 2] <= -10
    frozen = {k: v[1].clone() for k, v in env_snapshot(env).items()}
    gen = torch.Generator().manual_seed(7)
    for t in range(7):
        obs, reward, term, trunc, _ = env.step(random_actions(env, gen))
        for k, v in env_snapshot(env).items():  # the frozen env: same state, obs and flags
            if k != "reward":
                assert torch.equal(v[1], frozen[k]), (t, k)
        assert (reward[1] == 0).all() and env.step_metrics()["collisions"][1] == 0
    assert bool(trunc[0]) and bool(trunc[2]) and not bool(trunc[1])  # the others truncated at 6, then froze too
    assert env.state.timestep.tolist() == [6, 1, 6]
    env.reset(mask=torch.tensor([False, True, False]))
    assert env.state.timestep.tolist() == [6, 0, 6] and env.state.episode.tolist() == [1, 2, 1]
    obs, reward, term, trunc, _ = env.step(random_actions(env, gen))
    assert env.state.timestep.tolist() == [6, 1, 6] and (reward[[0, 2]] == 0).all()


def test_seeding_reset_and_env_id_offset():
    a = make_env(num_envs=4, seed=21)
    a.reset()
    b = make_env(num_envs=4, seed=0)
    b.reset()
    assert not torch.equal(a.state.pos, b.state.pos)
    b.step(random_actions(b, torch.Generator().manual_seed(0)))
    b.reset(seed=21)  # reproduces a fresh env with that seed
    for k in STATE_KEYS:
        assert torch.equal(getattr(a.state, k), getattr(b.state, k)), k
    assert torch.equal(a.obs, b.obs)
    shifted = make_env(num_envs=2, seed=21, env_id_offset=2)
    shifted.reset()
    assert torch.equal(shifted.state.pos, a.state.pos[2:])  # draws keyed by the global env id
    assert torch.equal(shifted.state.landmark_pos, a.state.landmark_pos[2:])


def test_step_into_out_matches_twin_env():
    mine, twin = make_env(), make_env()
    mine.reset()
    twin.reset()
    own_obs = mine.obs.clone()
    gen = torch.Generator().manual_seed(8)
    for t in range(11):  # crosses the autoreset at step 9
        actions = random_actions(mine, gen)
        want = [x.clone() for x in twin.step(actions)[:4]] + [twin.final_obs.clone()]
        out = StepOutputs(*(torch.full_like(x, float("nan")) if x.is_floating_point() else torch.zeros_like(x)
                            for x in want))
        got = mine.step(actions, out=out)
        assert all(a is b for a, b in zip(got[:4], out[:4]))
        for name, a, b in zip(("obs", "reward", "terminated", "truncated"), out[:4], want[:4]):
            assert torch.equal(a, b), (t, name)
        ended = want[2] | want[3]
        assert torch.equal(out.final_obs[ended], want[4][ended])
    assert torch.equal(mine.obs, own_obs)  # the env's own buffer was left alone


# ---- errors: raised before anything changes -----------------------------------------------------------------


@pytest.fixture(scope="module")
def stepped():
    envs = {}
    for continuous in (False, True):
        env = make_env(num_envs=3, continuous_actions=continuous)
        env.reset()
        env.step(random_actions(env, torch.Generator().manual_seed(9)))
        envs[continuous] = env
    return envs


def _rejected(env, exc, call, *must_contain):
    snap = env_snapshot(env)
    with pytest.raises(exc) as err:
        call()
    for text in must_contain:
        assert text in str(err.value), (text, str(err.value))
    assert_unchanged(env, snap)


@pytest.mark.parametrize("bad, exc, named", [
    (np.zeros((3, 5), np.int64), TypeError, "ndarray"),
    (torch.zeros(3, 4, dtype=torch.int64), ValueError, "(3, 4)"),
    (torch.zeros(3, 5, 2, dtype=torch.int64), ValueError, "(3, 5, 2)"),
    (torch.zeros(3, 5, dtype=torch.float32), TypeError, "torch.float32"),
    (torch.zeros(3, 5, dtype=torch.int64, device="meta"), ValueError, "meta"),
], ids=["numpy", "agents", "dims", "dtype", "device"])
def test_bad_discrete_actions(stepped, bad, exc, named):
    _rejected(stepped[False], exc, lambda: stepped[False].step(bad), "actions", named)


@pytest.mark.parametrize("value", [5, -1, 2**40])
def test_discrete_action_out_of_range(stepped, value):
    actions = torch.zeros(3, 5, dtype=torch.int64)
    actions[2, 4] = value
    _rejected(stepped[False], ValueError, lambda: stepped[False].step(actions), "actions[2, 4, 0]", str(value))


@pytest.mark.parametrize("bad, exc, named", [
    (torch.zeros(3, 5, 5, dtype=torch.int64), TypeError, "torch.int64"),
    (torch.zeros(3, 5, 5, dtype=torch.float64), TypeError, "torch.float64"),
    (torch.zeros(3, 5), ValueError, "(3, 5)"),
    (torch.zeros(3, 5, 4), ValueError, "(3, 5, 4)"),
], ids=["int", "float64", "no_dims", "four"])
def test_bad_box_actions(stepped, bad, exc, named):
    _rejected(stepped[True], exc, lambda: stepped[True].step(bad), "actions", named)


def test_nan_box_action_is_an_error(stepped):
    actions = torch.zeros(3, 5, 5)
    actions[1, 2, 3] = float("nan")
    _rejected(stepped[True], ValueError, lambda: stepped[True].step(actions), "actions[1, 2, 3]", "NaN")


def test_unknown_env_param_names_it_and_lists_valid_ones():
    with pytest.raises(TypeError) as err:
        gpurl.make("simple_tag", num_envs=2, device="cpu", num_adversary=3)
    msg = str(err.value)
    assert "num_adversary'" in msg
    for valid in ("num_adversaries", "num_good", "num_obstacles", "max_cycles", "continuous_actions",
                  "terminate_on_success", "dynamic_rescaling"):
        assert valid in msg


@pytest.mark.parametrize("name, value", [
    ("num_adversaries", 0), ("num_good", 0), ("num_obstacles", -1), ("max_cycles", 0), ("num_good", 1.0),
    ("num_adversaries", True), ("max_cycles", "25"), ("continuous_actions", 1), ("terminate_on_success", None),
])
def test_param_validation_names_the_parameter(name, value):
    with pytest.raises(ValueError) as err:
        gpurl.make("simple_tag", num_envs=2, device="cpu", **{name: value})
    assert name in str(err.value)


def test_bad_reset_mask_and_seed_change_nothing(stepped):
    env = stepped[False]
    _rejected(env, TypeError, lambda: env.reset(mask=torch.ones(3, dtype=torch.int64)), "mask")
    _rejected(env, ValueError, lambda: env.reset(mask=torch.ones(4, dtype=torch.bool)), "mask")
    _rejected(env, ValueError, lambda: env.reset(seed=-1), "seed")
