"""tag_gridworld in plain NumPy, written for clarity: the spec in code.

Tests compare the CPU and CUDA kernels against this, step by step. It works on one state dict of NumPy
arrays (the fields of ``TagGridworld.state``: x, y, timestep, and episode) and does not autoreset. Rewards are
summed in float64 and rounded once to float32 (as the original does); observations are float32
divisions, so the CPU kernels must match it bit for bit.
"""
from __future__ import annotations

import numpy as np

from ...kernels.rng import random_below_ref
from .params import TagGridworldParams

f32 = np.float32
# Spec "Actions": Discrete(5) -> (dx, dy)
MOVES = np.array([[0, 0], [1, 0], [-1, 0], [0, 1], [0, -1]], dtype=np.int64)


def reset_ref(p: TagGridworldParams, num_envs: int, seed: int, episode: np.ndarray,
              env_id_offset: int = 0) -> dict[str, np.ndarray]:
    """Fresh start of every env; random cells keyed by (seed, global env id, agent, episode[e], stream).

    episode: int32 [E], episodes each env has started so far (the draw's counter); the result's
    ``episode`` is one more.
    """
    E, N, L = num_envs, p.num_agents, p.grid_length
    if p.random_start:
        env_ids = (env_id_offset + np.arange(E))[:, None]
        agents = np.arange(N)[None, :]
        ep = np.asarray(episode)[:, None]
        x = random_below_ref(seed, env_ids, agents, ep, 0, L + 1)
        y = random_below_ref(seed, env_ids, agents, ep, 1, L + 1)
    else:  # the original's fixed start: taggers in the centre, the runner in the corner
        x = np.full((E, N), L // 2, np.int32)
        x[:, p.runner] = 0
        y = x.copy()
    return dict(x=x.astype(np.int32), y=y.astype(np.int32), timestep=np.zeros(E, np.int32),
                episode=np.asarray(episode, np.int32) + 1)


def nearest_tagger_ref(p: TagGridworldParams, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """int [E]: the tagger nearest to the runner in Manhattan distance, ties to the lowest index."""
    r = p.runner
    dist = np.abs(x[:, :r] - x[:, r:r + 1]) + np.abs(y[:, :r] - y[:, r:r + 1])
    return np.argmin(dist, axis=1)  # first minimum


def observe_ref(p: TagGridworldParams, s: dict[str, np.ndarray]) -> np.ndarray:
    """Observation float32 [E, N, obs_dim] of state ``s`` (spec section "Observation")."""
    E, N = s["x"].shape
    L = f32(p.grid_length)
    xs = s["x"].astype(f32) / L
    ys = s["y"].astype(f32) / L
    time = s["timestep"].astype(f32) / f32(p.episode_length)  # [E]
    is_runner = (np.arange(N) == p.runner).astype(f32)
    obs = np.zeros((E, N, p.obs_dim), f32)
    if p.use_full_observation:
        for i in range(N):
            is_self = (np.arange(N) == i).astype(f32)
            obs[:, i, :N] = xs
            obs[:, i, N:2 * N] = ys
            obs[:, i, 2 * N:3 * N] = is_runner
            obs[:, i, 3 * N:4 * N] = is_self
            obs[:, i, 4 * N] = time
        return obs
    target = np.full((E, N), p.runner)
    target[:, p.runner] = nearest_tagger_ref(p, s["x"], s["y"])
    rows = np.arange(E)[:, None]
    obs[:, :, 0] = xs
    obs[:, :, 1] = ys
    obs[:, :, 2] = xs[rows, target]
    obs[:, :, 3] = ys[rows, target]
    obs[:, :, 4] = is_runner
    obs[:, :, 5] = time[:, None]
    return obs


def global_state_ref(p: TagGridworldParams, s: dict[str, np.ndarray]) -> np.ndarray:
    """Global state float32 [E, 3 N + 1] of state ``s``: per agent x / L, y / L and 1 for the runner (else
    0), then timestep / episode_length."""
    E, N = s["x"].shape
    L = f32(p.grid_length)
    is_runner = np.broadcast_to((np.arange(N) == p.runner).astype(f32), (E, N))
    per_agent = np.stack([s["x"].astype(f32) / L, s["y"].astype(f32) / L, is_runner], axis=-1).reshape(E, 3 * N)
    time = s["timestep"].astype(f32) / f32(p.episode_length)
    return np.concatenate([per_agent, time[:, None]], axis=1).astype(f32)


def step_ref(p: TagGridworldParams, s: dict[str, np.ndarray], actions: np.ndarray):
    """One step of every env in ``s`` (mutated in place). Returns (obs, reward, terminated, truncated).

    actions: int [E, N] or [E, N, 1], values in 0..4.
    """
    actions = np.asarray(actions).reshape(s["x"].shape)
    L, runner = p.grid_length, p.runner
    # 1. time, moves, clipping at the walls
    s["timestep"] += 1
    moved_x = s["x"].astype(np.int64) + MOVES[actions, 0]
    moved_y = s["y"].astype(np.int64) + MOVES[actions, 1]
    clipped_x, clipped_y = np.clip(moved_x, 0, L), np.clip(moved_y, 0, L)
    hit_wall = (clipped_x != moved_x) | (clipped_y != moved_y)
    s["x"], s["y"] = clipped_x.astype(np.int32), clipped_y.astype(np.int32)
    # 2. tagged: some tagger on the runner's cell
    on_runner = (s["x"][:, :runner] == s["x"][:, runner:]) & (s["y"][:, :runner] == s["y"][:, runner:])
    tagged = on_runner.any(axis=1)  # [E]
    # 3. rewards (float64, rounded once)
    reward = -float(p.wall_hit_penalty) * hit_wall  # float64 [E, N]
    tagger_term = np.where(tagged, float(p.tag_reward_for_tagger), -float(p.step_cost_for_tagger))
    runner_term = np.where(tagged, -float(p.tag_penalty_for_runner), float(p.step_cost_for_tagger))
    reward[:, :runner] += tagger_term[:, None]
    reward[:, runner] += runner_term
    # 4. episode end
    terminated = tagged
    truncated = (s["timestep"] == p.episode_length) & ~tagged
    return observe_ref(p, s), reward.astype(f32), terminated, truncated
