"""Step a gpurl MPE scenario beside mpe2 1.1.1, the implementation it reproduces (docs/specs/mpe.md).

A :class:`Pairing` names the gpurl env, the mpe2 module and the parameters both take, plus how a
scenario's per-episode draws (``goal_a``, ``key``, ...) travel between ``env.state`` and mpe2's world.
:func:`run_pairing` injects the same start into both (gpurl's reset draw, optionally crowded into a small
box, with random messages), steps both with the same random actions over whole episodes, and compares
observations, rewards and the end flags after every step, as for simple_tag (docs/specs/simple_tag.md,
"Precision"): free-running to FREE_ATOL; where that fails, the step is replayed from mpe2's own state
(written into ``env.state`` in float32) and must agree to REPLAY_OBS_ATOL / REPLAY_REWARD_ATOL.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

import gpurl

FREE_ATOL = 1e-4
REPLAY_OBS_ATOL = 2e-5
REPLAY_REWARD_ATOL = 2e-4
E = 3


def box_pairing(name: str) -> list:
    """The ``continuous`` parameters a scenario's whole-episode pairing runs: Discrete always; Box too where its
    decoding differs from every other scenario's: ``simple`` (the core's Box movement) and the scenarios
    where agents talk (Box messages). Elsewhere a Box pairing would compile one more build (about 40 s) to
    re-check the same decoding. The sim tier chooses its Box cases the same way."""
    from gpurl.envs.mpe import SCENARIOS

    import pytest

    box = name == "simple" or "comm" in SCENARIOS[name].state
    return [pytest.param(False, id="discrete")] + ([pytest.param(True, id="continuous")] if box else [])


def no_draws(world, state: dict, e: int) -> None:
    """A scenario without per-episode draws."""


def no_flips(world) -> bool:
    return False


@dataclass
class Pairing:
    """One scenario configuration, gpurl beside mpe2."""

    env_name: str
    mpe2_module: object            # e.g. mpe2.simple_v3
    params: dict = field(default_factory=dict)
    #: write gpurl's per-episode draws of env e (``state``: env.state's fields as NumPy arrays) into mpe2's world
    set_draws: Callable = no_draws
    #: read mpe2's per-episode draws into gpurl's names (``{field: array of env e's row}``), for replays
    get_draws: Callable = lambda world: {}
    #: mpe2's world is within rounding of a reward threshold (a ±jump there is rounding, not a bug)
    may_flip: Callable = no_flips
    #: the size of a reward jump ``may_flip`` excuses (simple_tag's catches: 10)
    flip_size: float = 10.0
    #: runs before mpe2 steps env e, as ``before_step(env, m, e)`` (gpurl not stepped yet): e.g. to hand
    #: mpe2 gpurl's own draws for the step (collect_treasure's respawns)
    before_step: Callable = lambda env, m, e: None


def make_pair(pairing: Pairing, num_envs: int = E):
    env = gpurl.make(pairing.env_name, num_envs=num_envs, device="cpu", seed=7, **pairing.params)
    theirs = []
    for e in range(num_envs):
        m = pairing.mpe2_module.parallel_env(**pairing.params)
        m.reset(seed=e)
        theirs.append(m)
    return env, theirs


def host_state(env, e: int) -> dict:
    return {name: getattr(env.state, name)[e].numpy().copy() for name in env.state.__dataclass_fields__}


def world_state(pairing: Pairing, m) -> dict:
    """mpe2's world in gpurl's names (float32 where gpurl is)."""
    world = m.unwrapped.world
    state = {"pos": np.array([a.state.p_pos for a in world.agents], np.float32),
             "vel": np.array([a.state.p_vel for a in world.agents], np.float32),
             "landmark_pos": np.array([lm.state.p_pos for lm in world.landmarks], np.float32).reshape(-1, 2)}
    if world.dim_c > 0 and any(not a.silent for a in world.agents):  # gpurl's comm: only where an agent talks
        state["comm"] = np.array([a.state.c for a in world.agents], np.float32).reshape(len(world.agents), -1)
    state.update(pairing.get_draws(world))
    return state


def set_world(pairing: Pairing, m, state: dict, e: int) -> None:
    """Write gpurl's state of env e into mpe2's world (float64, as mpe2 keeps it)."""
    world = m.unwrapped.world
    for k, agent in enumerate(world.agents):
        agent.state.p_pos = np.array(state["pos"][k], np.float64)
        agent.state.p_vel = np.array(state["vel"][k], np.float64)
        if "comm" in state:
            agent.state.c = np.array(state["comm"][k], np.float64)
    for k, lm in enumerate(world.landmarks):
        lm.state.p_pos = np.array(state["landmark_pos"][k], np.float64)
    pairing.set_draws(world, state, e)


def write_state(env, e: int, state: dict) -> None:
    """Write mpe2's state (gpurl names) into gpurl's env e."""
    for name, value in state.items():
        getattr(env.state, name)[e] = torch.as_tensor(np.asarray(value), dtype=getattr(env.state, name).dtype)


def obs_matrix(m, obs: dict, dim: int) -> np.ndarray:
    """mpe2's per-agent dict as gpurl's [N, obs_dim] rows (zero-padded after each agent's own dim)."""
    rows = np.zeros((len(m.possible_agents), dim), np.float32)
    for k, name in enumerate(m.possible_agents):
        rows[k, :len(obs[name])] = obs[name]
    return rows


def random_actions(env, gen: torch.Generator) -> torch.Tensor:
    """Uniform actions of every group's space; Box values in [-0.2, 1.2] (mpe2 clips them), padding random."""
    E, N = env.num_envs, env.num_agents
    if env.action_dtype == torch.float32:
        return torch.rand((E, N, env.action_dims), generator=gen) * 1.4 - 0.2
    actions = torch.zeros((E, N), dtype=torch.int64)
    for group in env.groups.values():
        a = group.agents
        actions[:, a] = torch.randint(0, int(group.action_space.n), (E, a.stop - a.start), generator=gen)
    return actions


def mpe2_actions(env, m, actions: torch.Tensor, e: int) -> dict:
    out = {}
    for k, name in enumerate(m.possible_agents):
        if env.action_dtype == torch.float32:
            width = m.action_space(name).shape[0]
            out[name] = actions[e, k, :width].numpy()
        else:
            out[name] = int(actions[e, k])
    return out


def step_mpe2(pairing: Pairing, env, m, actions: torch.Tensor, e: int):
    pairing.before_step(env, m, e)
    return m.step(mpe2_actions(env, m, actions, e))


def rewards_agree(ours: np.ndarray, theirs: np.ndarray, atol: float, flip_ok: bool, flip_size: float) -> bool:
    diff = np.abs(ours - theirs)
    if (diff <= atol).all():
        return True
    jumps = np.abs(diff - flip_size * np.round(diff / flip_size))
    return flip_ok and bool((jumps <= atol).all())


def inject_start(pairing: Pairing, env, theirs, gen: torch.Generator, crowded: bool) -> None:
    """Both sides start from gpurl's reset draw; crowded: agents and landmarks squeezed into a small box and
    random messages (where agents talk), so contacts and communication are exercised from the first step."""
    env.reset()
    if crowded:
        env.state.pos.copy_(torch.rand(env.state.pos.shape, generator=gen) * 0.5 - 0.25)
        env.state.landmark_pos.copy_(torch.rand(env.state.landmark_pos.shape, generator=gen) * 0.6 - 0.3)
        if hasattr(env.state, "comm"):
            env.state.comm.copy_(torch.rand(env.state.comm.shape, generator=gen))
    for e, m in enumerate(theirs):
        set_world(pairing, m, host_state(env, e), e)


def run_episode(pairing: Pairing, env, theirs, gen: torch.Generator, check_start_obs: bool) -> dict:
    """Step both until every mpe2 env's episode ended; assert agreement; returns what happened."""
    D, n = env.obs_dim, len(theirs)
    for e, m in enumerate(theirs):
        if check_start_obs:
            want = obs_matrix(m, {a: m.unwrapped.observe(a) for a in m.possible_agents}, D)
            np.testing.assert_allclose(env.obs[e].numpy(), want, rtol=0, atol=1e-6, err_msg=f"env {e} start obs")
    active = np.ones(n, bool)
    stats = dict(replays=0, steps=0, terminated=0, truncated=0, max_free_obs_error=0.0, nonzero_rewards=0)
    while active.any():
        t = stats["steps"]
        before = [world_state(pairing, m) for m in theirs]
        counters = (env.state.timestep.clone(), env.state.episode.clone())
        actions = random_actions(env, gen)
        results = [step_mpe2(pairing, env, m, actions, e) if active[e] else None for e, m in enumerate(theirs)]

        def compare(obs_atol, reward_atol):
            obs, reward, term, trunc, info = (x.clone() if torch.is_tensor(x) else x for x in env.step(actions))
            ok = True
            for e, m in enumerate(theirs):
                if not active[e]:
                    continue
                o, r, te, tr, _ = results[e]
                first = m.possible_agents[0]
                assert bool(term[e]) == te[first] and bool(trunc[e]) == tr[first], f"step {t} env {e} flags"
                got = (info["final_obs"] if (term[e] or trunc[e]) else obs)[e].numpy()
                err = float(np.abs(got - obs_matrix(m, o, D)).max())
                stats["max_free_obs_error"] = max(stats["max_free_obs_error"], err)
                theirs_r = np.array([r[a] for a in m.possible_agents])
                ok &= err <= obs_atol and rewards_agree(reward[e].numpy(), theirs_r, reward_atol,
                                                        pairing.may_flip(m.unwrapped.world), pairing.flip_size)
            return ok

        if not compare(FREE_ATOL, FREE_ATOL):
            stats["replays"] += 1
            for e in range(n):  # replay this step from mpe2's state before it
                write_state(env, e, before[e])
            env.state.timestep.copy_(counters[0])
            env.state.episode.copy_(counters[1])
            assert compare(REPLAY_OBS_ATOL, REPLAY_REWARD_ATOL), (
                f"step {t}: gpurl differs from mpe2 beyond {REPLAY_OBS_ATOL} even from mpe2's own state")
        for e, m in enumerate(theirs):
            if active[e]:
                _, r, te, tr, _ = results[e]
                first = m.possible_agents[0]
                stats["nonzero_rewards"] += int(any(v != 0 for v in r.values()))
                stats["terminated"] += int(te[first])
                stats["truncated"] += int(tr[first])
                if te[first] or tr[first]:
                    active[e] = False  # gpurl autoreset it; mpe2's episode is over
        stats["steps"] += 1
    return stats


def check_whole_episodes(pairing: Pairing, crowded: bool) -> dict:
    """The acceptance check of one scenario configuration: whole episodes side by side (see module doc)."""
    env, theirs = make_pair(pairing)
    seed = zlib.crc32(f"{pairing.env_name}{sorted(pairing.params.items())}{crowded}".encode())
    gen = torch.Generator().manual_seed(seed)
    inject_start(pairing, env, theirs, gen, crowded)
    stats = run_episode(pairing, env, theirs, gen, check_start_obs=not crowded)
    print(f"\n{pairing.env_name} {pairing.params} crowded={crowded}: {stats}")
    return stats


def check_pettingzoo(env_name: str, mpe2_module, params: dict | None = None) -> None:
    """gpurl's PettingZoo adapter of ``env_name`` passes ``parallel_api_test`` and has mpe2's agent names,
    observation, action and state spaces, with Discrete and with Box actions (only the Discrete env runs:
    the Box one's spaces need no compile)."""
    import warnings

    from pettingzoo.test import parallel_api_test

    from gpurl.envs.adapters import parallel_env

    params = dict(params or {})
    for continuous in (False, True):
        ours = parallel_env(env_name, seed=1, **params, continuous_actions=continuous)
        theirs = mpe2_module.parallel_env(**params, continuous_actions=continuous)
        assert ours.possible_agents == theirs.possible_agents
        for agent in ours.possible_agents:
            assert ours.observation_space(agent).shape == theirs.observation_space(agent).shape, agent
            assert ours.action_space(agent) == theirs.action_space(agent), agent
        assert ours.state_space.shape == theirs.state_space.shape
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the API test reports missing/extra keys as warnings
        parallel_api_test(parallel_env(env_name, seed=1, **params), num_cycles=60)
