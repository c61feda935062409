"""tag_continuous in plain NumPy, written for clarity: the spec in code.

Tests compare the CPU and CUDA kernels against this, step by step. It works on one state dict of
NumPy arrays (the fields of ``TagContinuous.state``) and does not autoreset; every float is float32
arithmetic in the spec's order, so the CPU kernels must match it exactly.
"""
from __future__ import annotations

import math

import numpy as np

from ...kernels.math32 import cos32_ref, sin32_ref
from ...kernels.rng import random_below_ref, random_uniform_ref
from .params import TagContinuousParams, action_table

f32 = np.float32
TWO_PI = f32(2 * math.pi)


def reset_ref(p: TagContinuousParams, num_envs: int, seed: int, episode: np.ndarray,
              env_id_offset: int = 0) -> dict[str, np.ndarray]:
    """Fresh start of every env; draws keyed by (seed, global env id, agent, episode[e], stream)."""
    E, N = num_envs, p.num_agents
    env_ids = (env_id_offset + np.arange(E))[:, None]
    agents = np.arange(N)[None, :]
    ep = np.asarray(episode)[:, None]
    L = f32(p.grid_length)
    headings = np.array([0.0, math.pi / 2, math.pi, 3 * math.pi / 2], dtype=np.float32)
    return dict(
        x=random_uniform_ref(seed, env_ids, agents, ep, 0) * L,
        y=random_uniform_ref(seed, env_ids, agents, ep, 1) * L,
        direction=headings[random_below_ref(seed, env_ids, agents, ep, 2, 4)],
        speed=np.zeros((E, N), f32), acceleration=np.zeros((E, N), f32),
        alive=np.ones((E, N), np.int32), num_runners=np.full(E, p.num_runners, np.int32),
        timestep=np.zeros(E, np.int32), episode=np.asarray(episode, np.int32) + 1,
    )


def observe_ref(p: TagContinuousParams, s: dict[str, np.ndarray]) -> np.ndarray:
    """Observation float32 [E, N, obs_dim] of state ``s`` (spec section "Observation")."""
    E, N = s["x"].shape
    T = p.num_taggers
    L = f32(p.grid_length)
    norms = [f32(math.sqrt(2) * L), f32(math.sqrt(2) * L), f32(f32(p.max_speed) + f32(1e-10)),
             f32(f32(p.max_speed) + f32(1e-10)), f32(2 * math.pi)]
    keys = ["x", "y", "speed", "acceleration", "direction"]
    obs = np.zeros((E, N, p.obs_dim), f32)
    for e in range(E):
        alive = s["alive"][e]
        time = f32(s["timestep"][e]) / f32(p.episode_length)
        for i in range(N):
            if p.use_full_observation:
                others = [j for j in range(N) if j != i]
                width = N - 1
            else:
                if not alive[i]:
                    continue
                dx = s["x"][e] - s["x"][e, i]
                dy = s["y"][e] - s["y"][e, i]
                dist = np.sqrt(dx * dx + dy * dy).astype(f32)
                candidates = [j for j in range(N) if j != i and alive[j]]
                others = sorted(candidates, key=lambda j: (dist[j], j))[: p.num_other_agents_observed]
                width = p.num_other_agents_observed
            for slot, j in enumerate(others):
                if alive[i]:
                    for b, key in enumerate(keys):
                        obs[e, i, b * width + slot] = (s[key][e, j] - s[key][e, i]) / norms[b]
                obs[e, i, 5 * width + slot] = f32(1.0) if j < T else f32(0.0)
                obs[e, i, 6 * width + slot] = f32(alive[j])
            obs[e, i, 7 * width] = time if alive[i] else f32(0.0)
    return obs


def global_state_ref(p: TagContinuousParams, s: dict[str, np.ndarray]) -> np.ndarray:
    """Global state float32 [E, 6 N + 1] of state ``s``: per agent x, y, speed, acceleration, direction
    (normalised as the observation normalises them) and alive, then timestep / episode_length."""
    E, N = s["x"].shape
    L = f32(p.grid_length)
    pos_norm, speed_norm = f32(math.sqrt(2) * L), f32(f32(p.max_speed) + f32(1e-10))
    features = [s["x"] / pos_norm, s["y"] / pos_norm, s["speed"] / speed_norm, s["acceleration"] / speed_norm,
                s["direction"] / f32(2 * math.pi), s["alive"].astype(f32)]
    per_agent = np.stack([np.asarray(f, f32) for f in features], axis=-1).reshape(E, 6 * N)
    time = s["timestep"].astype(f32) / f32(p.episode_length)
    return np.concatenate([per_agent, time[:, None]], axis=1).astype(f32)


def step_ref(p: TagContinuousParams, s: dict[str, np.ndarray], actions: np.ndarray):
    """One step of every env in ``s`` (mutated in place). Returns (obs, reward, terminated, truncated)."""
    E, N = s["x"].shape
    T = p.num_taggers
    L = f32(p.grid_length)
    acc_table = action_table(p.min_acceleration, p.max_acceleration, p.num_acceleration_levels)
    turn_table = action_table(p.min_turn, p.max_turn, p.num_turn_levels)
    is_tagger = np.arange(N) < T
    vmax = np.where(is_tagger, f32(f32(p.max_speed) * f32(p.skill_level_tagger)),
                    f32(f32(p.max_speed) * f32(p.skill_level_runner))).astype(f32)

    # 1. time
    s["timestep"] += 1
    # 2. movement
    alive = s["alive"].astype(f32)
    acceleration = s["acceleration"] + acc_table[actions[..., 0]]
    direction = np.fmod(s["direction"] + turn_table[actions[..., 1]], TWO_PI) * alive
    direction = np.where(direction < 0, direction + TWO_PI, direction).astype(f32)
    speed = (np.minimum(np.maximum(s["speed"] + acceleration, f32(0)), vmax) * alive).astype(f32)
    acceleration = np.where((speed <= 0) | (speed >= vmax), f32(0), acceleration).astype(f32)
    x = s["x"] + speed * cos32_ref(direction)
    y = s["y"] + speed * sin32_ref(direction)
    hit_edge = (x < 0) | (x > L) | (y < 0) | (y > L)
    s["x"] = np.where(hit_edge, np.clip(x, f32(0), L), x).astype(f32)
    s["y"] = np.where(hit_edge, np.clip(y, f32(0), L), y).astype(f32)
    s["speed"], s["direction"], s["acceleration"] = speed, direction, acceleration
    edge_penalty = np.where(hit_edge, f32(p.edge_hit_penalty), f32(0)).astype(f32)

    # 3. observation before this step's tags
    obs = observe_ref(p, s)

    # 4. rewards and tags
    reward = np.zeros((E, N), f32)
    step_term = np.where(is_tagger, f32(p.step_penalty_for_tagger), f32(p.step_reward_for_runner)).astype(f32)
    tag_radius = f32(f32(p.tagging_distance) * L)
    for e in range(E):
        for i in range(N):
            if s["alive"][e, i]:
                reward[e, i] += edge_penalty[e, i]
                reward[e, i] += step_term[i]
        alive_runners = [j for j in range(T, N) if s["alive"][e, j]]
        for j in alive_runners:
            dx = s["x"][e, :T] - s["x"][e, j]
            dy = s["y"][e, :T] - s["y"][e, j]
            dist = np.sqrt(dx * dx + dy * dy).astype(f32)
            m = int(np.argmin(dist))  # first minimum: ties -> lowest index
            if dist[m] < tag_radius:
                reward[e, j] += f32(p.tag_penalty_for_runner)
                reward[e, m] += f32(p.tag_reward_for_tagger)
                if p.runner_exits_game_after_tagged:
                    s["alive"][e, j] = 0
                    s["num_runners"][e] -= 1
        if s["timestep"][e] == p.episode_length:
            for j in range(T, N):
                if s["alive"][e, j]:
                    reward[e, j] += f32(p.end_of_game_reward_for_runner)

    # 5. episode end
    terminated = s["num_runners"] == 0
    truncated = (s["timestep"] == p.episode_length) & ~terminated
    return obs, reward, terminated, truncated
