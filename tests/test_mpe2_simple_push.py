"""``simple_push`` against mpe2's ``simple_push_v3``: whole episodes side by side (tests/mpe2_pairing.py), and its
goal draw with the colours the good agent observes."""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("mpe2")
from mpe2 import simple_push_v3  # noqa: E402

import gpurl  # noqa: E402
from mpe2_pairing import (box_pairing, Pairing, check_pettingzoo, check_whole_episodes, host_state,  # noqa: E402
                          inject_start, make_pair, run_episode, set_world)

pytestmark = pytest.mark.cpu


def set_goals(world, state: dict, e: int) -> None:
    """gpurl's ``goal_a`` as mpe2's goal landmarks, and the good agent's colour repainted from its goal as
    mpe2's reset_world paints it (channel goal + 1 raised by 0.5)."""
    n = len(world.agents)
    for k, agent in enumerate(world.agents):
        agent.goal_a = world.landmarks[int(state["goal_a"][k]) - n]
        if not agent.adversary:
            agent.color = np.array([0.25, 0.25, 0.25])
            agent.color[agent.goal_a.index + 1] += 0.5


def get_goals(world) -> dict:
    n = len(world.agents)
    return {"goal_a": np.array([n + a.goal_a.index for a in world.agents], np.int32)}


PAIRING = dict(set_draws=set_goals, get_draws=get_goals)


@pytest.mark.parametrize("continuous", box_pairing("simple_push"))
@pytest.mark.parametrize("crowded", [False, True], ids=["spread", "crowded"])
def test_whole_episodes_match_mpe2(continuous, crowded):
    pairing = Pairing("simple_push", simple_push_v3, dict(max_cycles=25, continuous_actions=continuous), **PAIRING)
    stats = check_whole_episodes(pairing, crowded)
    assert stats["steps"] == 25 and stats["truncated"] == 3 and stats["terminated"] == 0
    assert stats["replays"] == 0


def test_pushing_from_contact_matches_mpe2():
    """Both agents start overlapping on top of the goal, each env with its own goal landmark: contacts every
    step, rewards from the written goals."""
    pairing = Pairing("simple_push", simple_push_v3, dict(max_cycles=10), **PAIRING)
    env, theirs = make_pair(pairing)
    gen = torch.Generator().manual_seed(5)
    inject_start(pairing, env, theirs, gen, crowded=True)
    env.state.goal_a.copy_(torch.tensor([[2, 2], [3, 3], [2, 2]], dtype=torch.int32))
    goal = env.state.landmark_pos[torch.arange(3), env.state.goal_a[:, 0].long() - 2]
    env.state.pos.copy_(goal[:, None, :] + torch.tensor([[0.0, 0.0], [0.03, -0.02]]))
    for e, m in enumerate(theirs):
        set_world(pairing, m, host_state(env, e), e)
    stats = run_episode(pairing, env, theirs, gen, check_start_obs=False)
    assert stats["steps"] == 10 and stats["replays"] == 0


def test_goal_draw_spread_and_observed():
    """goal_a is one landmark for both agents, spread over the two, and the good agent observes it: its
    relative position, its colour (channel goal + 1 at 0.75) and the landmarks' fixed colours."""
    env = gpurl.make("simple_push", num_envs=64, device="cpu", seed=1)
    goals = []
    for seed in range(2):
        obs = env.reset(seed=seed)
        goal = env.state.goal_a
        assert (goal == goal[:, :1]).all()
        l = goal[:, 0].long() - 2
        goals.append(l)
        want = env.state.landmark_pos[torch.arange(64), l] - env.state.pos[:, 1]
        torch.testing.assert_close(obs[:, 1, 2:4], want, rtol=0, atol=1e-6)
        colour = torch.full((64, 3), 0.25)
        colour[torch.arange(64), l + 1] = 0.75
        assert torch.equal(obs[:, 1, 4:7], colour)
        assert torch.equal(obs[:, 1, 11:17], torch.tensor([0.1, 0.9, 0.1, 0.1, 0.1, 0.9]).expand(64, 6))
        assert (obs[:, 0, 8:] == 0).all()  # the adversary's padding
    counts = torch.bincount(torch.cat(goals), minlength=2)
    assert (counts >= 40).all(), counts


def test_pettingzoo_adapter_passes_the_api_test_with_mpe2s_names_and_spaces():
    check_pettingzoo("simple_push", simple_push_v3)
