"""``simple_line`` against mpe2's ``simple_line_v1``: whole episodes side by side (tests/mpe2_pairing.py),
the end on success, and the landmark draw (docs/specs/mpe.md)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("mpe2")
from mpe2 import simple_line_v1  # noqa: E402
from scipy.stats import ks_2samp  # noqa: E402

import gpurl  # noqa: E402
from mpe2_pairing import box_pairing, Pairing, check_pettingzoo, check_whole_episodes, make_pair, set_world, host_state  # noqa: E402

pytestmark = pytest.mark.cpu


class WithScenario:
    """mpe2's module whose worlds know their scenario (mpe2 keeps simple_line's places on the scenario)."""

    def __init__(self, module):
        self.module = module

    def parallel_env(self, **params):
        m = self.module.parallel_env(**params)
        m.unwrapped.world.scenario = m.unwrapped.scenario
        return m


def set_places(world, state: dict, e: int) -> None:
    """mpe2's places on the line, from the written landmarks as gpurl derives them (mpe2 computed them at
    its own reset: lm0 + i * 1.25 / (N - 1) * direction, lm1 = lm0 + 1.25 * direction)."""
    lm = state["landmark_pos"].astype(np.float64)
    n = len(world.agents)
    world.scenario._expected_positions = [lm[0] + i * (lm[1] - lm[0]) / max(n - 1, 1) for i in range(n)]


def pairing(**params) -> Pairing:
    return Pairing("simple_line", WithScenario(simple_line_v1), {"max_cycles": 25, **params}, set_draws=set_places)


@pytest.mark.parametrize("continuous", box_pairing("simple_line"))
@pytest.mark.parametrize("crowded", [False, True], ids=["spread", "crowded"])
def test_whole_episodes_match_mpe2(continuous, crowded):
    stats = check_whole_episodes(pairing(continuous_actions=continuous), crowded)
    assert stats["steps"] == 25 and stats["truncated"] == 3 and stats["terminated"] == 0
    assert stats["replays"] == 0


@pytest.mark.parametrize("params", [dict(N=1), dict(N=2, terminate_on_success=True),
                                    dict(N=7, continuous_actions=True, max_cycles=12)], ids=["N1", "N2_term", "N7"])
def test_other_parameters_match_mpe2(params):
    stats = check_whole_episodes(pairing(**params), crowded=True)
    assert stats["steps"] == params.get("max_cycles", 25) and stats["truncated"] == 3
    assert stats["replays"] == 0


@pytest.mark.parametrize("terminate", [False, True])
def test_success_ends_the_episode_as_in_mpe2(terminate):
    """Agents resting on their places (in another order) with no-op actions: terminated at the first step
    with terminate_on_success, never without."""
    p = pairing(terminate_on_success=terminate)
    env, theirs = make_pair(p)
    env.reset()
    lm = env.state.landmark_pos
    order = torch.tensor([2, 0, 3, 1])
    places = lm[:, :1] + order.view(1, 4, 1) * (lm[:, 1:] - lm[:, :1]) / 3
    env.state.pos.copy_(places + 0.01)  # within 0.05 of the place
    for e, m in enumerate(theirs):
        set_world(p, m, host_state(env, e), e)
    _, reward, terminated, truncated, _ = env.step(torch.zeros((3, 4), dtype=torch.int64))
    for e, m in enumerate(theirs):
        _, r, te, tr, _ = m.step({a: 0 for a in m.possible_agents})
        np.testing.assert_allclose(reward[e].numpy(), [r[a] for a in m.possible_agents], rtol=0, atol=1e-6)
        assert bool(terminated[e]) == te["agent_0"] == terminate and not truncated[e] and not tr["agent_0"]


def directions(landmark_pos: np.ndarray) -> np.ndarray:
    d = landmark_pos[:, 1] - landmark_pos[:, 0]
    return np.arctan2(d[:, 1], d[:, 0])


def test_landmark_draw_follows_mpe2():
    """Landmark 0 in [-0.25, 0.25)^2, landmark 1 at 1.25 from it inside (-1, 1)^2, its direction distributed
    as mpe2's (a uniform angle turned by 5 degrees until landmark 1 fits); the observation shows them."""
    env = gpurl.make("simple_line", num_envs=200, device="cpu", seed=3)  # < 256: the tests' build
    draws = []
    for _ in range(2):  # two episodes of each env
        obs = env.reset()
        pos, lm = env.state.pos.numpy(), env.state.landmark_pos.numpy()
        assert (np.abs(pos) <= 1).all()
        np.testing.assert_array_equal(obs[:, :, 4:6].numpy(), lm[:, None, 0] - pos)
        np.testing.assert_array_equal(obs[:, :, 6:8].numpy(), lm[:, None, 1] - pos)
        draws.append(lm.astype(np.float64))
    lm = np.concatenate(draws)
    assert (np.abs(lm[:, 0]) <= 0.25).all() and (np.abs(lm[:, 1]) < 1).all()
    np.testing.assert_allclose(np.linalg.norm(lm[:, 1] - lm[:, 0], axis=1), 1.25, rtol=1e-6)
    m = simple_line_v1.parallel_env()
    theirs = []
    for seed in range(400):
        m.reset(seed=seed)
        theirs.append([lm_.state.p_pos for lm_ in m.unwrapped.world.landmarks])
    ours, want = directions(lm), directions(np.array(theirs))
    assert np.histogram(ours, bins=8, range=(-np.pi, np.pi))[0].min() > 0
    assert ks_2samp(ours, want).pvalue > 1e-3


def test_pettingzoo_adapter_passes_the_api_test_with_mpe2s_names_and_spaces():
    check_pettingzoo("simple_line", simple_line_v1)
