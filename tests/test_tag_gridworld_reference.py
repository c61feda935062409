"""CPU kernels of tag_gridworld vs the NumPy reference (bit for bit), and cases worked by hand from the spec.

The hand cases inject a state through ``env.state`` and check numbers written out here from
docs/specs/tag_gridworld.md, not from the reference. Every env in this file steps int64 actions, so
the process compiles one step build (~15 s on 2 vCPUs) and one reset build.
"""
import numpy as np
import pytest
import torch

from gpurl.envs.tag_gridworld.reference import observe_ref, reset_ref

from gridworld_harness import make_small, run_against_reference

pytestmark = pytest.mark.cpu

f32 = np.float32
STAY, RIGHT, LEFT, UP, DOWN = 0, 1, 2, 3, 4  # x+1, x-1, y+1, y-1


# ---- reference vs CPU kernels ----------------------------------------------------------------------


@pytest.mark.parametrize("full", [True, False], ids=["full_obs", "partial_obs"])
def test_cpu_kernels_equal_reference_across_autoresets(full):
    env = make_small(use_full_observation=full)
    terminated, truncated = run_against_reference(env, steps=40)
    assert terminated >= env.num_envs and truncated >= 2  # crossed both kinds of episode end


def test_fixed_start_odd_sizes_and_env_id_offset():
    # random_start=False: every episode restarts from the original's fixed cells; grid_length 5 -> centre 2.
    env = make_small(num_envs=5, num_taggers=2, grid_length=5, episode_length=6, random_start=False,
                     use_full_observation=False, env_id_offset=11, wall_hit_penalty=0.25,
                     tag_reward_for_tagger=1.5, tag_penalty_for_runner=0.5, step_cost_for_tagger=0.3)
    terminated, truncated = run_against_reference(env, steps=20, seed=1)
    assert terminated + truncated >= env.num_envs


def test_one_tagger_large_grid_rarely_tags():
    env = make_small(num_envs=3, num_taggers=1, grid_length=40, episode_length=5)
    terminated, truncated = run_against_reference(env, steps=12, seed=2)
    assert truncated >= 3


# ---- by hand from the spec ----------------------------------------------------------------------------


def _inject(env, xs, ys, timestep=0):
    """Every env gets agent positions ``xs``/``ys`` (lists of N) and ``timestep``."""
    env.state.x.copy_(torch.tensor(xs, dtype=torch.int32).expand(env.num_envs, -1))
    env.state.y.copy_(torch.tensor(ys, dtype=torch.int32).expand(env.num_envs, -1))
    env.state.timestep.fill_(timestep)


def _act(env, per_agent):
    return torch.tensor(per_agent, dtype=torch.int64).expand(env.num_envs, -1).contiguous()


def test_tag_rewards_everyone_and_terminates():
    # 3 taggers + runner (agent 3) on L = 4. Tagger 0 steps onto the runner's cell (2, 2); tagger 2 walks
    # into the x = 0 wall on the same step.
    env = make_small(num_envs=2, num_taggers=3, grid_length=4, episode_length=10, autoreset=False,
                     use_full_observation=False)
    env.reset()
    _inject(env, xs=[1, 4, 0, 2], ys=[2, 4, 1, 2], timestep=3)
    obs, reward, terminated, truncated, _ = env.step(_act(env, [RIGHT, STAY, LEFT, STAY]))
    np.testing.assert_array_equal(env.state.x[0].numpy(), [2, 4, 0, 2])
    np.testing.assert_array_equal(env.state.timestep.numpy(), [4, 4])
    # taggers +10, the runner -2; the wall-hitting tagger 10 - 0.1 (float64 sum rounded once)
    np.testing.assert_array_equal(reward[0].numpy(), f32([10.0, 10.0, 10.0 - 0.1, -2.0]))
    assert terminated.tolist() == [True, True] and truncated.tolist() == [False, False]
    assert env.step_metrics()["tags"].tolist() == [1.0, 1.0]
    # partial obs: [own x/L, own y/L, target x/L, target y/L, is_runner, t/T]
    np.testing.assert_array_equal(obs[0, 1].numpy(), f32([1.0, 1.0, 0.5, 0.5, 0.0, 0.4]))
    np.testing.assert_array_equal(obs[0, 3].numpy(), f32([0.5, 0.5, 0.5, 0.5, 1.0, 0.4]))


def test_walls_clip_and_cost_the_penalty_once():
    # L = 3. Each tagger pushes out through a different wall; the runner moves freely to (2, 3).
    env = make_small(num_envs=1, num_taggers=4, grid_length=3, autoreset=False)
    env.reset()
    _inject(env, xs=[0, 3, 1, 1, 2], ys=[1, 1, 0, 3, 2])
    obs, reward, terminated, truncated, _ = env.step(_act(env, [LEFT, RIGHT, DOWN, UP, UP]))
    np.testing.assert_array_equal(env.state.x[0].numpy(), [0, 3, 1, 1, 2])
    np.testing.assert_array_equal(env.state.y[0].numpy(), [1, 1, 0, 3, 3])
    # untagged: every tagger -0.1 (wall) - 0.01 (step cost), the runner +0.01 (no wall)
    np.testing.assert_array_equal(reward[0].numpy(), f32([-0.1 - 0.01] * 4 + [0.01]))
    assert not terminated[0] and not truncated[0]
    # Tagger 3 and the runner push into y = L again while the others stay.
    _, reward, *_ = env.step(_act(env, [STAY, STAY, STAY, UP, UP]))
    np.testing.assert_array_equal(env.state.y[0].numpy(), [1, 1, 0, 3, 3])
    np.testing.assert_array_equal(reward[0].numpy(), f32([-0.01, -0.01, -0.01, -0.1 - 0.01, -0.1 + 0.01]))


def test_truncation_at_episode_length_unless_tagged():
    env = make_small(num_envs=2, num_taggers=1, grid_length=5, episode_length=7, autoreset=False)
    env.reset()
    _inject(env, xs=[0, 5], ys=[0, 5], timestep=6)
    env.state.x[1, 0] = 4  # env 1: the tagger reaches the runner on the last step
    env.state.y[1, 0] = 5
    _, reward, terminated, truncated, _ = env.step(_act(env, [RIGHT, STAY]))
    assert truncated.tolist() == [True, False]
    assert terminated.tolist() == [False, True]
    np.testing.assert_array_equal(reward.numpy(), f32([[-0.01, 0.01], [10.0, -2.0]]))


def test_full_observation_layout():
    # 2 taggers + runner: blocks x/L, y/L, is_runner, is_self (3 each), then t/T; obs_dim 13.
    env = make_small(num_envs=1, num_taggers=2, grid_length=4, episode_length=8)
    env.reset()
    _inject(env, xs=[0, 1, 4], ys=[2, 3, 4], timestep=1)
    obs, *_ = env.step(_act(env, [STAY, STAY, STAY]))
    assert env.obs_dim == 13
    xs, ys = [0.0, 0.25, 1.0], [0.5, 0.75, 1.0]
    for i in range(3):
        is_self = [1.0 if j == i else 0.0 for j in range(3)]
        np.testing.assert_array_equal(obs[0, i].numpy(), f32(xs + ys + [0.0, 0.0, 1.0] + is_self + [0.25]))


def test_runner_targets_nearest_tagger_by_manhattan_distance_ties_to_lowest():
    env = make_small(num_envs=2, num_taggers=4, grid_length=10, use_full_observation=False)
    env.reset()
    # Runner at (5, 5). Env 0: tagger 1 at Manhattan 4 (Euclidean 2.83) vs tagger 2 at Manhattan 3 (Euclidean
    # 3): Manhattan picks tagger 2. Env 1: taggers 1 and 3 tie at Manhattan 2: the lower index wins.
    env.state.x.copy_(torch.tensor([[0, 7, 8, 10, 5], [0, 6, 9, 4, 5]], dtype=torch.int32))
    env.state.y.copy_(torch.tensor([[0, 7, 5, 10, 5], [0, 6, 9, 6, 5]], dtype=torch.int32))
    obs, *_ = env.step(_act(env, [STAY] * 5))
    np.testing.assert_array_equal(obs[0, 4, 2:4].numpy(), f32([0.8, 0.5]))
    np.testing.assert_array_equal(obs[1, 4, 2:4].numpy(), f32([0.6, 0.6]))
    # taggers target the runner
    np.testing.assert_array_equal(obs[:, :4, 2:4].numpy(), np.full((2, 4, 2), f32(0.5)))


def test_fixed_start_is_the_originals():
    env = make_small(num_envs=2, num_taggers=3, grid_length=7, random_start=False, use_full_observation=False)
    obs = env.reset()
    np.testing.assert_array_equal(env.state.x.numpy(), [[3, 3, 3, 0]] * 2)
    np.testing.assert_array_equal(env.state.y.numpy(), [[3, 3, 3, 0]] * 2)
    np.testing.assert_array_equal(obs[0, 3].numpy(), f32([0.0, 0.0, 3 / 7, 3 / 7, 1.0, 0.0]))


def test_random_start_covers_every_cell_including_the_far_walls():
    env = make_small(num_envs=64, num_taggers=6, grid_length=3)
    env.reset()
    for _ in range(3):  # redraw a few episodes
        env.reset(mask=torch.ones(64, dtype=torch.bool))
        want = reset_ref(env.params, 64, env.seed, env.state.episode.numpy() - 1)
        np.testing.assert_array_equal(env.state.x.numpy(), want["x"])
        cells = set(zip(env.state.x.flatten().tolist(), env.state.y.flatten().tolist()))
        assert cells == {(a, b) for a in range(4) for b in range(4)}
    np.testing.assert_array_equal(env.obs.numpy(), observe_ref(env.params, want))
