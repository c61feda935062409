"""``env.step(actions, out=StepOutputs(...))`` (gpurl/envs/base.py): the kernels write into caller tensors
exactly what a twin env writes into its own buffers; bad ``out`` tensors are refused before anything
changes. And Tag's ``step_metrics()["tags"]`` against the runners that left the game.

The first step of the process compiles Tag's CPU kernels (about a minute on 2 vCPUs); later envs reuse
them, so the tests here build fresh small envs freely.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import gpurl
from gpurl.envs import StepOutputs

from tag_env_helpers import assert_env_unchanged, env_snapshot
from tag_harness import random_actions

pytestmark = pytest.mark.cpu

E, STEPS = 5, 15
# A tagging radius of 0.3 * grid_length: tags (and terminations) in most episodes; 6-step episodes
# truncate too, so 15 steps cross both kinds of episode end.
PARAMS = dict(num_taggers=2, num_runners=5, episode_length=6, tagging_distance=0.3)


def make(**overrides):
    return gpurl.make("tag_continuous", num_envs=E, device="cpu", seed=3, **{**PARAMS, **overrides})


@pytest.fixture(scope="module")
def compiled():
    """Compile the kernels once for the module (reset and step are separate kernels)."""
    env = make()
    env.reset()
    env.step(torch.zeros(E, env.num_agents, env.action_dims, dtype=torch.int64))


def sentinel_outputs(env, steps: int = 1) -> StepOutputs:
    """[steps, ...] caller buffers filled with NaN / True, so an unwritten row cannot pass for a written one."""
    N, D, S = env.num_agents, env.obs_dim, env.global_state_dim
    nan = lambda *shape: torch.full((steps, *shape), float("nan"))  # noqa: E731
    flag = lambda: torch.ones(steps, E, dtype=torch.bool)  # noqa: E731
    return StepOutputs(obs=nan(E, N, D), reward=nan(E, N), terminated=flag(), truncated=flag(),
                       final_obs=nan(E, N, D), global_state=nan(E, S), final_global_state=nan(E, S))


def slot(buffers: StepOutputs, t: int) -> StepOutputs:
    return StepOutputs(*(None if b is None else b[t] for b in buffers))


def test_step_into_out_matches_twin_env(compiled):
    mine, twin = make(), make()
    mine.reset()
    twin.reset()
    own = {k: getattr(mine, k).clone() for k in ("obs", "reward", "terminated", "truncated", "final_obs",
                                                 "global_state", "final_global_state")}
    buffers = sentinel_outputs(mine, STEPS)
    gen = torch.Generator().manual_seed(0)
    ends = np.zeros(2, dtype=int)
    for t in range(STEPS):
        actions = random_actions(mine, gen)
        obs, reward, term, trunc, info = (x.clone() if isinstance(x, torch.Tensor) else x
                                          for x in twin.step(actions))
        out = slot(buffers, t)
        got = mine.step(actions, out=out)
        # The returned tuple holds the caller's tensors, not the env's buffers.
        assert all(a is b for a, b in zip(got[:4], out[:4])) and got[4]["final_obs"] is out.final_obs
        assert got[4]["final_global_state"] is out.final_global_state
        assert torch.equal(out.global_state, twin.global_state), f"step {t} global_state"
        assert torch.equal(out.obs, obs), f"step {t} obs"
        assert torch.equal(out.reward, reward), f"step {t} reward"
        assert torch.equal(out.terminated, term), f"step {t} terminated"
        assert torch.equal(out.truncated, trunc), f"step {t} truncated"
        ended = term | trunc
        assert torch.equal(out.final_obs[ended], info["final_obs"][ended]), f"step {t} final_obs"
        assert torch.equal(out.final_global_state[ended], info["final_global_state"][ended]), f"step {t} final state"
        assert not (term & trunc).any()
        ends += [int(term.sum()), int(trunc.sum())]
    assert ends[0] > 0 and ends[1] > 0, f"15 steps should see terminations and truncations, got {ends}"
    # Same actions, same seed: the states agree too.
    for k in ("x", "y", "speed", "alive", "timestep", "episode"):
        assert torch.equal(getattr(mine.state, k), getattr(twin.state, k)), k
    # The env's own output buffers kept what reset() left there (the twin's moved on).
    for k, before in own.items():
        assert torch.equal(getattr(mine, k), before), f"env.{k} was written although out was given"
    assert not torch.equal(twin.obs, own["obs"])


def _bad(field: str, make_tensor):
    def replace(env, good: StepOutputs) -> StepOutputs:
        return good._replace(**{field: make_tensor(env, getattr(good, field))})
    return replace


BAD_OUT = {
    "obs_shape": (_bad("obs", lambda env, t: torch.zeros(E, env.num_agents, env.obs_dim + 1)), ValueError, "out.obs"),
    "reward_dtype": (_bad("reward", lambda env, t: t.double()), TypeError, "out.reward must have dtype"),
    "terminated_dtype": (_bad("terminated", lambda env, t: t.to(torch.uint8)), TypeError,
                         "out.terminated must have dtype"),
    "final_obs_strided": (_bad("final_obs", lambda env, t: torch.zeros(E, env.obs_dim, env.num_agents).transpose(1, 2)),
                          ValueError, "out.final_obs must be contiguous"),
    "truncated_numpy": (_bad("truncated", lambda env, t: t.numpy()), TypeError, "out.truncated"),
    "global_state_shape": (_bad("global_state", lambda env, t: torch.zeros(E, env.global_state_dim + 1)), ValueError,
                           r"out.global_state must have shape \(5, 43\)"),
    "final_global_state_dtype": (_bad("final_global_state", lambda env, t: t.double()), TypeError,
                                 "out.final_global_state must have dtype"),
    "plain_tuple": (lambda env, good: tuple(good), TypeError, "StepOutputs"),
}


@pytest.mark.parametrize("case", list(BAD_OUT))
def test_bad_out_is_refused_before_anything_changes(compiled, case):
    env = make()
    env.reset()
    gen = torch.Generator().manual_seed(1)
    env.step(random_actions(env, gen))     # a state that is not the reset one
    good = slot(sentinel_outputs(env), 0)
    snap = env_snapshot(env)
    timestep = env.state.timestep.clone()
    corrupt, error, message = BAD_OUT[case]
    actions = random_actions(env, gen)
    with pytest.raises(error, match=message):
        env.step(actions, out=corrupt(env, good))
    assert torch.equal(env.state.timestep, timestep)
    assert_env_unchanged(env, snap)
    assert good.reward.isnan().all() and good.obs.isnan().all()   # the well-formed tensors untouched too
    # The same step with a valid out goes through: the refusal was about out alone.
    env.step(actions, out=good)
    assert torch.equal(env.state.timestep, torch.where(good.terminated | good.truncated, 0, timestep + 1))


def test_tags_metric_counts_runners_leaving_the_game(compiled):
    # Long episodes: no truncation, so an env that ended in a step terminated (every runner tagged).
    env = make(episode_length=1000)
    assert env.params.runner_exits_game_after_tagged
    env.reset()
    T = env.params.num_taggers
    gen = torch.Generator().manual_seed(2)
    total, terminations = 0, 0
    for t in range(STEPS):
        alive_before = env.state.alive[:, T:].clone()
        _, _, term, trunc, _ = env.step(random_actions(env, gen))
        tags = env.step_metrics()["tags"]
        assert tags.dtype == torch.float32 and tags.shape == (E,)
        assert not trunc.any()
        left = ((alive_before == 1) & (env.state.alive[:, T:] == 0)).sum(1)
        # An env that terminated was autoreset in the same step (everyone alive again): all of the
        # runners that were still in the game were tagged.
        want = torch.where(term, alive_before.sum(1), left).float()
        assert torch.equal(tags, want), f"step {t}: tags {tags.tolist()} want {want.tolist()}"
        total += int(want.sum())
        terminations += int(term.sum())
    assert total > 0 and terminations > 0, (total, terminations)


def test_out_without_global_state_writes_the_envs_own(compiled):
    """``StepOutputs`` of the five older fields only (the global states None): the kernels write the step's
    global state into ``env.global_state`` and ``info["final_global_state"]`` is the env's own."""
    mine, twin = make(episode_length=2), make(episode_length=2)
    mine.reset()
    twin.reset()
    buffers = sentinel_outputs(mine, 2)._replace(global_state=None, final_global_state=None)
    gen = torch.Generator().manual_seed(5)
    for t in range(2):  # the second step truncates every env
        actions = random_actions(mine, gen)
        *_, info = mine.step(actions, out=slot(buffers, t))
        *_, want = twin.step(actions)
        assert info["final_global_state"] is mine.final_global_state
        assert torch.equal(mine.global_state, twin.global_state), t
    assert torch.equal(mine.final_global_state, twin.final_global_state)


def test_without_global_state_the_env_steps_alike_and_refuses_out_global_state(compiled):
    """``make(..., global_state=False)``: no global state (None, no info key, no [E, S] buffers), the same
    obs/reward/flags as an env that writes one across autoresets, from the same compiled kernel; a given
    ``out.global_state`` / ``out.final_global_state`` is refused before anything changes."""
    from gpurl.envs.memory import env_bytes

    off, on = make(global_state=False), make()
    S = on.global_state_dim
    assert off.global_state is None and off.final_global_state is None and off.global_state_dim == S
    assert (off.writes_global_state, on.writes_global_state) == (False, True)
    assert env_bytes(on) - env_bytes(off) == 2 * E * S * 4
    build = type(off).class_kernel().build("cpu", off._build_constants)
    overloads = len(build.overloads)
    off.reset()
    on.reset()
    gen = torch.Generator().manual_seed(0)
    ends = np.zeros(2, dtype=int)
    for t in range(STEPS):
        actions = random_actions(off, gen)
        got, want = off.step(actions), on.step(actions)
        assert list(got[4]) == ["final_obs"], f"step {t}: {list(got[4])}"
        for name, a, b in zip(("obs", "reward", "terminated", "truncated"), got[:4], want[:4]):
            assert torch.equal(a, b), f"step {t} {name}"
        ended = want[2] | want[3]
        assert torch.equal(got[4]["final_obs"][ended], want[4]["final_obs"][ended]), f"step {t} final_obs"
        ends += [int(want[2].sum()), int(want[3].sum())]
    assert ends[0] > 0 and ends[1] > 0, ends
    assert len(build.overloads) == overloads  # the same build serves both settings
    good = slot(sentinel_outputs(off), 0)
    snap = env_snapshot(off)
    with pytest.raises(ValueError, match="out.global_state and out.final_global_state given, but this "
                                         "tag_continuous env was made with global_state=False"):
        off.step(actions, out=good)
    with pytest.raises(ValueError, match="^out.final_global_state given.*global_state=False"):
        off.step(actions, out=good._replace(global_state=None))
    assert_env_unchanged(off, snap)
    assert good.obs.isnan().all() and good.global_state.isnan().all()
    _, _, _, _, info = off.step(actions, out=good._replace(global_state=None, final_global_state=None))
    assert list(info) == ["final_obs"] and not good.obs.isnan().any()
