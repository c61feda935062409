"""CPU kernels of tag_continuous vs the NumPy reference (the spec in code), bit for bit."""
import numpy as np
import pytest

from tag_harness import make_small, run_against_reference

pytestmark = pytest.mark.cpu


@pytest.mark.parametrize("full", [True, False], ids=["full_obs", "k_nearest"])
def test_cpu_kernels_equal_reference_across_truncations(full):
    env = make_small(use_full_observation=full, num_other_agents_observed=4, episode_length=25)
    terminated, truncated = run_against_reference(env, steps=80)
    assert truncated >= env.num_envs * 2  # crossed several autoreset boundaries


def test_many_tags_per_step_and_terminations():
    # A large tagging distance makes several runners fall to one tagger in one step and ends episodes.
    env = make_small(use_full_observation=False, num_other_agents_observed=5, tagging_distance=0.35,
                     episode_length=60, edge_hit_penalty=-0.25, step_penalty_for_tagger=-0.1,
                     step_reward_for_runner=0.05)
    terminated, truncated = run_against_reference(env, steps=60, seed=1)
    assert terminated >= env.num_envs


def test_runners_stay_in_game_when_configured():
    env = make_small(use_full_observation=True, runner_exits_game_after_tagged=False, tagging_distance=0.3,
                     episode_length=15, skill_level_tagger=1.5, skill_level_runner=0.7)
    run_against_reference(env, steps=40, seed=2)
    assert (env.state.num_runners == env.params.num_runners).all()


def test_k_larger_than_alive_agents_pads_with_zeros():
    env = make_small(num_taggers=2, num_runners=4, use_full_observation=False, num_other_agents_observed=6,
                     tagging_distance=0.4, episode_length=30)
    run_against_reference(env, steps=40, seed=3)


def test_crowded_ties_are_ordered_by_index():
    # Everyone at one point: distances tie, no radius separates them; order must fall back to index.
    env = make_small(use_full_observation=False, num_other_agents_observed=3, tagging_distance=0.0)
    env.reset()
    env.state.x.fill_(1.0)
    env.state.y.fill_(1.0)
    import torch

    obs, *_ = env.step(torch.zeros(env.num_envs, env.num_agents, 2, dtype=torch.int64))
    k = 3
    # agent 0's neighbours are 1, 2, 3 (types: taggers 1, 2 -> 1.0; runner 3 -> 0.0)
    np.testing.assert_array_equal(obs[0, 0, 5 * k: 6 * k].numpy(), [1.0, 1.0, 0.0])
    # agent 5's neighbours are 0, 1, 2: all taggers
    np.testing.assert_array_equal(obs[0, 5, 5 * k: 6 * k].numpy(), [1.0, 1.0, 1.0])
