"""``simple_adversary`` against mpe2's ``simple_adversary_v3``: whole episodes side by side (tests/mpe2_pairing.py),
with full and partial observability, and its goal draw."""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("mpe2")
from mpe2 import simple_adversary_v3  # noqa: E402

import gpurl  # noqa: E402
from mpe2_pairing import (Pairing, check_pettingzoo, check_whole_episodes, host_state,  # noqa: E402
                          inject_start, make_pair, run_episode, set_world)

pytestmark = pytest.mark.cpu


def set_goals(world, state: dict, e: int) -> None:
    """gpurl's ``goal_a`` (entity indices, one per agent) as mpe2's goal landmark objects."""
    n = len(world.agents)
    for k, agent in enumerate(world.agents):
        agent.goal_a = world.landmarks[int(state["goal_a"][k]) - n]


def get_goals(world) -> dict:
    n = len(world.agents)
    return {"goal_a": np.array([n + world.landmarks.index(a.goal_a) for a in world.agents], np.int32)}


def pairing(**params) -> Pairing:
    return Pairing("simple_adversary", simple_adversary_v3, params, set_draws=set_goals, get_draws=get_goals)


# Discrete only: its Box actions decode as simple's (tests/mpe2_pairing.py box_pairing).
@pytest.mark.parametrize("crowded, params", [
    (False, {}),
    (True, {}),
    # partial observability: fewer agent slots than others, more landmark slots than landmarks (padding)
    (True, dict(N=3, num_agent_neighbors=2, num_landmark_neighbors=4)),
    (False, dict(N=3, num_landmark_neighbors=2)),
], ids=["spread", "crowded", "crowded-N3-po", "spread-N3-po"])
def test_whole_episodes_match_mpe2(crowded, params):
    stats = check_whole_episodes(pairing(max_cycles=25, **params), crowded)
    assert stats["steps"] == 25 and stats["truncated"] == 3 and stats["terminated"] == 0
    assert stats["replays"] == 0


def test_agents_with_different_goals_match_mpe2():
    """A written state may give each agent its own goal: every reward and observation reads its agent's."""
    p = pairing(max_cycles=8, N=3)
    env, theirs = make_pair(p)
    gen = torch.Generator().manual_seed(3)
    inject_start(p, env, theirs, gen, crowded=False)
    env.state.goal_a.copy_(torch.randint(4, 7, env.state.goal_a.shape, generator=gen, dtype=torch.int32))
    for e, m in enumerate(theirs):
        set_world(p, m, host_state(env, e), e)
    stats = run_episode(p, env, theirs, gen, check_start_obs=False)
    assert stats["steps"] == 8 and stats["replays"] == 0


def test_goal_draw_spread_and_observed():
    """goal_a is one landmark for every agent, spread over the N landmarks, and good agents observe it."""
    env = gpurl.make("simple_adversary", num_envs=64, device="cpu", seed=1, N=3)
    n = env.num_agents
    goals = []
    for seed in range(3):
        obs = env.reset(seed=seed)
        goal = env.state.goal_a
        assert (goal == goal[:, :1]).all()
        goals.append(goal[:, 0].clone())
        lm = env.state.landmark_pos[torch.arange(64), goal[:, 0].long() - n]  # [E, 2]
        want = lm[:, None, :] - env.state.pos[:, 1:]
        torch.testing.assert_close(obs[:, 1:, :2], want, rtol=0, atol=1e-6)
        assert (obs[:, 0, 12:] == 0).all() and (obs[:, 1:, 14:] == 0).all()  # padding after obs_dim
    counts = torch.bincount(torch.cat(goals) - n, minlength=3)
    assert counts.sum() == 192 and (counts >= 40).all(), counts


def test_pettingzoo_adapter_passes_the_api_test_with_mpe2s_names_and_spaces():
    check_pettingzoo("simple_adversary", simple_adversary_v3)


@pytest.mark.parametrize("neighbors", [(None, None), (1, 2)], ids=["all", "nearest"])
def test_fixed_world_build_with_its_selections_is_bit_identical_to_the_run_time_build(neighbors, monkeypatch):
    """A large CPU batch's build fixes the world and the observation's selections (ADVERSARY_NEIGHBORS), so
    the search it does not use compiles away; it computes the bits of the run-time build the tests' small
    batches (and mpe2's parity above) use."""
    from gpurl.envs import base

    params = dict(num_envs=8, device="cpu", seed=2, validate=False, num_landmark_neighbors=neighbors[0],
                  num_agent_neighbors=neighbors[1])
    runtime = gpurl.make("simple_adversary", **params)
    monkeypatch.setattr(base, "FIXED_AGENTS_MIN_ENVS", 1)
    fixed = gpurl.make("simple_adversary", **params)
    assert runtime._build_constants == ()
    assert dict(fixed._build_constants)["ADVERSARY_NEIGHBORS"] == tuple(k or 0 for k in neighbors)
    gen = torch.Generator().manual_seed(0)
    for env in (runtime, fixed):
        env.reset()
    for t in range(30):  # past the 25-step episodes: autoresets draw and observe through the fixed build too
        actions = torch.randint(0, 5, (8, 3), generator=gen)
        for name, a, b in zip(("obs", "reward", "terminated", "truncated"), runtime.step(actions)[:4],
                              fixed.step(actions)[:4]):
            assert torch.equal(a, b), (t, name)
