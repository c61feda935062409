"""``simple_reference`` against mpe2's ``simple_reference_v3``: whole episodes side by side
(tests/mpe2_pairing.py), and its per-episode draw ``goal_b``."""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("mpe2")
from mpe2 import simple_reference_v3  # noqa: E402

import gpurl  # noqa: E402
from mpe2_goals import get_goal_b, set_goal_b  # noqa: E402
from mpe2_pairing import Pairing, check_pettingzoo, check_whole_episodes  # noqa: E402

pytestmark = pytest.mark.cpu

#: mpe2's landmark colours (reset_world).
COLOURS = np.array([[0.75, 0.25, 0.25], [0.25, 0.75, 0.25], [0.25, 0.25, 0.75]], np.float32)
GOAL_COLOUR = slice(8, 11)  # after v (2) and the three landmarks (6)


def pairing(**params) -> Pairing:
    return Pairing("simple_reference", simple_reference_v3, {"max_cycles": 25, **params},
                   set_draws=set_goal_b, get_draws=get_goal_b)


@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "continuous"])
@pytest.mark.parametrize("crowded", [False, True], ids=["spread", "crowded"])
def test_whole_episodes_match_mpe2(continuous, crowded):
    stats = check_whole_episodes(pairing(continuous_actions=continuous), crowded)
    assert stats["steps"] == 25 and stats["truncated"] == 3 and stats["terminated"] == 0
    assert stats["replays"] == 0


def test_local_ratio_matches_mpe2():
    stats = check_whole_episodes(pairing(continuous_actions=False, local_ratio=0.2, max_cycles=12), crowded=True)
    assert stats["steps"] == 12 and stats["truncated"] == 3 and stats["replays"] == 0


def test_goal_b_draws_are_uniform_landmarks_and_drive_colour_and_reward():
    env = gpurl.make("simple_reference", num_envs=60, device="cpu", seed=11)
    obs = env.reset()
    goal = env.state.goal_b.numpy()
    assert goal.shape == (60, 2) and set(np.unique(goal)) == {2, 3, 4}
    for k in range(2):  # each agent's goal is drawn on its own: every landmark appears for both
        assert set(np.unique(goal[:, k])) == {2, 3, 4}
    np.testing.assert_array_equal(obs[:, :, GOAL_COLOUR].numpy(), COLOURS[goal - 2])
    # a written goal takes effect: agent 0 now knows landmark 0, which agent 1 must reach
    env.state.goal_b[:, 0] = 2
    env.state.goal_b[:, 1] = 4
    obs, reward, *_ = env.step(torch.zeros((60, 2), dtype=torch.int64))
    np.testing.assert_array_equal(obs[:, 0, GOAL_COLOUR].numpy(), np.broadcast_to(COLOURS[0], (60, 3)))
    np.testing.assert_array_equal(obs[:, 1, GOAL_COLOUR].numpy(), np.broadcast_to(COLOURS[2], (60, 3)))
    pos, lm = env.state.pos.numpy(), env.state.landmark_pos.numpy()
    own = -np.stack([np.linalg.norm(pos[:, 1] - lm[:, 0], axis=1), np.linalg.norm(pos[:, 0] - lm[:, 2], axis=1)], 1)
    want = own.mean(1, keepdims=True) * 0.5 + own * 0.5
    np.testing.assert_allclose(reward.numpy(), want, rtol=0, atol=1e-6)


def test_pettingzoo_adapter_passes_the_api_test_with_mpe2s_names_and_spaces():
    check_pettingzoo("simple_reference", simple_reference_v3)
