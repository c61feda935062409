"""What the tag_continuous kernels receive: a NamedTuple of arrays and one of constants.

Arrays are zero-copy views of torch tensors (struct of arrays, leading [E, N] or [E]); constants are
typed NumPy scalars so every kernel argument has a fixed Numba type and sizes are run-time values
(changing num_envs, N or k never recompiles).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .params import TagContinuousParams


class TagArrays(NamedTuple):
    # state (env.state), float32 [E, N] unless noted
    x: np.ndarray
    y: np.ndarray
    speed: np.ndarray
    direction: np.ndarray
    acceleration: np.ndarray
    alive: np.ndarray          # int32 [E, N]
    num_runners: np.ndarray    # int32 [E]
    timestep: np.ndarray       # int32 [E]
    episode: np.ndarray        # int32 [E]: episodes started, keys the reset draws
    # outputs
    obs: np.ndarray            # float32 [E, N, D]
    final_obs: np.ndarray      # float32 [E, N, D]
    reward: np.ndarray         # float32 [E, N]
    terminated: np.ndarray     # uint8 [E]
    truncated: np.ndarray      # uint8 [E]
    # bookkeeping
    finished: np.ndarray       # uint8 [E]: ended and waiting for reset (autoreset=False)
    reset_mask: np.ndarray     # uint8 [E]: which envs the reset kernel resets
    tagged_by: np.ndarray      # int32 [E, N]: tagger that tags runner j this step, else -1
    # per-lane scratch for the k-nearest selection (rows: see gpurl.kernels.scratch)
    dist_row: np.ndarray       # float32 [rows, N or 1]
    cand_idx: np.ndarray       # int32 [rows, capacity + 1]
    cand_dist: np.ndarray      # float32 [rows, capacity + 1]
    nbr_idx: np.ndarray        # int32 [rows, capacity + 1]: the k nearest first
    # tables
    acc_table: np.ndarray      # float32 [num_acceleration_levels + 1]
    turn_table: np.ndarray     # float32 [num_turn_levels + 1]


class TagConsts(NamedTuple):
    num_taggers: np.int32
    num_runners: np.int32
    grid_length: np.float32
    episode_length: np.int32
    vmax_tagger: np.float32
    vmax_runner: np.float32
    edge_hit_penalty: np.float32
    step_reward_tagger: np.float32
    step_reward_runner: np.float32
    tag_reward_for_tagger: np.float32
    tag_penalty_for_runner: np.float32
    end_of_game_reward_for_runner: np.float32
    runner_exits: np.int32
    full_obs: np.int32
    k: np.int32
    tag_radius: np.float32       # f32(f32(tagging_distance) * L), as NumPy 2 computes it
    pos_norm: np.float32         # sqrt(2) * L
    speed_norm: np.float32       # max_speed + 1e-10
    dir_norm: np.float32         # 2 pi
    time_norm: np.float32        # episode_length
    search_radius: np.float32    # k-nearest radius hint
    autoreset: np.int32
    seed: np.uint64
    env_id_offset: np.int64


def make_consts(p: TagContinuousParams, *, autoreset: bool, seed: int, env_id_offset: int) -> TagConsts:
    f32 = np.float32
    L = f32(p.grid_length)
    n_agents = p.num_agents
    k = p.num_other_agents_observed
    # Uniform density n/L^2 holds k agents within L*sqrt(k/(pi n)); 1.2x covers some of the wall effects
    # (k_nearest rescales the radius from the count it finds).
    search = f32(1.2 * float(L) * math.sqrt(k / (math.pi * max(n_agents - 1, 1))))
    return TagConsts(
        num_taggers=np.int32(p.num_taggers),
        num_runners=np.int32(p.num_runners),
        grid_length=L,
        episode_length=np.int32(p.episode_length),
        vmax_tagger=f32(f32(p.max_speed) * f32(p.skill_level_tagger)),
        vmax_runner=f32(f32(p.max_speed) * f32(p.skill_level_runner)),
        edge_hit_penalty=f32(p.edge_hit_penalty),
        step_reward_tagger=f32(p.step_penalty_for_tagger),
        step_reward_runner=f32(p.step_reward_for_runner),
        tag_reward_for_tagger=f32(p.tag_reward_for_tagger),
        tag_penalty_for_runner=f32(p.tag_penalty_for_runner),
        end_of_game_reward_for_runner=f32(p.end_of_game_reward_for_runner),
        runner_exits=np.int32(bool(p.runner_exits_game_after_tagged)),
        full_obs=np.int32(bool(p.use_full_observation)),
        k=np.int32(k),
        tag_radius=f32(f32(p.tagging_distance) * L),
        pos_norm=f32(math.sqrt(2.0) * float(L)),
        speed_norm=f32(f32(p.max_speed) + f32(1e-10)),
        dir_norm=f32(2.0 * math.pi),
        time_norm=f32(p.episode_length),
        search_radius=max(search, f32(1e-6)),
        autoreset=np.int32(bool(autoreset)),
        seed=np.uint64(seed),
        env_id_offset=np.int64(env_id_offset),
    )
