"""``simple_world_comm`` against mpe2's ``simple_world_comm_v3``: whole episodes side by side
(tests/mpe2_pairing.py), the leader's messages, forests hiding agents, and the reset draw."""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("mpe2")
from mpe2 import simple_world_comm_v3  # noqa: E402

import gpurl  # noqa: E402
from mpe2_pairing import Pairing, check_pettingzoo, check_whole_episodes, host_state, make_pair, set_world  # noqa: E402

pytestmark = pytest.mark.cpu

#: A collision or a food touch whose distance is this close to size_a + size_b may flip with rounding.
NEAR_THRESHOLD = 1e-5


def near_threshold(world) -> bool:
    """Some adversary-good or good-food pair of mpe2's world is within rounding of touching."""
    good = [a for a in world.agents if not a.adversary]
    pairs = [(a, g) for a in world.agents if a.adversary for g in good] + [(g, f) for g in good for f in world.food]
    return any(abs(np.linalg.norm(a.state.p_pos - b.state.p_pos) - (a.size + b.size)) < NEAR_THRESHOLD
               for a, b in pairs)


def pairing(**params) -> Pairing:
    # Rewards jump by 5 (a catch) or 2 (a food touch) where a threshold flips: any integer jump is excused.
    return Pairing("simple_world_comm", simple_world_comm_v3, dict(max_cycles=25, **params),
                   may_flip=near_threshold, flip_size=1.0)


@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "continuous"])
@pytest.mark.parametrize("crowded", [False, True], ids=["spread", "crowded"])
def test_whole_episodes_match_mpe2(continuous, crowded):
    """Default world (leader, 3 adversaries, 2 good, 1 obstacle, 2 food, 2 forests); crowded: everything in
    a small box (contacts with the obstacle, agents in forests) with random starting messages."""
    stats = check_whole_episodes(pairing(continuous_actions=continuous), crowded)
    assert stats["steps"] == 25 and stats["truncated"] == 3 and stats["terminated"] == 0
    assert stats["replays"] == 0


@pytest.mark.parametrize("params", [
    dict(num_adversaries=1, num_good=1, num_obstacles=0, num_food=1, num_forests=0),
    dict(num_adversaries=2, num_good=3, num_obstacles=2, num_food=3, num_forests=3, continuous_actions=True),
], ids=["leader_only_no_forests", "three_forests_continuous"])
def test_other_worlds_match_mpe2(params):
    stats = check_whole_episodes(pairing(**params), crowded=True)
    assert stats["steps"] == 25 and stats["truncated"] == 3
    assert stats["replays"] == 0


def test_groups_spaces_and_obs_dims_are_mpe2s():
    for continuous in (False, True):
        env, (m, *_) = make_pair(pairing(continuous_actions=continuous), num_envs=1)
        assert list(env.groups) == ["leadadversary", "adversary", "agent"]
        k = 0
        for group in env.groups.values():
            for _ in range(group.agents.start, group.agents.stop):
                name = m.possible_agents[k]
                assert group.action_space == m.action_space(name), name
                assert group.obs_dim == m.observation_space(name).shape[0], name
                k += 1
        assert env.action_dims == (9 if continuous else 1)
        assert env.global_state_dim == m.state_space.shape[0] == 192


def test_leader_message_reaches_the_adversaries_only():
    """A Discrete leader action move + 5 * message: the leader's comm is the one-hot of the message, every
    other agent's comm is zeros, and every adversary's row (the leader's too) ends with the leader's message."""
    env = gpurl.make("simple_world_comm", num_envs=3, device="cpu", seed=3)
    env.reset()
    actions = torch.zeros((3, 6), dtype=torch.int64)
    actions[:, 0] = torch.tensor([2 + 5 * 0, 4 + 5 * 3, 1 + 5 * 2])
    actions[:, 1:] = 4
    obs, *_ = env.step(actions)
    want = torch.eye(4)[[0, 3, 2]]
    assert torch.equal(env.state.comm[:, 0], want)
    assert torch.equal(env.state.comm[:, 1:], torch.zeros(3, 5, 4))
    adversary_dim, good_dim = env.groups["adversary"].obs_dim, env.groups["agent"].obs_dim
    for i in range(4):
        assert torch.equal(obs[:, i, adversary_dim - 4:adversary_dim], want)
    assert torch.equal(obs[:, 4:, good_dim:], torch.zeros(3, 2, adversary_dim - good_dim))
    actions[:, 0] = 19  # the leader's largest action; 5 is out of a silent agent's Discrete(5)
    env.step(actions)
    actions[0, 1] = 5
    with pytest.raises(ValueError, match=r"actions\[0, 1, 0\] = 5 is out of range \[0, 5\)"):
        env.step(actions)


def test_forests_hide_agents_as_in_mpe2():
    """Hand-placed agents: forest 0 holds an adversary and good agent 0, forest 1 good agent 1, the others
    stand outside. A non-leader sees an agent when they share a forest or neither is in one; the leader sees
    all. After a no-op step (nothing moves) gpurl's rows equal mpe2's, and the masks are the expected ones."""
    env, theirs = make_pair(pairing(), num_envs=1)
    m = theirs[0]
    env.reset()
    env.state.landmark_pos[0] = torch.tensor([[0.0, 0.9], [0.8, -0.8], [-0.8, -0.8], [0.5, 0.5], [-0.5, -0.5]])
    env.state.pos[0] = torch.tensor([[-0.9, 0.5],    # leader, outside
                                     [0.55, 0.45],   # adversary_0 in forest 0
                                     [0.0, -0.3],    # adversary_1 outside
                                     [-0.45, -0.5],  # adversary_2 in forest 1
                                     [0.5, 0.6],     # agent_0 in forest 0
                                     [0.9, 0.0]])    # agent_1 outside
    set_world(pairing(), m, host_state(env, 0), 0)
    obs, reward, *_ = env.step(torch.zeros((1, 6), dtype=torch.int64))
    their_obs, their_reward, *_ = m.step({a: 0 for a in m.possible_agents})
    for k, name in enumerate(m.possible_agents):
        np.testing.assert_allclose(obs[0, k, :len(their_obs[name])].numpy(), their_obs[name], atol=1e-6, err_msg=name)
        assert float(reward[0, k]) == pytest.approx(their_reward[name], abs=1e-5)
    np.testing.assert_allclose(env.global_state[0].numpy(), m.unwrapped.state(), atol=1e-6)
    # other agents' relative positions start at 4 + 2 * 5 landmarks = 14; hidden ones are (0, 0)
    others = obs[0, :, 14:24].reshape(6, 5, 2)
    shown = (others != 0).any(-1)
    assert shown[0].all()                                              # the leader sees everyone
    assert shown[1].tolist() == [False, False, False, True, False]     # adversary_0 sees agent_0 (forest 0)
    assert shown[2].tolist() == [True, False, False, False, True]      # outside: the leader and agent_1
    assert shown[4].tolist() == [False, True, False, False, False]     # agent_0 sees adversary_0
    # in-forest flags: after the good agents' velocities (24 + 4) in an adversary's row, at 24 in a good one's
    assert obs[0, :4, 28:30].tolist() == [[-1, -1], [1, -1], [-1, -1], [-1, 1]]
    assert obs[0, 4:, 24:26].tolist() == [[1, -1], [-1, -1]]


def test_forests_past_the_first_64_hide_agents_as_in_mpe2():
    """66 forests: gpurl keeps each agent's forests as bits, 64 to a word. Only forest 65 (the second word's
    bit 1) holds anyone: adversary_0 and agent_0. Rows, rewards and the masks equal mpe2's after a no-op step."""
    params = dict(num_forests=66)
    env, theirs = make_pair(pairing(**params), num_envs=1)
    m = theirs[0]
    env.reset()
    landmarks = torch.full((69, 2), 0.95)                    # 1 obstacle, 2 food, 66 forests in a corner ...
    landmarks[:3] = torch.tensor([[0.0, 0.9], [0.8, -0.8], [-0.8, -0.8]])
    landmarks[3 + 65] = torch.tensor([0.5, 0.5])            # ... but forest 65
    env.state.landmark_pos[0] = landmarks
    env.state.pos[0] = torch.tensor([[-0.9, 0.5], [0.55, 0.45], [0.0, -0.3], [-0.45, -0.5], [0.5, 0.6], [0.0, 0.0]])
    set_world(pairing(**params), m, host_state(env, 0), 0)
    obs, reward, *_ = env.step(torch.zeros((1, 6), dtype=torch.int64))
    their_obs, their_reward, *_ = m.step({a: 0 for a in m.possible_agents})
    for k, name in enumerate(m.possible_agents):
        np.testing.assert_allclose(obs[0, k, :len(their_obs[name])].numpy(), their_obs[name], atol=1e-6, err_msg=name)
        assert float(reward[0, k]) == pytest.approx(their_reward[name], abs=1e-5)
    first_other = 4 + 2 * 69
    shown = (obs[0, :, first_other:first_other + 10].reshape(6, 5, 2) != 0).any(-1)
    assert shown[1].tolist() == [False, False, False, True, False]     # adversary_0 sees agent_0 (forest 65)
    assert shown[2].tolist() == [True, False, True, False, True]       # outside: all but those in forest 65
    flags = obs[0, 4, first_other + 10:first_other + 10 + 66]          # agent_0's in-forest flags
    assert flags[65] == 1 and (flags[:65] == -1).all()


def test_reset_draw_spreads_agents_and_landmarks():
    """No per-episode draws: agents uniform in [-1, 1)^2, landmarks in [-0.9, 0.9)^2, at rest and silent."""
    env = gpurl.make("simple_world_comm", num_envs=200, device="cpu", seed=5)
    env.reset()
    s = env.state
    pos, lm = s.pos.flatten(), s.landmark_pos.flatten()
    assert pos.min() >= -1 and pos.max() < 1 and pos.min() < -0.95 and pos.max() > 0.95
    assert lm.min() >= -0.9 and lm.max() < 0.9 and lm.min() < -0.85 and lm.max() > 0.85
    assert abs(float(pos.mean())) < 0.05 and abs(float(lm.mean())) < 0.05
    assert not s.vel.any() and not s.comm.any() and not s.timestep.any()
    assert sorted(n for n in s.__dataclass_fields__) == sorted(
        ["pos", "vel", "comm", "landmark_pos", "timestep", "episode"])


def test_pettingzoo_adapter_passes_the_api_test_with_mpe2s_names_and_spaces():
    check_pettingzoo("simple_world_comm", simple_world_comm_v3)


@pytest.mark.parametrize("params", [{}, dict(num_good=3, num_adversaries=1, num_obstacles=0, num_food=1, num_forests=0),
                                    dict(num_good=1, num_adversaries=2, num_obstacles=2, num_food=3, num_forests=3)],
                         ids=["defaults", "one_adversary_no_forest", "three_forests"])
def test_fixed_world_build_with_its_layout_is_bit_identical_to_the_run_time_build(params, monkeypatch):
    """A large CPU batch's build fixes the world and its layout (WORLD_COMM_LAYOUT: every loop's trip count and
    every observation column a literal); it computes the bits of the run-time build that the small batches of
    the mpe2 parity tests above use. Some steps crowd the agents onto the forests, so that hiding is exercised."""
    from gpurl.envs import base

    common = dict(num_envs=8, device="cpu", seed=4, validate=False, **params)
    runtime = gpurl.make("simple_world_comm", **common)
    monkeypatch.setattr(base, "FIXED_AGENTS_MIN_ENVS", 1)
    fixed = gpurl.make("simple_world_comm", **common)
    p = runtime.params
    assert runtime._build_constants == ()
    assert dict(fixed._build_constants)["WORLD_COMM_LAYOUT"] == (p.num_adversaries, p.num_obstacles, p.num_food,
                                                                 p.num_forests)
    gen = torch.Generator().manual_seed(1)
    for env in (runtime, fixed):
        env.reset()
    hidden = 0
    for t in range(30):  # past the 25-step episodes: autoresets draw and observe through the fixed build too
        if t % 6 == 3 and p.num_forests:  # every agent near a random forest: in some, out of others
            forest = p.num_obstacles + p.num_food + torch.randint(0, p.num_forests, (8, p.num_agents), generator=gen)
            near = runtime.state.landmark_pos.gather(1, forest[..., None].expand(-1, -1, 2))
            pos = near + torch.rand(near.shape, generator=gen) * 0.8 - 0.4
            for env in (runtime, fixed):
                env.state.pos.copy_(pos)
        actions = torch.cat([torch.randint(0, int(g.action_space.n), (8, g.agents.stop - g.agents.start), generator=gen)
                             for g in runtime.groups.values()], dim=1)
        out_r, out_f = runtime.step(actions), fixed.step(actions)
        for name, a, b in zip(("obs", "reward", "terminated", "truncated"), out_r[:4], out_f[:4]):
            assert torch.equal(a, b), (t, name)
        first_other = 4 + 2 * p.num_landmarks  # the other agents' block: hidden ones read (0, 0)
        hidden += int((out_r[0][:, 1:, first_other:first_other + 2] == 0).all(-1).sum())
    assert hidden > 0 or not p.num_forests or p.num_agents == 1
