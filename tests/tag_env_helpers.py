"""Helpers of the env API tests: whole-env snapshots, forced episode ends, sliced reference states."""
from __future__ import annotations

import numpy as np
import torch

from tag_harness import STATE_KEYS, snapshot

OUTPUT_KEYS = ("obs", "final_obs", "reward", "terminated", "truncated")


def env_snapshot(env) -> dict[str, torch.Tensor]:
    """Clones of every state field and every output buffer (to prove a call changed nothing)."""
    snap = {f"state.{k}": getattr(env.state, k).clone() for k in STATE_KEYS}
    snap.update({k: getattr(env, k).clone() for k in OUTPUT_KEYS})
    return snap


def assert_env_unchanged(env, snap: dict[str, torch.Tensor]) -> None:
    now = env_snapshot(env)
    changed = [k for k in snap if not torch.equal(now[k], snap[k])]
    assert not changed, f"a rejected call changed {changed}"


def take_envs(state: dict[str, np.ndarray], envs) -> dict[str, np.ndarray]:
    """The rows ``envs`` of a snapshot (every field has the env axis first)."""
    return {k: v[envs].copy() for k, v in state.items()}


def force_truncation(env, envs) -> None:
    """Make ``envs`` reach episode_length in the next step (via the documented state injection)."""
    env.state.timestep[list(envs)] = env.params.episode_length - 1


def force_termination(env, e: int) -> int:
    """Leave one runner in env ``e`` and put tagger 0, at rest, on top of it; returns that runner.

    With no-op actions for both, the next step tags it (distance 0 < tagging radius) and the env
    terminates.
    """
    T = env.params.num_taggers
    last = T + 2
    env.state.alive[e, T:] = 0
    env.state.alive[e, last] = 1
    env.state.num_runners[e] = 1
    env.state.x[e, 0] = env.state.x[e, last]
    env.state.y[e, 0] = env.state.y[e, last]
    for a in (0, last):
        env.state.speed[e, a] = 0.0
        env.state.acceleration[e, a] = 0.0
    return last


def noop_for(actions: torch.Tensor, e: int, agents) -> torch.Tensor:
    actions[e, list(agents)] = 0
    return actions


def numpy_outputs(obs, reward, terminated, truncated):
    return obs.numpy().copy(), reward.numpy().copy(), terminated.numpy().copy(), truncated.numpy().copy()


__all__ = ["STATE_KEYS", "assert_env_unchanged", "env_snapshot", "force_termination", "force_truncation",
           "noop_for", "numpy_outputs", "snapshot", "take_envs"]
