"""Reproducibility: seeds, env-id offsets (splits across devices), re-seeding, and the reset draws."""
import math

import numpy as np
import pytest
import torch

from gpurl.envs.tag_continuous.reference import observe_ref, reset_ref

from tag_env_helpers import STATE_KEYS, force_truncation, snapshot
from tag_harness import make_small, random_actions

pytestmark = pytest.mark.cpu

# Short episodes and a wide tagging radius: 30 steps cross truncations and terminations.
CONFIG = dict(num_taggers=2, num_runners=4, episode_length=12, tagging_distance=0.2)


def _record(env, actions_seq):
    """obs/reward/flags/final_obs/state after reset and each step (copies)."""
    out = [dict(obs=env.reset().clone(), **snapshot(env))]
    for actions in actions_seq:
        obs, reward, term, trunc, info = env.step(actions)
        out.append(dict(obs=obs.clone(), reward=reward.clone(), terminated=term.clone(), truncated=trunc.clone(),
                        final_obs=info["final_obs"].clone(), **snapshot(env)))
    return out


def _actions(env, steps, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [random_actions(env, gen) for _ in range(steps)]


def _assert_same_records(a, b, envs_a=slice(None), envs_b=slice(None)):
    assert len(a) == len(b)
    for t, (ra, rb) in enumerate(zip(a, b)):
        assert ra.keys() == rb.keys()
        for k in ra:
            got, want = np.asarray(ra[k][envs_a]), np.asarray(rb[k][envs_b])
            np.testing.assert_array_equal(got, want, err_msg=f"record {t}: {k}")


def test_same_seed_same_trajectory_across_episode_ends():
    a, b = make_small(num_envs=5, seed=21, **CONFIG), make_small(num_envs=5, seed=21, **CONFIG)
    actions = _actions(a, 30)
    ra, rb = _record(a, actions), _record(b, actions)
    _assert_same_records(ra, rb)
    ends = sum(int(r["terminated"].sum()) + int(r["truncated"].sum()) for r in ra[1:])
    assert ends >= 5  # the comparison covered autoresets


def test_different_seeds_differ_in_every_env():
    a, b = make_small(num_envs=5, seed=21, **CONFIG), make_small(num_envs=5, seed=22, **CONFIG)
    a.reset()
    b.reset()
    assert not torch.equal(a.obs, b.obs)
    for e in range(5):
        assert not torch.equal(a.state.x[e], b.state.x[e])
        assert not torch.equal(a.state.y[e], b.state.y[e])


def test_env_id_offset_splits_give_the_same_per_env_trajectories():
    whole = make_small(num_envs=6, seed=8, **CONFIG)
    first = make_small(num_envs=2, seed=8, env_id_offset=0, **CONFIG)
    second = make_small(num_envs=4, seed=8, env_id_offset=2, **CONFIG)
    actions = _actions(whole, 30, seed=1)
    r_whole = _record(whole, actions)
    r_first = _record(first, [a[:2].clone() for a in actions])
    r_second = _record(second, [a[2:].clone() for a in actions])
    _assert_same_records(r_first, r_whole, envs_b=slice(0, 2))
    _assert_same_records(r_second, r_whole, envs_b=slice(2, 6))
    ends = sum(int(r["terminated"].sum()) + int(r["truncated"].sum()) for r in r_whole[1:])
    assert ends >= 6
    # Without the offset the second shard would replay envs 0..3 instead.
    unshifted = make_small(num_envs=4, seed=8, **CONFIG)
    unshifted.reset()
    assert not np.array_equal(unshifted.state.x.numpy(), r_second[0]["x"])
    np.testing.assert_array_equal(unshifted.state.x[:2].numpy(), r_whole[0]["x"][:2])


def test_reset_with_seed_reproduces_a_fresh_env():
    used = make_small(num_envs=4, seed=1, **CONFIG)
    used.reset()
    for actions in _actions(used, 15, seed=2):  # crosses episode ends: episode counters move on
        used.step(actions)
    assert (used.state.episode > 1).any()
    used.reset(seed=77)
    fresh = make_small(num_envs=4, seed=77, **CONFIG)
    fresh.reset()
    a, b = snapshot(used), snapshot(fresh)
    for k in STATE_KEYS:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    assert torch.equal(used.obs, fresh.obs)
    actions = _actions(fresh, 20, seed=3)
    ended = 0
    for t, act in enumerate(actions):
        ra, rb = used.step(act), fresh.step(act)
        for x, y in zip(ra[:4], rb[:4]):
            assert torch.equal(x, y), f"step {t}"
        # final_obs rows of envs that did not end this step are stale (used holds older episodes').
        done = ra[2] | ra[3]
        assert torch.equal(ra[4]["final_obs"][done], rb[4]["final_obs"][done]), f"step {t}"
        ended += int(done.sum())
    assert ended >= 4


def test_reset_without_seed_draws_the_next_episode():
    env = make_small(num_envs=3, seed=5, **CONFIG)
    env.reset()
    start = snapshot(env)
    env.reset()
    again = snapshot(env)
    assert not np.array_equal(start["x"], again["x"])
    np.testing.assert_array_equal(again["episode"], [2, 2, 2])
    want = reset_ref(env.params, 3, 5, start["episode"])
    for k in STATE_KEYS:
        np.testing.assert_array_equal(again[k], want[k], err_msg=k)


def _assert_spec_start(s, p, envs):
    L = np.float32(p.grid_length)
    headings = np.array([0.0, math.pi / 2, math.pi, 3 * math.pi / 2], dtype=np.float32)
    for k in ("x", "y", "speed", "direction", "acceleration"):
        assert s[k].dtype == np.float32, k
    x, y, d = s["x"][envs], s["y"][envs], s["direction"][envs]
    assert ((x >= 0) & (x < L)).all() and ((y >= 0) & (y < L)).all()
    assert np.isin(d, headings).all(), np.unique(d)
    assert (s["speed"][envs] == 0).all() and (s["acceleration"][envs] == 0).all()
    assert (s["alive"][envs] == 1).all()
    assert (s["num_runners"][envs] == p.num_runners).all()
    assert (s["timestep"][envs] == 0).all()


def test_reset_draws_follow_the_spec():
    env = make_small(num_envs=12, seed=9, num_taggers=3, num_runners=9, grid_length=7.0)
    env.reset()
    s = snapshot(env)
    _assert_spec_start(s, env.params, slice(None))
    # All four headings occur, positions spread over the arena, and no two envs share a start.
    assert len(np.unique(s["direction"])) == 4
    assert s["x"].min() < 1.0 and s["x"].max() > 6.0 and s["y"].min() < 1.0 and s["y"].max() > 6.0
    assert len(np.unique(s["x"])) == s["x"].size
    for e in range(12):
        for f in range(e):
            assert not np.array_equal(s["x"][e], s["x"][f]), (e, f)
    # The draws are the counter-based ones of the reference, keyed by (seed, env id, agent, episode).
    want = reset_ref(env.params, 12, 9, np.zeros(12, np.int32))
    for k in STATE_KEYS:
        np.testing.assert_array_equal(s[k], want[k], err_msg=k)
    np.testing.assert_array_equal(env.obs.numpy(), observe_ref(env.params, s))


def test_autoreset_draws_follow_the_spec():
    env = make_small(num_envs=4, seed=9, num_taggers=3, num_runners=9, grid_length=7.0, tagging_distance=0.0)
    env.reset()
    env.step(random_actions(env, torch.Generator().manual_seed(0)))
    force_truncation(env, [0, 2])
    before = snapshot(env)
    env.step(random_actions(env, torch.Generator().manual_seed(1)))
    after = snapshot(env)
    _assert_spec_start(after, env.params, [0, 2])
    np.testing.assert_array_equal(after["episode"], before["episode"] + [1, 0, 1, 0])
    np.testing.assert_array_equal(after["timestep"], [0, 2, 0, 2])
    # A new episode draws a new start.
    assert not np.array_equal(after["x"][0], reset_ref(env.params, 4, 9, np.zeros(4, np.int32))["x"][0])
