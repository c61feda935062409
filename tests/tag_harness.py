"""Shared driver for tag_continuous parity tests: run an env and the NumPy reference side by side."""
from __future__ import annotations

import numpy as np
import torch

import gpurl
from gpurl.envs.tag_continuous.reference import global_state_ref, observe_ref, reset_ref, step_ref

STATE_KEYS = ("x", "y", "speed", "direction", "acceleration", "alive", "num_runners", "timestep", "episode")


def snapshot(env) -> dict[str, np.ndarray]:
    return {k: getattr(env.state, k).detach().cpu().numpy().copy() for k in STATE_KEYS}


def random_actions(env, gen: torch.Generator) -> torch.Tensor:
    high = env._action_high.cpu()
    u = torch.rand((env.num_envs, env.num_agents, env.action_dims), generator=gen)
    return (u * high).long().clamp_max(high - 1)


def run_against_reference(env, steps: int, seed: int = 0, float_atol: float = 0.0):
    """Step ``env`` ``steps`` times with random actions; assert every step equals the reference (the global
    state and the final global state of autoresetting envs included).

    Returns how many env-episodes ended (terminated, truncated), so tests can assert they crossed
    autoreset boundaries. ``float_atol`` 0 demands bit equality (CPU build vs reference).
    """
    p = env.params
    gen = torch.Generator().manual_seed(seed)
    obs = env.reset().cpu().numpy()
    start = reset_ref(p, env.num_envs, env.seed, np.zeros(env.num_envs, np.int32), env.env_id_offset)
    assert_state_equal(snapshot(env), start, float_atol, "reset")
    assert_close(obs, observe_ref(p, start), float_atol, "reset obs")
    assert_close(env.global_state.cpu().numpy(), global_state_ref(p, start), float_atol, "reset global_state")
    ends = np.zeros(2, dtype=np.int64)
    for t in range(steps):
        before = snapshot(env)
        actions = random_actions(env, gen)
        obs, reward, term, trunc, info = env.step(actions.to(env.device))
        ref = dict(before)
        ref_obs, ref_rew, ref_term, ref_trunc = step_ref(p, ref, actions.numpy())
        where = f"step {t}"
        assert_close(reward.cpu().numpy(), ref_rew, float_atol, where + " reward")
        np.testing.assert_array_equal(term.cpu().numpy(), ref_term, err_msg=where + " terminated")
        np.testing.assert_array_equal(trunc.cpu().numpy(), ref_trunc, err_msg=where + " truncated")
        done = ref_term | ref_trunc
        ends += [ref_term.sum(), ref_trunc.sum()]
        after = snapshot(env)
        got_obs = obs.cpu().numpy()
        if env.autoreset and done.any():
            assert_close(info["final_obs"].cpu().numpy()[done], ref_obs[done], float_atol, where + " final_obs")
            assert_close(info["final_global_state"].cpu().numpy()[done], global_state_ref(p, ref)[done], float_atol,
                         where + " final_global_state")
            fresh = reset_ref(p, env.num_envs, env.seed, before["episode"], env.env_id_offset)
            fresh_obs = observe_ref(p, fresh)
            for k in STATE_KEYS:
                ref[k] = np.where(_bcast(done, ref[k]), fresh[k], ref[k])
            ref_obs = np.where(done[:, None, None], fresh_obs, ref_obs)
        assert_state_equal(after, ref, float_atol, where)
        assert_close(got_obs, ref_obs, float_atol, where + " obs")
        assert_close(env.global_state.cpu().numpy(), global_state_ref(p, ref), float_atol, where + " global_state")
    return ends


def _bcast(mask, like):
    return mask.reshape(mask.shape + (1,) * (like.ndim - 1))


def assert_close(got, want, atol, what):
    if atol == 0.0:
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got, want, rtol=0, atol=atol, err_msg=what)


def assert_state_equal(got, want, atol, where):
    for k in STATE_KEYS:
        if k == "episode" and k not in want:
            continue
        if got[k].dtype.kind == "f":
            assert_close(got[k], want[k], atol, f"{where} state.{k}")
        else:
            np.testing.assert_array_equal(got[k], want[k], err_msg=f"{where} state.{k}")


def make_small(device="cpu", **overrides):
    params = dict(num_taggers=3, num_runners=13, grid_length=5.0, episode_length=40,
                  tagging_distance=0.08, max_acceleration=0.5, min_acceleration=-0.5)
    params.update(overrides)
    return gpurl.make("tag_continuous", num_envs=params.pop("num_envs", 7), device=device,
                      seed=params.pop("seed", 3), **params)
