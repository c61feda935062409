"""``simple_crypto`` against mpe2's ``simple_crypto_v3``: whole episodes side by side (tests/mpe2_pairing.py),
silent channels, and its goal and key draws."""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("mpe2")
from mpe2 import simple_crypto_v3  # noqa: E402

import gpurl  # noqa: E402
from mpe2_pairing import (Pairing, check_pettingzoo, check_whole_episodes, host_state,  # noqa: E402
                          inject_start, make_pair, mpe2_actions, obs_matrix, set_world)

pytestmark = pytest.mark.cpu

ALICE = 2


def set_draws(world, state: dict, e: int) -> None:
    """gpurl's ``goal_a`` as mpe2's goal landmarks; alice's ``key`` as mpe2's key, that landmark's colour
    (None for eve and bob)."""
    n = len(world.agents)
    for k, agent in enumerate(world.agents):
        agent.goal_a = world.landmarks[int(state["goal_a"][k]) - n]
        key = int(state["key"][k])
        agent.key = None if key < 0 else world.landmarks[key - n].color


def get_draws(world) -> dict:
    n = len(world.agents)
    colours = [lm.color for lm in world.landmarks]

    def key_index(agent):
        key = agent._key  # the property refuses None
        return -1 if key is None else n + next(l for l, c in enumerate(colours) if np.array_equal(c, key))

    return {"goal_a": np.array([n + world.landmarks.index(a.goal_a) for a in world.agents], np.int32),
            "key": np.array([key_index(a) for a in world.agents], np.int32)}


def pairing(**params) -> Pairing:
    return Pairing("simple_crypto", simple_crypto_v3, params, set_draws=set_draws, get_draws=get_draws)


@pytest.mark.parametrize("continuous, crowded", [(False, False), (True, True)],
                         ids=["discrete-spread", "continuous-crowded"])
def test_whole_episodes_match_mpe2(continuous, crowded):
    stats = check_whole_episodes(pairing(max_cycles=25, continuous_actions=continuous), crowded)
    assert stats["steps"] == 25 and stats["truncated"] == 3 and stats["terminated"] == 0
    assert stats["nonzero_rewards"] > 0 and stats["replays"] == 0


def test_silent_channels_match_mpe2():
    """An all-zero message (Box components <= 0) is no answer: mpe2 leaves it out of the rewards. Each env
    starts from its own goal and key; eve or bob falls silent in turn, beside random messages."""
    p = pairing(max_cycles=7, continuous_actions=True)  # 6 steps, none the last
    env, theirs = make_pair(p)
    gen = torch.Generator().manual_seed(11)
    inject_start(p, env, theirs, gen, crowded=False)
    env.state.goal_a.copy_(torch.tensor([[3], [4], [4]], dtype=torch.int32).expand(3, 3))
    env.state.key[:, ALICE] = torch.tensor([4, 3, 4], dtype=torch.int32)
    for e, m in enumerate(theirs):
        set_world(p, m, host_state(env, e), e)
    for t in range(6):
        actions = torch.rand((3, 3, 4), generator=gen) * 1.4 - 0.2
        actions[t % 3, t % 2] = -0.5  # env t % 3: eve (t even) or bob (t odd) says nothing
        obs, reward = (x.clone() for x in env.step(actions)[:2])
        for e, m in enumerate(theirs):
            o, r, *_ = m.step(mpe2_actions(env, m, actions, e))
            np.testing.assert_allclose(obs[e].numpy(), obs_matrix(m, o, env.obs_dim), rtol=0, atol=1e-6)
            np.testing.assert_allclose(reward[e].numpy(), [r[a] for a in m.possible_agents], rtol=0, atol=1e-5)
        assert (env.state.comm[t % 3, t % 2] == 0).all()


def test_goal_and_key_draws_spread_and_observed():
    """goal_a is one landmark for all, key alice's own (-1 for eve and bob), each spread over both landmarks
    and drawn independently; alice observes [goal colour, key], bob [key, alice's message]."""
    env = gpurl.make("simple_crypto", num_envs=64, device="cpu", seed=1)
    pairs = []
    for seed in range(2):
        obs = env.reset(seed=seed)
        goal, key = env.state.goal_a, env.state.key
        assert (goal == goal[:, :1]).all()
        assert (key[:, :ALICE] == -1).all()
        g, k = goal[:, 0].long() - 3, key[:, ALICE].long() - 3
        pairs.append(2 * g + k)
        one_hot = torch.eye(4)
        assert torch.equal(obs[:, ALICE], torch.cat([one_hot[g], one_hot[k]], 1))
        assert torch.equal(obs[:, 1], torch.cat([one_hot[k], torch.zeros(64, 4)], 1))  # alice silent at reset
        assert (obs[:, 0] == 0).all()
    counts = torch.bincount(torch.cat(pairs), minlength=4)  # (goal, key) pairs
    assert (counts >= 15).all(), counts


def test_pettingzoo_adapter_passes_the_api_test_with_mpe2s_names_and_spaces():
    check_pettingzoo("simple_crypto", simple_crypto_v3)
