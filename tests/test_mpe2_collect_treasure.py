"""``collect_treasure`` against mpe2's ``collect_treasure_v1``: whole episodes side by side
(tests/mpe2_pairing.py), and gpurl's own reset and respawn draws.

mpe2 respawns picked-up treasures from its own RNG during the episode, gpurl from its counter-based one. To
keep the comparison exact, mpe2 is handed gpurl's respawn draws: before each mpe2 step, its world's
``np_random`` is replaced by :class:`GpurlRespawns`, which answers mpe2's respawn calls (the respawn_prob
test, the position, the type, per dead treasure in landmark order) with gpurl's values
(:func:`respawn_draw_ref`, the kernel's NumPy twin). That checks gpurl's respawn keys as well; the
distribution is checked separately (test_respawns_*).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("mpe2")
from mpe2 import collect_treasure_v1  # noqa: E402

import gpurl  # noqa: E402
from gpurl.envs.mpe.collect_treasure import PARKED, TREASURE_BOUND, respawn_draw_ref  # noqa: E402
from mpe2_pairing import box_pairing, Pairing, check_pettingzoo, check_whole_episodes  # noqa: E402

pytestmark = pytest.mark.cpu


class GpurlRespawns:
    """Stands in for mpe2's ``world.np_random`` during one step: its respawn draws, in mpe2's call order
    (``uniform()`` against respawn_prob, ``uniform(-0.95, 0.95, 2)``, ``integers(0, T)`` per dead
    treasure), are gpurl's ``draws`` [(x, y, type), ...]."""

    def __init__(self, draws: list, num_types: int):
        self.draws = list(draws)
        self.num_types = num_types

    def uniform(self, low=0.0, high=1.0, size=None):
        if size is None:
            return 0.0  # <= respawn_prob (1.0 in mpe2): the treasure respawns, as in gpurl
        assert (low, high, size) == (-TREASURE_BOUND, TREASURE_BOUND, 2), (low, high, size)
        return np.array(self.draws[0][:2], np.float64)

    def integers(self, low, high=None):
        assert (low, high) == (0, self.num_types), (low, high)
        return self.draws.pop(0)[2]


class Respawns:
    """``Pairing.before_step``: hands mpe2 gpurl's respawns of env e's step; counts what happened."""

    def __init__(self):
        self.respawns = 0
        self.deliveries = 0

    def __call__(self, env, m, e):
        world = m.unwrapped.world
        dead = [l for l, lm in enumerate(world.landmarks) if not lm.alive]
        t, episode = int(env.state.timestep[e]), int(env.state.episode[e])
        assert t == m.unwrapped.steps
        T = world.num_deposits
        draws = [respawn_draw_ref(env.seed, env.env_id_offset + e, episode, t, l, T) for l in dead]
        world._np_random = GpurlRespawns(draws, T)  # the property's setter would deep-copy it
        self.respawns += len(dead)
        self.deliveries += int((m.unwrapped.scenario._cached_global_deposit or 0) // 5)  # the previous step's


def get_draws(world) -> dict:
    return {"type": np.array([lm.type for lm in world.landmarks], np.int32),
            "alive": np.array([lm.alive for lm in world.landmarks], bool),
            "holding": np.array([-1 if a.holding is None else a.holding for a in world.agents], np.int32)}


def set_draws(world, state: dict, e: int) -> None:
    for l, lm in enumerate(world.landmarks):
        lm.type = int(state["type"][l])
        lm.alive = bool(state["alive"][l])
    for k, agent in enumerate(world.agents):
        agent.holding = None if state["holding"][k] < 0 else int(state["holding"][k])


def pairing(params: dict, hook: Respawns) -> Pairing:
    return Pairing("collect_treasure", collect_treasure_v1, params, set_draws=set_draws, get_draws=get_draws,
                   before_step=hook)


@pytest.mark.parametrize("continuous", box_pairing("collect_treasure"))
@pytest.mark.parametrize("crowded", [False, True], ids=["spread", "crowded"])
def test_whole_episodes_match_mpe2(continuous, crowded):
    hook = Respawns()
    stats = check_whole_episodes(pairing(dict(max_cycles=25, continuous_actions=continuous), hook), crowded)
    print(f"respawns={hook.respawns} deliveries={hook.deliveries}")
    assert stats["steps"] == 25 and stats["truncated"] == 3 and stats["terminated"] == 0
    assert stats["replays"] == 0
    if crowded:
        assert hook.respawns > 0 and hook.deliveries > 0


@pytest.mark.parametrize("params", [dict(num_collectors=2, num_deposits=3, num_treasures=9, max_cycles=40),
                                    dict(num_collectors=7, num_deposits=1, num_treasures=1, max_cycles=20)],
                         ids=["3types", "1type"])
def test_other_sizes_match_mpe2(params):
    hook = Respawns()
    stats = check_whole_episodes(pairing(dict(params, continuous_actions=False), hook), crowded=True)
    print(f"respawns={hook.respawns} deliveries={hook.deliveries}")
    assert stats["steps"] == params["max_cycles"] and stats["replays"] == 0
    assert hook.respawns > 0


def test_pettingzoo_adapter_passes_the_api_test_with_mpe2s_names_and_spaces():
    check_pettingzoo("collect_treasure", collect_treasure_v1)


def treasure_blocks(env, e: int, i: int) -> np.ndarray:
    """Agent i's treasure block of env e's observation, [L, 2 + T]."""
    p = env.params
    T, L = p.num_deposits, p.num_treasures
    start = (p.collector_obs_dim if i < p.num_collectors else p.deposit_obs_dim) - L * (2 + T)
    return env.obs[e, i, start:start + L * (2 + T)].numpy().reshape(L, 2 + T)


def test_reset_draws_are_spread_and_consistent_with_the_obs():
    env = gpurl.make("collect_treasure", num_envs=64, device="cpu", seed=3, num_deposits=3)
    env.reset()
    s = env.state
    assert {name: g.obs_dim for name, g in env.groups.items()} == {"collector": 117, "deposit": 114}
    assert bool(s.alive.all()) and bool((s.holding == -1).all())
    assert float(s.pos.abs().max()) <= 1.0 and float(s.landmark_pos.abs().max()) <= TREASURE_BOUND
    share = np.bincount(s.type.flatten().numpy(), minlength=4) / s.type.numel()
    assert share[3] == 0 and (np.abs(share[:3] - 1 / 3) < 0.08).all(), share
    for e in range(0, 64, 9):  # each agent sees every treasure's type, nearest first
        for i in range(env.num_agents):
            order = np.argsort(np.linalg.norm(s.landmark_pos[e].numpy() - s.pos[e, i].numpy(), axis=1), kind="stable")
            blocks = treasure_blocks(env, e, i)
            np.testing.assert_array_equal(blocks[:, 2:].argmax(axis=1), s.type[e, order].numpy())
            np.testing.assert_allclose(blocks[:, :2], (s.landmark_pos[e, order] - s.pos[e, i]).numpy(), atol=1e-6)


def test_respawns_follow_mpe2s_distribution_from_gpurls_keys():
    """Every collector starts on a treasure, the deposits far away: the pickups of step 0 park the
    treasures (zeros at the end of every observation), step 1 respawns them uniformly in [-0.95, 0.95)^2
    with uniform types, from the keys respawn_draw_ref names."""
    E, T = 128, 2
    env = gpurl.make("collect_treasure", num_envs=E, device="cpu", seed=5)
    env.reset()
    s = env.state
    s.landmark_pos.copy_(s.pos[:, :6])
    s.pos[:, 6:] = torch.tensor([[3.0, 3.0], [-3.0, 3.0]])  # deposits out of reach: no delivery
    types = s.type.clone()
    noop = torch.zeros((E, env.num_agents), dtype=torch.int64)
    env.step(noop)
    dead = ~s.alive
    assert int(dead.sum()) > 0.9 * dead.numel()
    assert bool((s.landmark_pos[dead] == PARKED).all())
    for e in range(E):  # what each collector holds is a type its pickup removed
        held = sorted(int(h) for h in s.holding[e, :6] if h >= 0)
        assert held == sorted(int(t) for t in types[e][dead[e]])
        for i in range(env.num_agents):
            blocks = treasure_blocks(env, e, i)
            assert (blocks[len(blocks) - int(dead[e].sum()):] == 0).all()
    env.step(noop)
    assert bool(s.alive.all())
    respawned = s.landmark_pos[dead].numpy()
    for e, l in dead.nonzero().tolist()[:50]:
        x, y, kind = respawn_draw_ref(env.seed, e, int(s.episode[e]), 1, l, T)
        assert (float(s.landmark_pos[e, l, 0]), float(s.landmark_pos[e, l, 1]), int(s.type[e, l])) == (x, y, kind)
    assert np.abs(respawned).max() <= TREASURE_BOUND
    assert np.abs(respawned.mean(axis=0)).max() < 0.1
    assert np.abs(respawned.std(axis=0) - 1.9 / np.sqrt(12)).max() < 0.05
    assert abs(float(s.type[dead].float().mean()) - 0.5) < 0.08
