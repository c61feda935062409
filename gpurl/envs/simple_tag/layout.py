"""What the simple_tag kernels receive: a NamedTuple of arrays and one of constants.

Arrays are zero-copy views of torch tensors (struct of arrays, leading [E, N] or [E]); constants are
typed NumPy scalars, so every kernel argument has one fixed Numba type and sizes are run-time values
(changing num_envs, A, G or L never recompiles). The world constants of the spec (sizes, speeds, dt,
...) are module-level float32 constants of the kernels, not arguments.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .params import SimpleTagParams

#: ``finished`` values: the env runs; it ended in this step (autoreset=False: its obs and reward are still
#: written); it ended in an earlier step and is frozen until ``reset``.
RUNNING, ENDED_NOW, FROZEN = 0, 2, 1


class SimpleTagArrays(NamedTuple):
    # state (env.state)
    pos: np.ndarray            # float32 [E, N, 2]
    vel: np.ndarray            # float32 [E, N, 2]
    landmark_pos: np.ndarray   # float32 [E, L, 2]
    timestep: np.ndarray       # int32 [E]
    episode: np.ndarray        # int32 [E]: episodes started since the seed was set (keys reset draws)
    # outputs
    obs: np.ndarray            # float32 [E, N, D]
    final_obs: np.ndarray      # float32 [E, N, D]
    reward: np.ndarray         # float32 [E, N]
    terminated: np.ndarray     # uint8 [E]
    truncated: np.ndarray      # uint8 [E]
    collisions: np.ndarray     # float32 [E]: adversary-good pairs in contact after the last step (metric)
    # bookkeeping
    finished: np.ndarray       # uint8 [E]: RUNNING / ENDED_NOW / FROZEN (autoreset=False)
    reset_mask: np.ndarray     # uint8 [E]: which envs the reset kernel resets
    force: np.ndarray          # float32 [E, N, 2]: this step's total force on each agent (phase scratch)
    caught: np.ndarray         # int32 [E, N]: adversaries colliding with good agent i (0 for adversaries)


class SimpleTagConsts(NamedTuple):
    num_adversaries: np.int32
    max_cycles: np.int32
    continuous: np.int32            # 1: Box actions [E, N, 5]; 0: Discrete [E, N, 1] (as float32: see env.py)
    terminate_on_success: np.int32
    autoreset: np.int32
    reset: np.int32                 # env-major (CPU) kernel only: 1 = reset the envs in reset_mask, 0 = step
    seed: np.uint64
    env_id_offset: np.int64


def make_consts(p: SimpleTagParams, *, autoreset: bool, seed: int, env_id_offset: int) -> SimpleTagConsts:
    return SimpleTagConsts(
        num_adversaries=np.int32(p.num_adversaries),
        max_cycles=np.int32(p.max_cycles),
        continuous=np.int32(bool(p.continuous_actions)),
        terminate_on_success=np.int32(bool(p.terminate_on_success)),
        autoreset=np.int32(bool(autoreset)),
        reset=np.int32(0),
        seed=np.uint64(seed),
        env_id_offset=np.int64(env_id_offset),
    )
