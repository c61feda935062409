"""``simple_spread`` against mpe2's ``simple_spread_v3``: whole episodes side by side (tests/mpe2_pairing.py)
with its parameters: N, local_ratio, nearest-neighbour observations, the curriculum, terminate_on_success."""
from __future__ import annotations

import zlib
from dataclasses import replace

import numpy as np
import pytest
import torch

pytest.importorskip("mpe2")
from mpe2 import simple_spread_v3  # noqa: E402

import gpurl  # noqa: E402
from mpe2_pairing import (box_pairing, Pairing, check_pettingzoo, check_whole_episodes, host_state, inject_start,  # noqa: E402
                          make_pair, run_episode, set_world)

pytestmark = pytest.mark.cpu

#: an agent pair within rounding of the collision threshold (size + size = 0.3) may flip its -1 penalty
COLLISION_DISTANCE, FLIP_BAND = 0.3, 1e-5


def near_collision_threshold(world) -> bool:
    pos = np.array([a.state.p_pos for a in world.agents])
    d = np.linalg.norm(pos[:, None] - pos[None], axis=-1)
    return bool((np.abs(d - COLLISION_DISTANCE) < FLIP_BAND).any())


def pairing(**params) -> Pairing:
    return Pairing("simple_spread", simple_spread_v3, {"max_cycles": 25, **params},
                   may_flip=near_collision_threshold, flip_size=params.get("local_ratio", 0.5))


def run_pair(p: Pairing, crowded: bool, stage: int | None = None, on_landmarks: bool = False) -> dict:
    """check_whole_episodes, optionally with gpurl at curriculum ``stage`` and every agent starting on its
    landmark (a success at the first step: positions move with the old velocity, 0).

    mpe2 1.1.1's stage cannot leave 0 (its Scenario assigns ``curriculum_stage`` through BaseScenario's no-op
    property setter), so stage 0 is compared with mpe2's curriculum and stage 1, where the collision penalty
    returns, with mpe2 without one (its CURRICULUM_STAGES[1] is the penalty as without curriculum)."""
    env, theirs = make_pair(p)
    if stage is not None:
        env.set_curriculum_stage(stage)
        if stage >= 1:
            _, theirs = make_pair(replace(p, params={**p.params, "curriculum": False}))
    gen = torch.Generator().manual_seed(zlib.crc32(f"{sorted(p.params.items())}{crowded}{stage}".encode()))
    inject_start(p, env, theirs, gen, crowded)
    if on_landmarks:
        env.state.pos.copy_(env.state.landmark_pos + 0.05)
        for e, m in enumerate(theirs):
            set_world(p, m, host_state(env, e), e)
    stats = run_episode(p, env, theirs, gen, check_start_obs=False)
    print(f"\nsimple_spread {p.params} crowded={crowded} stage={stage}: {stats}")
    return stats


def test_mpe2_curriculum_stage_is_stuck_at_0():
    """Why stage 1 is compared with mpe2 without curriculum (see run_pair)."""
    m = simple_spread_v3.parallel_env(curriculum=True)
    m.unwrapped.set_curriculum_stage(1)
    m.unwrapped.advance_curriculum()
    assert m.unwrapped.curriculum_stage == 0


@pytest.mark.parametrize("continuous", box_pairing("simple_spread"))
@pytest.mark.parametrize("crowded", [False, True], ids=["spread", "crowded"])
def test_whole_episodes_match_mpe2(continuous, crowded):
    stats = check_whole_episodes(pairing(continuous_actions=continuous), crowded)
    assert stats["steps"] == 25 and stats["truncated"] == 3 and stats["terminated"] == 0
    assert stats["replays"] <= 2


@pytest.mark.parametrize("params, crowded", [
    (dict(N=4, local_ratio=0.3, num_agent_neighbors=2, num_landmark_neighbors=2), True),
    (dict(N=2, num_agent_neighbors=3, num_landmark_neighbors=4, continuous_actions=True, max_cycles=15), False),
], ids=["nearest", "padded"])
def test_nearest_neighbour_observations_match_mpe2(params, crowded):
    stats = check_whole_episodes(pairing(**params), crowded)
    assert stats["truncated"] == 3 and stats["replays"] <= 2


@pytest.mark.parametrize("stage", [0, 1])
def test_curriculum_stages_match_mpe2(stage):
    stats = run_pair(pairing(curriculum=True, max_cycles=10), crowded=True, stage=stage)
    assert stats["truncated"] == 3 and stats["replays"] <= 2


def test_terminate_on_success_matches_mpe2():
    stats = run_pair(pairing(terminate_on_success=True), crowded=False, on_landmarks=True)
    assert stats["steps"] == 1 and stats["terminated"] == 3 and stats["replays"] == 0


def test_curriculum_stage_persists_across_resets_and_gates_the_penalty():
    env = gpurl.make("simple_spread", num_envs=2, device="cpu", curriculum=True, local_ratio=1.0)
    assert env.curriculum_stage.tolist() == [0, 0]
    env.reset()
    env.state.pos.zero_()  # every agent on top of the others: two collisions each
    _, reward, *_ = env.step(torch.zeros((2, 3), dtype=torch.int64))
    assert (reward == 0).all()
    env.advance_curriculum()
    env.advance_curriculum()  # no stage after the last
    env.reset()
    assert env.curriculum_stage.tolist() == [1, 1]
    env.state.pos.zero_()
    _, reward, *_ = env.step(torch.zeros((2, 3), dtype=torch.int64))
    assert (reward == -2).all()
    env.set_curriculum_stage(-3)
    assert env.curriculum_stage.tolist() == [0, 0]


@pytest.mark.parametrize("params", [{}, dict(N=5, num_agent_neighbors=2), dict(N=1, num_landmark_neighbors=3)])
def test_spaces_are_mpe2s(params):
    env = gpurl.make("simple_spread", num_envs=1, device="cpu", **params)
    theirs = simple_spread_v3.parallel_env(**params)
    assert theirs.possible_agents == [f"agent_{k}" for k in range(env.num_agents)]
    assert env.obs_dim == theirs.observation_space("agent_0").shape[0]
    assert env.groups["agent"].action_space == theirs.action_space("agent_0")


@pytest.mark.parametrize("bad", [dict(N=0), dict(local_ratio=1.5), dict(num_agent_neighbors=0),
                                 dict(num_landmark_neighbors=-1)])
def test_parameters_are_checked(bad):
    with pytest.raises(ValueError):
        gpurl.make("simple_spread", num_envs=1, device="cpu", **bad)


def test_pettingzoo_adapter_passes_the_api_test_with_mpe2s_names_and_spaces():
    check_pettingzoo("simple_spread", simple_spread_v3)
