"""simple_tag in plain NumPy float64, written for clarity from docs/specs/simple_tag.md: the spec in code,
its constants included (the "Constants" section), so it shares no number with the kernels it checks.

Tests compare the CPU and CUDA kernels (float32) against this step by step, from the kernels' own
state before each step (so float32 rounding cannot accumulate through the stiff contacts). It works on
one state dict of NumPy arrays (the fields of ``SimpleTag.state``), vectorised over envs, and does not
autoreset. Unlike the kernels it evaluates every contact pair (no cut-off) with ``np.logaddexp`` as
mpe2 does. Only the reset draws are float32 (they must equal the kernels' bit for bit).
"""
from __future__ import annotations

import numpy as np

from gpurl.envs.mpe.simple_tag import SimpleTagParams
from gpurl.kernels.rng import random_uniform_ref

f32 = np.float32

# ---- the spec's constants (mpe2 1.1.1 hard-codes them) --------------------------------------------------
DT = 0.1
DAMPING = 0.25
CONTACT_FORCE = 100.0
CONTACT_MARGIN = 0.001
ADVERSARY_SIZE, GOOD_SIZE, OBSTACLE_SIZE = 0.075, 0.05, 0.2
ADVERSARY_ACCEL, GOOD_ACCEL = 3.0, 4.0
ADVERSARY_MAX_SPEED, GOOD_MAX_SPEED = 1.0, 1.3
AGENT_RESET_RANGE, OBSTACLE_RESET_RANGE = 1.0, 0.9  # reset positions ~ U(-r, r)^2
#: Discrete action k -> u = (ux, uy): 0 no-op, 1 left, 2 right, 3 down, 4 up.
DISCRETE_MOVES = ((0.0, 0.0), (-1.0, 0.0), (1.0, 0.0), (0.0, -1.0), (0.0, 1.0))


def reset_ref(p: SimpleTagParams, num_envs: int, seed: int, ordinal: np.ndarray,
              env_id_offset: int = 0) -> dict[str, np.ndarray]:
    """Fresh start of every env: episode ``ordinal[e]`` (0-based) of env e, keyed as the kernels key it.

    Draws: (seed, global env id, entity, ordinal, stream x=0 / y=1); obstacle m is entity N + m.
    """
    N, L = p.num_agents, p.num_obstacles
    env_ids = (env_id_offset + np.arange(num_envs))[:, None]
    ep = np.asarray(ordinal, np.int64)[:, None]

    def uniform(entities, lo, hi, stream):
        u = random_uniform_ref(seed, env_ids, entities[None, :], ep, stream)
        return f32(lo) + f32(hi - lo) * u  # float32, as the kernels compute it

    agents, obstacles = np.arange(N), N + np.arange(L)
    r, q = AGENT_RESET_RANGE, OBSTACLE_RESET_RANGE
    return dict(
        pos=np.stack([uniform(agents, -r, r, 0), uniform(agents, -r, r, 1)], -1).astype(f32),
        vel=np.zeros((num_envs, N, 2), f32),
        landmark_pos=np.stack([uniform(obstacles, -q, q, 0), uniform(obstacles, -q, q, 1)], -1).astype(f32),
        timestep=np.zeros(num_envs, np.int32),
        episode=np.asarray(ordinal, np.int32) + 1,
    )


def _agent_table(p: SimpleTagParams, adversary_value, good_value) -> np.ndarray:
    return np.array([adversary_value] * p.num_adversaries + [good_value] * p.num_good, dtype=np.float64)


def observe_ref(p: SimpleTagParams, s: dict[str, np.ndarray]) -> np.ndarray:
    """float32 [E, N, adversary_obs_dim]: v_i, p_i, obstacles - p_i, others - p_i, other good agents' v."""
    pos, vel, lm = (np.asarray(s[k], np.float64) for k in ("pos", "vel", "landmark_pos"))
    E, N, _ = pos.shape
    obs = np.zeros((E, N, p.obs_dim), np.float64)
    for i in range(N):
        blocks = [vel[:, i], pos[:, i]]
        blocks += [lm[:, m] - pos[:, i] for m in range(p.num_obstacles)]
        blocks += [pos[:, j] - pos[:, i] for j in range(N) if j != i]
        blocks += [vel[:, j] for j in range(p.num_adversaries, N) if j != i]
        row = np.concatenate(blocks, axis=1)
        obs[:, i, :row.shape[1]] = row
    return obs.astype(f32)


def global_state_ref(p: SimpleTagParams, s: dict[str, np.ndarray]) -> np.ndarray:
    """float32 [E, A * adversary_obs_dim + G * good_obs_dim]: JaxMARL's world state of MPE envs, every
    agent's observation (its own obs_dim, unpadded) concatenated in agent order: the toolkit's default."""
    obs = observe_ref(p, s)
    A, E = p.num_adversaries, obs.shape[0]
    return np.concatenate([obs[:, :A, :p.adversary_obs_dim].reshape(E, -1),
                           obs[:, A:, :p.good_obs_dim].reshape(E, -1)], axis=1)


def actions_to_u_ref(p: SimpleTagParams, actions: np.ndarray) -> np.ndarray:
    """float64 [E, N, 2] movement u of int [E, N(, 1)] or float32 [E, N, 5] actions (mpe2's _set_action)."""
    if p.continuous_actions:
        a = np.clip(np.asarray(actions, f32), f32(0), f32(1))  # mpe2's ClipOutOfBoundsWrapper (float32)
        return np.stack([a[..., 2] - a[..., 1], a[..., 4] - a[..., 3]], -1).astype(np.float64)
    k = np.asarray(actions).reshape(actions.shape[0], actions.shape[1])
    return np.asarray(DISCRETE_MOVES, np.float64)[k]


def bound_ref(q: np.ndarray) -> np.ndarray:
    """mpe2's bound(): 0 below 0.9; 10 (q - 0.9) below 1; min(exp(2q - 2), 10) from 1 on."""
    return np.where(q < 0.9, 0.0, np.where(q < 1.0, (q - 0.9) * 10, np.minimum(np.exp(2 * q - 2), 10.0)))


def collisions_ref(p: SimpleTagParams, pos: np.ndarray) -> np.ndarray:
    """bool [E, A, G]: adversary a and good agent g overlap (distance < 0.125, strict)."""
    A = p.num_adversaries
    d = np.linalg.norm(pos[:, :A, None, :] - pos[:, None, A:, :], axis=-1)
    return d < ADVERSARY_SIZE + GOOD_SIZE


def forces_ref(p: SimpleTagParams, pos: np.ndarray, landmark_pos: np.ndarray, u: np.ndarray) -> np.ndarray:
    """float64 [E, N, 2]: action force + every contact force (all pairs, increasing entity index)."""
    E, N, _ = pos.shape
    force = u * _agent_table(p, ADVERSARY_ACCEL, GOOD_ACCEL)[None, :, None]
    entities = np.concatenate([pos, landmark_pos], axis=1)
    sizes = np.concatenate([_agent_table(p, ADVERSARY_SIZE, GOOD_SIZE), np.full(p.num_obstacles, OBSTACLE_SIZE)])
    k = CONTACT_MARGIN
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in range(N):
            for j in range(entities.shape[1]):
                if j == i:
                    continue
                delta = pos[:, i] - entities[:, j]
                dist = np.sqrt(np.sum(np.square(delta), axis=-1))
                penetration = np.logaddexp(0, -(dist - (sizes[i] + sizes[j])) / k) * k
                contact = CONTACT_FORCE * delta / dist[:, None] * penetration[:, None]
                force[:, i] += np.where(dist[:, None] > 0, contact, 0.0)  # coincident centres: no force
    return force


def step_ref(p: SimpleTagParams, s: dict[str, np.ndarray], actions: np.ndarray):
    """One step of every env in ``s`` (replaced by float64 arrays in place).

    Returns (obs float32 [E, N, D], reward float32 [E, N], terminated bool [E], truncated bool [E],
    collisions float32 [E]).
    """
    pos, vel, lm = (np.asarray(s[k], np.float64).copy() for k in ("pos", "vel", "landmark_pos"))
    A = p.num_adversaries
    # 1. forces from the old positions
    force = forces_ref(p, pos, lm, actions_to_u_ref(p, actions))
    # 2. integrate: position with the old velocity, then damping, force (mass 1), speed cap
    pos = pos + vel * DT
    vel = vel * (1 - DAMPING)
    vel = vel + force * DT
    max_speed = _agent_table(p, ADVERSARY_MAX_SPEED, GOOD_MAX_SPEED)[None, :]
    speed = np.sqrt(np.square(vel[..., 0]) + np.square(vel[..., 1]))
    capped = speed > max_speed
    vel = np.where(capped[..., None], vel / np.where(capped, speed, 1.0)[..., None] * max_speed[..., None], vel)
    # 3. time
    timestep = np.asarray(s["timestep"]) + 1
    # 4. rewards from the new positions
    hits = collisions_ref(p, pos)                       # [E, A, G]
    caught = hits.sum(axis=1)                           # [E, G]
    total = hits.sum(axis=(1, 2))                       # [E]
    reward = np.zeros(pos.shape[:2])
    reward[:, A:] = -10.0 * caught - bound_ref(np.abs(pos[:, A:, 0])) - bound_ref(np.abs(pos[:, A:, 1]))
    reward[:, :A] = 10.0 * total[:, None]
    s.update(pos=pos, vel=vel, landmark_pos=lm, timestep=timestep.astype(np.int32))
    # 5. observation of the new state; 6. episode end
    obs = observe_ref(p, s)
    truncated = timestep >= p.max_cycles
    terminated = p.terminate_on_success & (caught > 0).all(axis=1) & ~truncated
    return obs, reward.astype(f32), terminated, truncated, total.astype(f32)
