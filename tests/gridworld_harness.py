"""Shared driver for tag_gridworld tests: run an env and the NumPy reference side by side."""
from __future__ import annotations

import numpy as np
import torch

import gpurl
from gpurl.envs.tag_gridworld.reference import global_state_ref, observe_ref, reset_ref, step_ref

STATE_KEYS = ("x", "y", "timestep", "episode")
# 7 envs x (6 taggers + 1 runner) on a 4 x 4 grid of cells (L = 3): tags every few steps and many wall
# hits; 9-step episodes truncate too, so a few dozen steps cross both kinds of episode end.
SMALL = dict(num_envs=7, seed=3, num_taggers=6, grid_length=3, episode_length=9)


def make_small(device="cpu", **overrides):
    params = {**SMALL, **overrides}
    return gpurl.make("tag_gridworld", num_envs=params.pop("num_envs"), device=device, seed=params.pop("seed"),
                      **params)


def snapshot(env) -> dict[str, np.ndarray]:
    return {k: getattr(env.state, k).detach().cpu().numpy().copy() for k in STATE_KEYS}


def random_actions(env, gen: torch.Generator, dtype=torch.int64) -> torch.Tensor:
    """int [E, N, 1] uniform over Discrete(5), drawn on the host."""
    return torch.randint(0, 5, (env.num_envs, env.num_agents, 1), generator=gen, dtype=dtype)


def run_against_reference(env, steps: int, seed: int = 0) -> np.ndarray:
    """Step ``env`` ``steps`` times with random actions; assert every step equals the reference bit for bit.

    Also checks ``info["final_obs"]`` and ``info["final_global_state"]`` of ended envs, the new episode's
    draw and obs, ``env.global_state`` and ``step_metrics()["tags"]``. Returns how many env-episodes ended as [terminated, truncated].
    """
    p = env.params
    gen = torch.Generator().manual_seed(seed)
    obs = env.reset().cpu().numpy()
    start = reset_ref(p, env.num_envs, env.seed, np.zeros(env.num_envs, np.int32), env.env_id_offset)
    assert_state_equal(snapshot(env), start, "reset")
    np.testing.assert_array_equal(obs, observe_ref(p, start), err_msg="reset obs")
    np.testing.assert_array_equal(env.global_state.cpu().numpy(), global_state_ref(p, start),
                                  err_msg="reset global_state")
    ends = np.zeros(2, dtype=np.int64)
    for t in range(steps):
        before = snapshot(env)
        actions = random_actions(env, gen)
        obs, reward, term, trunc, info = env.step(actions.to(env.device))
        ref = {k: v.copy() for k, v in before.items()}
        ref_obs, ref_rew, ref_term, ref_trunc = step_ref(p, ref, actions.numpy())
        where = f"step {t}"
        np.testing.assert_array_equal(reward.cpu().numpy(), ref_rew, err_msg=where + " reward")
        np.testing.assert_array_equal(term.cpu().numpy(), ref_term, err_msg=where + " terminated")
        np.testing.assert_array_equal(trunc.cpu().numpy(), ref_trunc, err_msg=where + " truncated")
        np.testing.assert_array_equal(env.step_metrics()["tags"].cpu().numpy(), ref_term.astype(np.float32),
                                      err_msg=where + " tags metric")
        done = ref_term | ref_trunc
        ends += [ref_term.sum(), ref_trunc.sum()]
        if env.autoreset and done.any():
            np.testing.assert_array_equal(info["final_obs"].cpu().numpy()[done], ref_obs[done],
                                          err_msg=where + " final_obs")
            np.testing.assert_array_equal(info["final_global_state"].cpu().numpy()[done],
                                          global_state_ref(p, ref)[done], err_msg=where + " final_global_state")
            fresh = reset_ref(p, env.num_envs, env.seed, before["episode"], env.env_id_offset)
            for k in STATE_KEYS:
                ref[k] = np.where(done.reshape((-1,) + (1,) * (ref[k].ndim - 1)), fresh[k], ref[k])
            ref_obs = np.where(done[:, None, None], observe_ref(p, fresh), ref_obs)
        assert_state_equal(snapshot(env), ref, where)
        np.testing.assert_array_equal(obs.cpu().numpy(), ref_obs, err_msg=where + " obs")
        np.testing.assert_array_equal(env.global_state.cpu().numpy(), global_state_ref(p, ref),
                                      err_msg=where + " global_state")
    return ends


def assert_state_equal(got, want, where):
    for k in STATE_KEYS:
        np.testing.assert_array_equal(got[k], want[k], err_msg=f"{where} state.{k}")
