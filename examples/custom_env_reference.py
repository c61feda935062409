"""Cooperative foraging (examples/custom_env.py) in plain NumPy, written for clarity: the spec in code.

Works on a state dict of NumPy arrays (the fields of ``ForagingState``) and does not autoreset: the
tests compose ``step_ref`` and ``reset_ref`` where an episode ends. The CPU kernels must match it bit
for bit (integer cells, the same counter-based draws, float32 divisions and one float32 product).
``p`` is a ``ForagingParams`` (only its attributes are read, so this file imports nothing from the env).
"""

import numpy as np

from gpurl.kernels.rng import random_below_ref

f32 = np.float32
# Discrete(5): 0 stay, 1 x+1, 2 x-1, 3 y+1, 4 y-1
MOVES = np.array([[0, 0], [1, 0], [-1, 0], [0, 1], [0, -1]], dtype=np.int64)


def draw_food_ref(p, seed, env_ids, food, episode, t):
    """Cells (x, y) of food items ``food`` spawning at step ``t`` (broadcasting int arrays)."""
    x = random_below_ref(seed, env_ids, food, episode, 2 + 2 * np.asarray(t), p.grid_size)
    y = random_below_ref(seed, env_ids, food, episode, 3 + 2 * np.asarray(t), p.grid_size)
    return x, y


def reset_ref(p, num_envs: int, seed: int, episode: np.ndarray, env_id_offset: int = 0) -> dict:
    """Fresh start of every env; ``episode`` int32 [E] counts the episodes started so far (the draws'
    counter); the result's ``episode`` is one more."""
    env_ids = (env_id_offset + np.arange(num_envs))[:, None]
    ep = np.asarray(episode)[:, None]
    agents, food = np.arange(p.num_agents)[None, :], np.arange(p.num_food)[None, :]
    food_x, food_y = draw_food_ref(p, seed, env_ids, food, ep, 0)
    i32 = lambda a: np.asarray(a).astype(np.int32)  # noqa: E731
    return dict(x=i32(random_below_ref(seed, env_ids, agents, ep, 0, p.grid_size)),
                y=i32(random_below_ref(seed, env_ids, agents, ep, 1, p.grid_size)),
                food_x=i32(food_x), food_y=i32(food_y), eaten=np.zeros(num_envs, np.int32),
                timestep=np.zeros(num_envs, np.int32), episode=i32(episode) + 1)


def offset_ref(a: np.ndarray, b: np.ndarray, size: int) -> np.ndarray:
    """Shortest signed torus offset from a to b, in [-size / 2, size / 2)."""
    d = (np.asarray(b, np.int64) - np.asarray(a, np.int64)) % size
    return np.where(2 * d >= size, d - size, d)


def observe_ref(p, s: dict) -> np.ndarray:
    """float32 [E, N, 2F + 2]: per food (dx, dy) / L, then (dx, dy) / L to the nearest other agent
    (torus Manhattan distance, ties to the lower index; zeros when alone)."""
    E, N = s["x"].shape
    L = f32(p.grid_size)
    obs = np.zeros((E, N, 2 * p.num_food + 2), f32)
    obs[:, :, 0:2 * p.num_food:2] = offset_ref(s["x"][:, :, None], s["food_x"][:, None, :], p.grid_size).astype(f32) / L
    obs[:, :, 1:2 * p.num_food:2] = offset_ref(s["y"][:, :, None], s["food_y"][:, None, :], p.grid_size).astype(f32) / L
    if N > 1:
        dx = offset_ref(s["x"][:, :, None], s["x"][:, None, :], p.grid_size)  # [E, i, j]
        dy = offset_ref(s["y"][:, :, None], s["y"][:, None, :], p.grid_size)
        dist = np.abs(dx) + np.abs(dy)
        dist[:, np.arange(N), np.arange(N)] = np.iinfo(np.int64).max  # not oneself
        nearest = np.argmin(dist, axis=2)[:, :, None]  # the first minimum: the lower index
        obs[:, :, -2] = np.take_along_axis(dx, nearest, 2)[:, :, 0].astype(f32) / L
        obs[:, :, -1] = np.take_along_axis(dy, nearest, 2)[:, :, 0].astype(f32) / L
    return obs


def step_ref(p, s: dict, actions: np.ndarray, seed: int, env_id_offset: int = 0):
    """One step of every env in ``s`` (mutated in place): move, eat, respawn, reward, end.

    actions: int [E, N] or [E, N, 1] in 0..4; ``seed`` and ``env_id_offset`` key the respawn draws.
    Returns (obs, reward float32 [E, N], terminated bool [E], truncated bool [E], food float32 [E] =
    items eaten in this step).
    """
    E, N = s["x"].shape
    actions = np.asarray(actions).reshape(E, N)
    s["x"] = ((s["x"] + MOVES[actions, 0]) % p.grid_size).astype(np.int32)
    s["y"] = ((s["y"] + MOVES[actions, 1]) % p.grid_size).astype(np.int32)
    s["timestep"] += 1
    # food f is eaten when some agent stands on its cell
    on_food = (s["x"][:, :, None] == s["food_x"][:, None, :]) & (s["y"][:, :, None] == s["food_y"][:, None, :])
    hit = on_food.any(axis=1)  # [E, F]
    env_ids = (env_id_offset + np.arange(E))[:, None]
    new_x, new_y = draw_food_ref(p, seed, env_ids, np.arange(p.num_food)[None, :], s["episode"][:, None],
                                 s["timestep"][:, None])
    s["food_x"] = np.where(hit, new_x, s["food_x"]).astype(np.int32)
    s["food_y"] = np.where(hit, new_y, s["food_y"]).astype(np.int32)
    eaten_now = hit.sum(axis=1)
    s["eaten"] += eaten_now.astype(np.int32)
    food = eaten_now.astype(f32)
    reward = np.repeat((food * f32(p.food_reward))[:, None], N, axis=1)
    terminated = (p.food_target > 0) & (s["eaten"] >= p.food_target)
    truncated = (s["timestep"] >= p.episode_length) & ~terminated
    return observe_ref(p, s), reward, terminated, truncated, food
