"""simple_tag's CPU kernel vs the float64 NumPy reference (the spec in code), step by step.

Irregular sizes (7 envs, 3 adversaries + 2 good agents, 3 obstacles), short episodes so that runs
cross several autoreset boundaries, and crowded states injected every few steps so that deep contacts,
catches and (with terminate_on_success) terminations happen. Tolerances: see simple_tag_harness.
The CPU build of simple_tag is one kernel for every action dtype and for reset (about 30-40 s to
compile on 2 vCPUs, once per process).
"""
import numpy as np
import pytest
import torch

from simple_tag_harness import make_env, run_against_reference, snapshot
from simple_tag_reference import observe_ref, step_ref

pytestmark = pytest.mark.cpu


@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "continuous"])
def test_cpu_kernel_equals_reference_across_autoresets(continuous):
    env = make_env(continuous_actions=continuous)
    counts = run_against_reference(env, steps=30, seed=int(continuous), crowd_every=3)
    assert counts["truncated"] == 3 * env.num_envs  # 30 steps of 9-step episodes: three boundaries per env
    assert counts["contacts"] >= 50 and counts["catches"] >= 10, counts


def test_terminate_on_success_ends_and_autoresets():
    # One good agent and crowds every other step: all caught happens; episodes long enough not to truncate.
    env = make_env(num_adversaries=4, num_good=1, num_obstacles=1, max_cycles=50, terminate_on_success=True)
    counts = run_against_reference(env, steps=24, seed=5, crowd_every=2)
    assert counts["terminated"] >= 3 and counts["truncated"] == 0, counts


def test_other_shapes_no_obstacles_and_many_agents():
    for overrides in (dict(num_adversaries=1, num_good=1, num_obstacles=0, num_envs=3),
                      dict(num_adversaries=6, num_good=4, num_obstacles=5, num_envs=2, max_cycles=4)):
        env = make_env(**overrides)
        counts = run_against_reference(env, steps=9, seed=2, crowd_every=2)
        assert counts["contacts"] > 0, overrides


def test_coincident_centres_feel_no_contact_force():
    # mpe2 gives NaN for d = 0; gpurl applies no force for that pair (spec step 1), nothing else changes.
    env = make_env(num_envs=2, num_adversaries=2, num_good=1, num_obstacles=1)
    env.reset()
    env.state.pos[0, 1] = env.state.pos[0, 0]          # two adversaries on one point
    env.state.pos[1, 2] = env.state.landmark_pos[1, 0]  # a good agent at an obstacle's centre
    env.state.vel.zero_()
    before = snapshot(env)
    obs, reward, *_ = env.step(torch.zeros(2, 3, dtype=torch.int64))
    ref = {k: v.copy() for k, v in before.items()}
    ref_obs, ref_reward, *_ = step_ref(env.params, ref, np.zeros((2, 3), np.int64))
    assert np.isfinite(obs.numpy()).all()
    np.testing.assert_allclose(env.state.vel.numpy(), ref["vel"], rtol=0, atol=1e-5)
    np.testing.assert_allclose(obs.numpy(), ref_obs, rtol=0, atol=1e-5)
    # Obstacle contact pushed nothing at the centre; the two adversaries stay together (no third body near).
    np.testing.assert_array_equal(env.state.pos[1, 2].numpy(), before["pos"][1, 2])


def test_observation_layout_by_hand():
    env = make_env(num_envs=1, num_adversaries=2, num_good=2, num_obstacles=1)
    env.reset()
    pos = np.array([[0.1, 0.2], [0.5, -0.5], [-0.7, 0.3], [0.9, 0.9]], np.float32)
    vel = np.array([[1, 2], [3, 4], [5, 6], [7, 8]], np.float32) / 10
    env.state.pos[0] = torch.from_numpy(pos)
    env.state.vel[0] = torch.from_numpy(vel)
    env.state.landmark_pos[0, 0] = torch.tensor([0.0, -0.3])
    obs, *_ = env.step(torch.zeros(1, 4, dtype=torch.int64))
    s = snapshot(env)
    p, v, lm = s["pos"][0], s["vel"][0], s["landmark_pos"][0]
    # adversary 1: v1, p1, obstacle - p1, agents 0, 2, 3 - p1, velocities of good agents 2, 3
    want = np.concatenate([v[1], p[1], lm[0] - p[1], p[0] - p[1], p[2] - p[1], p[3] - p[1], v[2], v[3]])
    np.testing.assert_allclose(obs[0, 1].numpy(), want, rtol=0, atol=1e-7)
    # good agent 2: ... velocities of good agent 3 only, then 2 zeros (obs_dim is the adversaries')
    want = np.concatenate([v[2], p[2], lm[0] - p[2], p[0] - p[2], p[1] - p[2], p[3] - p[2], v[3], [0, 0]])
    np.testing.assert_allclose(obs[0, 2].numpy(), want, rtol=0, atol=1e-7)
    np.testing.assert_allclose(obs.numpy(), observe_ref(env.params, s), rtol=0, atol=1e-7)
