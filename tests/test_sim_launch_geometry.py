"""Sim tier: the packed launch geometry (several small envs to a block, one thread per agent, issue 42) writes
exactly what a block per env writes, for every built-in env and the custom-env example, in Numba's simulator.

Both layouts run the same CUDA build (only the launch's geometry and its ``lanes`` argument differ), so every
array must match bit for bit, not merely within the tolerance the CPU build is held to. 3 envs: a partly
filled block, and envs sharing a warp; 2-step episodes, so an autoreset runs inside the 3 steps.
"""
from __future__ import annotations

import pytest
import torch

import gpurl
import gpurl.kernels.program as program
from gpurl.envs.random_actions import RandomActions

import custom_env_harness  # noqa: F401  (registers the example's "foraging")

pytestmark = [
    pytest.mark.sim,
    pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning"),  # uint64 hashing wraps on purpose
]

NUM_ENVS, STEPS = 3, 3
# Each env small enough to pack (at most a warp's agents), with 2-step episodes.
PARAMS = {
    **{name: dict(max_cycles=2) for name in gpurl.registered() if name.startswith("simple") or name == "collect_treasure"},
    "tag_continuous": dict(num_taggers=2, num_runners=5, episode_length=2, use_full_observation=False,
                           num_other_agents_observed=3),
    "tag_gridworld": dict(episode_length=2),
    "foraging": dict(num_agents=6, num_food=3, grid_size=5, episode_length=2),
}


def _arrays(env) -> dict[str, torch.Tensor]:
    out = {name: getattr(env.state, name) for name in env.state.__dataclass_fields__}
    out.update((name, getattr(env, name)) for name in ("obs", "reward", "terminated", "truncated", "final_obs"))
    return {name: t.clone() for name, t in out.items()}


def _run(name: str, packed: bool, monkeypatch) -> list[dict]:
    monkeypatch.setattr(program, "PACK_SMALL_WORLDS", packed)
    env = gpurl.make(name, num_envs=NUM_ENVS, device="cpu", target="cuda", seed=7, **PARAMS[name])
    lanes = program.launch_geometry(NUM_ENVS, env.num_agents)[2]
    assert (lanes == max(1, env.num_agents)) == packed, f"{name}: {env.num_agents} agents on {lanes} lanes"
    draws = [RandomActions(g.action_space, torch.device("cpu")) for g in env.groups.values()]
    gen = torch.Generator().manual_seed(0)
    env.reset()
    seen = [_arrays(env)]
    for _ in range(STEPS):
        actions = torch.cat([draw((NUM_ENVS, g.agents.stop - g.agents.start, env.action_dims), gen)
                             for draw, g in zip(draws, env.groups.values())], dim=1)
        env.step(actions)
        seen.append(_arrays(env))
    return seen


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_packed_envs_match_a_block_per_env(name, monkeypatch):
    one_per_block, packed = _run(name, False, monkeypatch), _run(name, True, monkeypatch)
    for t, (want, got) in enumerate(zip(one_per_block, packed)):
        for array, value in want.items():
            assert torch.equal(got[array], value), f"{name}, after {t} steps: {array} differs"


def test_geometry_of_small_and_large_worlds():
    assert program.launch_geometry(4096, 4) == (128, 128, 4)   # 32 envs a block: every lane busy
    assert program.launch_geometry(1000, 3) == (24, 128, 3)    # 42 envs (126 threads) a block
    assert program.launch_geometry(1, 1) == (1, 32, 1)         # one env: one warp, not four
    assert program.launch_geometry(65536, 1) == (512, 128, 1)  # a thread per env
    assert program.launch_geometry(10, 32) == (3, 128, 32)
    assert program.launch_geometry(1000, 110) == (1000, 128, 128)  # a block per env, threads stride
