"""``simple_formation`` against mpe2's ``simple_formation_v1``: whole episodes side by side
(tests/mpe2_pairing.py), the end on success, and the reset draw (docs/specs/mpe.md)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

pytest.importorskip("mpe2")
from mpe2 import simple_formation_v1  # noqa: E402

import gpurl  # noqa: E402
from mpe2_pairing import box_pairing, Pairing, check_pettingzoo, check_whole_episodes, host_state, make_pair, set_world  # noqa: E402

pytestmark = pytest.mark.cpu


def pairing(**params) -> Pairing:
    # mpe2 recomputes the places from the world every step: nothing else to write into it
    return Pairing("simple_formation", simple_formation_v1, {"max_cycles": 25, **params})


@pytest.mark.parametrize("continuous", box_pairing("simple_formation"))
@pytest.mark.parametrize("crowded", [False, True], ids=["spread", "crowded"])
def test_whole_episodes_match_mpe2(continuous, crowded):
    stats = check_whole_episodes(pairing(continuous_actions=continuous), crowded)
    assert stats["steps"] == 25 and stats["truncated"] == 3 and stats["terminated"] == 0
    assert stats["replays"] == 0


@pytest.mark.parametrize("params", [dict(N=1), dict(N=3, terminate_on_success=True),
                                    dict(N=8, continuous_actions=True, max_cycles=12)], ids=["N1", "N3_term", "N8"])
def test_other_parameters_match_mpe2(params):
    stats = check_whole_episodes(pairing(**params), crowded=True)
    assert stats["steps"] == params.get("max_cycles", 25) and stats["truncated"] == 3
    assert stats["replays"] == 0


@pytest.mark.parametrize("terminate", [False, True])
def test_success_ends_the_episode_as_in_mpe2(terminate):
    """Agents resting 0.02 outside their places on the circle (in another order) with no-op actions:
    terminated at the first step with terminate_on_success, never without."""
    p = pairing(terminate_on_success=terminate)
    env, theirs = make_pair(p)
    env.reset()
    angle = torch.rand(3, 1) * 2 * math.pi + torch.tensor([2, 0, 3, 1]) * (math.pi / 2)
    ring = 0.52 * torch.stack([torch.cos(angle), torch.sin(angle)], dim=-1)
    env.state.pos.copy_(env.state.landmark_pos[:, :1] + ring)
    for e, m in enumerate(theirs):
        set_world(p, m, host_state(env, e), e)
    _, reward, terminated, truncated, _ = env.step(torch.zeros((3, 4), dtype=torch.int64))
    for e, m in enumerate(theirs):
        _, r, te, tr, _ = m.step({a: 0 for a in m.possible_agents})
        np.testing.assert_allclose(reward[e].numpy(), [r[a] for a in m.possible_agents], rtol=0, atol=1e-6)
        assert bool(terminated[e]) == te["agent_0"] == terminate and not truncated[e] and not tr["agent_0"]


def test_reset_draw_and_observation():
    """Agents in [-1, 1)^2, the landmark in [-0.5, 0.5)^2, both spread over their boxes; the observation
    is [v, p, lm - p]."""
    env = gpurl.make("simple_formation", num_envs=200, device="cpu", seed=3)  # < 256: the tests' build
    obs = env.reset().numpy()
    pos, lm = env.state.pos.numpy(), env.state.landmark_pos.numpy()
    assert (np.abs(pos) <= 1).all() and (np.abs(lm) <= 0.5).all()
    assert (pos.reshape(-1, 2).min(0) < -0.9).all() and (pos.reshape(-1, 2).max(0) > 0.9).all()
    assert (lm.reshape(-1, 2).min(0) < -0.4).all() and (lm.reshape(-1, 2).max(0) > 0.4).all()
    np.testing.assert_array_equal(obs[:, :, :2], 0)
    np.testing.assert_array_equal(obs[:, :, 2:4], pos)
    np.testing.assert_array_equal(obs[:, :, 4:6], lm[:, :1] - pos)


def test_pettingzoo_adapter_passes_the_api_test_with_mpe2s_names_and_spaces():
    check_pettingzoo("simple_formation", simple_formation_v1)
