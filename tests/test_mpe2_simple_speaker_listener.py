"""``simple_speaker_listener`` against mpe2's ``simple_speaker_listener_v4``: whole episodes side by side
(tests/mpe2_pairing.py), and its per-episode draw ``goal_b``."""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("mpe2")
from mpe2 import simple_speaker_listener_v4  # noqa: E402

import gpurl  # noqa: E402
from mpe2_goals import get_goal_b, set_goal_b  # noqa: E402
from mpe2_pairing import Pairing, check_pettingzoo, check_whole_episodes, make_pair  # noqa: E402

pytestmark = pytest.mark.cpu

#: mpe2's landmark colours (reset_world).
COLOURS = np.array([[0.65, 0.15, 0.15], [0.15, 0.65, 0.15], [0.15, 0.15, 0.65]], np.float32)


def pairing(continuous: bool) -> Pairing:
    return Pairing("simple_speaker_listener", simple_speaker_listener_v4,
                   dict(max_cycles=25, continuous_actions=continuous), set_draws=set_goal_b, get_draws=get_goal_b)


@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "continuous"])
@pytest.mark.parametrize("crowded", [False, True], ids=["spread", "crowded"])
def test_whole_episodes_match_mpe2(continuous, crowded):
    stats = check_whole_episodes(pairing(continuous), crowded)
    assert stats["steps"] == 25 and stats["truncated"] == 3 and stats["terminated"] == 0
    assert stats["replays"] == 0


@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "continuous"])
def test_groups_and_spaces_are_mpe2s(continuous):
    env, (theirs, *_) = make_pair(pairing(continuous), num_envs=1)
    assert env.agent_prefixes == {"speaker": "speaker", "listener": "listener"}
    assert theirs.possible_agents == ["speaker_0", "listener_0"]
    for (name, group), agent in zip(env.groups.items(), theirs.possible_agents):
        assert group.action_space == theirs.action_space(agent)
        assert group.obs_dim == theirs.observation_space(agent).shape[0]
    assert env.action_dims == (5 if continuous else 1)


def test_goal_b_draw_is_a_uniform_landmark_and_drives_colour_and_reward():
    env = gpurl.make("simple_speaker_listener", num_envs=60, device="cpu", seed=5)
    obs = env.reset()
    goal = env.state.goal_b.numpy()
    assert set(np.unique(goal[:, 0])) == {2, 3, 4} and (goal[:, 1] == -1).all()
    np.testing.assert_array_equal(obs[:, 0, :3].numpy(), COLOURS[goal[:, 0] - 2])
    assert (obs[:, 0, 3:] == 0).all()  # the speaker's row is zero-padded to the listener's 11
    env.state.goal_b[:, 0] = 3  # a written goal takes effect
    obs, reward, *_ = env.step(torch.zeros((60, 2), dtype=torch.int64))
    np.testing.assert_array_equal(obs[:, 0, :3].numpy(), np.broadcast_to(COLOURS[1], (60, 3)))
    want = -((env.state.pos[:, 1] - env.state.landmark_pos[:, 1]) ** 2).sum(1)
    np.testing.assert_allclose(reward.numpy(), torch.stack([want, want], 1).numpy(), rtol=0, atol=1e-6)
    np.testing.assert_array_equal(env.state.vel[:, 0].numpy(), 0)  # the speaker never moves


def test_pettingzoo_adapter_passes_the_api_test_with_mpe2s_names_and_spaces():
    check_pettingzoo("simple_speaker_listener", simple_speaker_listener_v4)
