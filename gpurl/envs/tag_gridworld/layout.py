"""What the tag_gridworld kernels receive: a NamedTuple of arrays and one of constants.

Arrays are zero-copy views of torch tensors (struct of arrays, leading [E, N] or [E]); constants are
typed NumPy scalars so every kernel argument has a fixed Numba type and sizes are run-time values
(changing num_envs or num_taggers never recompiles).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .params import TagGridworldParams


class GridArrays(NamedTuple):
    # state (env.state)
    x: np.ndarray              # int32 [E, N], cells 0..L
    y: np.ndarray              # int32 [E, N]
    timestep: np.ndarray       # int32 [E]
    episode: np.ndarray        # int32 [E]: episodes started, keys the reset draws
    # outputs
    obs: np.ndarray            # float32 [E, N, D]
    final_obs: np.ndarray      # float32 [E, N, D]
    reward: np.ndarray         # float32 [E, N]
    terminated: np.ndarray     # uint8 [E]
    truncated: np.ndarray      # uint8 [E]
    tags: np.ndarray           # float32 [E]: 1 when the runner was tagged in the last step (step_metrics)
    # bookkeeping
    finished: np.ndarray       # uint8 [E]: ended and waiting for reset (autoreset=False)
    restart: np.ndarray        # uint8 [E]: envs that start a new episode in this launch
    hit_wall: np.ndarray       # uint8 [E, N]: this step's move of agent i was clipped
    # tables
    reward_table: np.ndarray   # float32 [2, 2, 2]: [is_runner, tagged, hit_wall] -> reward


class GridConsts(NamedTuple):
    num_taggers: np.int32        # also the runner's index
    grid_length: np.int32        # L
    length_f32: np.float32       # L, the obs divisor
    episode_length: np.int32
    time_norm: np.float32        # episode_length, the obs divisor
    full_obs: np.int32
    random_start: np.int32
    center: np.int32             # L // 2, the taggers' fixed start
    autoreset: np.int32
    reset_only: np.int32         # 1: the launch is env.reset (only the restart phases run)
    seed: np.uint64
    env_id_offset: np.int64


def make_consts(p: TagGridworldParams, *, autoreset: bool, seed: int, env_id_offset: int) -> GridConsts:
    return GridConsts(
        num_taggers=np.int32(p.num_taggers),
        grid_length=np.int32(p.grid_length),
        length_f32=np.float32(p.grid_length),
        episode_length=np.int32(p.episode_length),
        time_norm=np.float32(p.episode_length),
        full_obs=np.int32(bool(p.use_full_observation)),
        random_start=np.int32(bool(p.random_start)),
        center=np.int32(p.grid_length // 2),
        autoreset=np.int32(bool(autoreset)),
        reset_only=np.int32(0),
        seed=np.uint64(seed),
        env_id_offset=np.int64(env_id_offset),
    )
