"""Shared driver for simple_tag parity tests: step an env beside the float64 NumPy reference.

The reference restarts every step from the env's own state before that step (teacher forcing), so the
float32-vs-float64 rounding of one step is all that is compared: contacts are stiff (a position error
of δ becomes a velocity error of up to 10 δ per step), so free-running trajectories would drift apart
without any bug. Reset draws are float32 in both and compared exactly.
"""
from __future__ import annotations

import numpy as np
import torch

import gpurl

from simple_tag_reference import forces_ref, global_state_ref, observe_ref, reset_ref, step_ref

STATE_KEYS = ("pos", "vel", "landmark_pos", "timestep", "episode")
FLOAT_KEYS = ("pos", "vel", "landmark_pos")
# float32 kernels vs the float64 reference from the same float32 state, one step: positions and obs
# differ by a few float32 ulps (|x| < ~3), velocities by the contact force's rounding; rewards carry
# exp() of the boundary penalty (up to 10) and the sums of +-10.
STATE_ATOL = 1e-5
REWARD_ATOL = 1e-4


def make_env(device="cpu", **overrides):
    """7 envs of 3 adversaries, 2 good agents, 3 obstacles, 9-step episodes (irregular sizes)."""
    params = dict(num_adversaries=3, num_good=2, num_obstacles=3, max_cycles=9)
    params.update(overrides)
    return gpurl.make("simple_tag", num_envs=params.pop("num_envs", 7), device=device,
                      seed=params.pop("seed", 3), **params)


def snapshot(env) -> dict[str, np.ndarray]:
    return {k: getattr(env.state, k).detach().cpu().numpy().copy() for k in STATE_KEYS}


def random_actions(env, gen: torch.Generator) -> torch.Tensor:
    """Discrete: int64 [E, N] in 0..4. Box: float32 [E, N, 5] in [-0.25, 1.25) (some get clipped)."""
    E, N = env.num_envs, env.num_agents
    if env.params.continuous_actions:
        return torch.rand((E, N, 5), generator=gen) * 1.5 - 0.25
    return torch.randint(0, 5, (E, N), generator=gen)


def crowd(env, gen: torch.Generator, envs) -> None:
    """Squeeze every agent and obstacle of ``envs`` into a small box, moving: many deep contacts and catches."""
    for e in envs:
        N, L = env.num_agents, env.params.num_obstacles
        env.state.pos[e] = torch.rand((N, 2), generator=gen) * 0.3 - 0.15
        env.state.vel[e] = torch.rand((N, 2), generator=gen) * 1.6 - 0.8
        env.state.landmark_pos[e] = torch.rand((L, 2), generator=gen) * 0.8 - 0.4


def contacts(env, state: dict[str, np.ndarray]) -> int:
    """Agents of ``state`` that feel a contact force above 1e-3 (the runs must exercise contacts)."""
    pos = state["pos"].astype(np.float64)
    lm = state["landmark_pos"].astype(np.float64)
    contact = forces_ref(env.params, pos, lm, np.zeros_like(pos))
    return int((np.abs(contact) > 1e-3).any(-1).sum())


def concatenated_obs(env, obs: torch.Tensor) -> np.ndarray:
    """The default global state of ``obs`` [E, N, D]: each agent's own obs_dim features, in agent order."""
    rows = [obs[:, g.agents, :g.obs_dim].reshape(obs.shape[0], -1) for g in env.groups.values()]
    return torch.cat(rows, dim=1).cpu().numpy()


def assert_global_state(env, got: torch.Tensor, obs: torch.Tensor, want: np.ndarray, where: str) -> None:
    """``got`` (a global state) is ``obs`` concatenated bit for bit, and near the reference's ``want``."""
    np.testing.assert_array_equal(got.cpu().numpy(), concatenated_obs(env, obs), err_msg=where + " (the obs)")
    np.testing.assert_allclose(got.cpu().numpy(), want, rtol=0, atol=STATE_ATOL, err_msg=where)


def run_against_reference(env, steps: int, seed: int = 0, crowd_every: int = 0):
    """Step ``env`` ``steps`` times with random actions; assert each step equals the reference's (the global
    state and final global state included).

    crowd_every k > 0: before every k-th step, squeeze a third of the envs (state injection).
    Returns counts {terminated, truncated, contacts, catches} so tests can assert what they exercised.
    """
    p, E = env.params, env.num_envs
    gen = torch.Generator().manual_seed(seed)
    obs = env.reset().cpu().numpy()
    start = reset_ref(p, E, env.seed, np.zeros(E, np.int32), env.env_id_offset)
    assert_state(snapshot(env), start, 0.0, "reset")
    np.testing.assert_allclose(obs, observe_ref(p, start), rtol=0, atol=1e-6, err_msg="reset obs")
    assert_global_state(env, env.global_state, env.obs, global_state_ref(p, start), "reset global_state")
    counts = dict(terminated=0, truncated=0, contacts=0, catches=0)
    for t in range(steps):
        if crowd_every and t % crowd_every == crowd_every - 1:
            crowd(env, gen, range(t % 3, E, 3))
        before = snapshot(env)
        actions = random_actions(env, gen)
        obs, reward, term, trunc, info = env.step(actions.to(env.device))
        ref = {k: v.copy() for k, v in before.items()}
        ref_obs, ref_rew, ref_term, ref_trunc, ref_collisions = step_ref(p, ref, actions.numpy())
        where = f"step {t}"
        np.testing.assert_allclose(reward.cpu().numpy(), ref_rew, rtol=0, atol=REWARD_ATOL, err_msg=where + " reward")
        np.testing.assert_array_equal(term.cpu().numpy(), ref_term, err_msg=where + " terminated")
        np.testing.assert_array_equal(trunc.cpu().numpy(), ref_trunc, err_msg=where + " truncated")
        np.testing.assert_array_equal(env.step_metrics()["collisions"].cpu().numpy(), ref_collisions,
                                      err_msg=where + " collisions")
        done = ref_term | ref_trunc
        counts["terminated"] += int(ref_term.sum())
        counts["truncated"] += int(ref_trunc.sum())
        counts["contacts"] += contacts(env, before)
        counts["catches"] += int(ref_collisions.sum())
        want_obs = ref_obs
        if env.autoreset and done.any():
            np.testing.assert_allclose(info["final_obs"].cpu().numpy()[done], ref_obs[done], rtol=0,
                                       atol=STATE_ATOL, err_msg=where + " final_obs")
            assert_global_state(env, info["final_global_state"][done], info["final_obs"][done],
                                global_state_ref(p, ref)[done], where + " final_global_state")
            # The new episode's ordinal is the number of episodes started before it.
            fresh = reset_ref(p, E, env.seed, before["episode"], env.env_id_offset)
            for k in STATE_KEYS:
                ref[k] = np.where(done.reshape((E,) + (1,) * (ref[k].ndim - 1)), fresh[k], ref[k])
            want_obs = np.where(done[:, None, None], observe_ref(p, fresh), ref_obs)
        after = snapshot(env)
        assert_state(after, ref, STATE_ATOL, where)
        for k in FLOAT_KEYS:  # the fresh episodes' draws are float32 in both: exact
            np.testing.assert_array_equal(after[k][done], ref[k][done].astype(np.float32), err_msg=f"{where} {k}")
        np.testing.assert_allclose(obs.cpu().numpy(), want_obs, rtol=0, atol=STATE_ATOL, err_msg=where + " obs")
        assert_global_state(env, env.global_state, obs, global_state_ref(p, ref), where + " global_state")
    return counts


def assert_state(got: dict, want: dict, atol: float, where: str) -> None:
    for k in STATE_KEYS:
        if k not in want:
            continue
        if k in FLOAT_KEYS:
            np.testing.assert_allclose(got[k], want[k], rtol=0, atol=atol, err_msg=f"{where} state.{k}")
        else:
            np.testing.assert_array_equal(got[k], want[k], err_msg=f"{where} state.{k}")


__all__ = ["REWARD_ATOL", "STATE_ATOL", "STATE_KEYS", "contacts", "crowd", "make_env",
           "random_actions", "run_against_reference", "snapshot"]
