"""Shared driver for the tests of examples/custom_env.py (cooperative foraging): importing the example
from a fresh clone, and running an env and its NumPy reference side by side."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # examples/ is not installed with gpurl: import it from the checkout
    sys.path.insert(0, str(REPO))

import gpurl  # noqa: E402
from gpurl.envs.lifecycle import default_global_state_ref  # noqa: E402
import examples.custom_env as custom_env  # noqa: E402  (registers "foraging")
from examples.custom_env_reference import observe_ref, reset_ref, step_ref  # noqa: E402

STATE_KEYS = (*custom_env.Foraging.state, "episode")
# 7 envs x 13 agents, 5 food items on a 6 x 6 torus: food is eaten every step; 9-step episodes, and
# an episode terminates at 12 items, so a few dozen steps cross both kinds of episode end.
SMALL = dict(num_envs=7, seed=3, num_agents=13, num_food=5, grid_size=6, episode_length=9, food_target=12)


def make_small(device="cpu", **overrides):
    params = {**SMALL, **overrides}
    return gpurl.make("foraging", num_envs=params.pop("num_envs"), device=device, seed=params.pop("seed"), **params)


def snapshot(env) -> dict[str, np.ndarray]:
    return {k: getattr(env.state, k).detach().cpu().numpy().copy() for k in STATE_KEYS}


def random_actions(env, gen: torch.Generator, dtype=torch.int64) -> torch.Tensor:
    """int [E, N, 1] uniform over Discrete(5), drawn on the host."""
    return torch.randint(0, 5, (env.num_envs, env.num_agents, 1), generator=gen, dtype=dtype)


def assert_state_equal(got, want, where):
    for k in STATE_KEYS:
        np.testing.assert_array_equal(got[k], want[k], err_msg=f"{where}: state.{k}")


def run_against_reference(env, steps: int, seed: int = 0, dtype=torch.int64) -> np.ndarray:
    """Step ``env`` ``steps`` times with random actions; assert that every step equals the reference
    bit for bit (state, obs, reward, flags, final_obs, the food metric, autoreset draws, and the toolkit's
    default global state: the observations concatenated).

    Returns how many env-episodes ended, as [terminated, truncated].
    """
    p = env.params
    gen = torch.Generator().manual_seed(seed)
    obs = env.reset().cpu().numpy()
    start = reset_ref(p, env.num_envs, env.seed, np.zeros(env.num_envs, np.int32), env.env_id_offset)
    assert_state_equal(snapshot(env), start, "reset")
    np.testing.assert_array_equal(obs, observe_ref(p, start), err_msg="reset obs")
    np.testing.assert_array_equal(env.global_state.cpu().numpy(), default_global_state_ref(obs, env.groups),
                                  err_msg="reset global_state")
    ends = np.zeros(2, dtype=np.int64)
    for t in range(steps):
        before = snapshot(env)
        actions = random_actions(env, gen, dtype)
        obs, reward, term, trunc, info = env.step(actions.to(env.device))
        ref = {k: v.copy() for k, v in before.items()}
        ref_obs, ref_rew, ref_term, ref_trunc, ref_food = step_ref(p, ref, actions.numpy(), env.seed,
                                                                   env.env_id_offset)
        where = f"step {t}"
        np.testing.assert_array_equal(reward.cpu().numpy(), ref_rew, err_msg=where + " reward")
        np.testing.assert_array_equal(term.cpu().numpy(), ref_term, err_msg=where + " terminated")
        np.testing.assert_array_equal(trunc.cpu().numpy(), ref_trunc, err_msg=where + " truncated")
        np.testing.assert_array_equal(env.step_metrics()["food"].cpu().numpy(), ref_food, err_msg=where + " food")
        done = ref_term | ref_trunc
        ends += [ref_term.sum(), ref_trunc.sum()]
        if env.autoreset and done.any():
            np.testing.assert_array_equal(info["final_obs"].cpu().numpy()[done], ref_obs[done],
                                          err_msg=where + " final_obs")
            np.testing.assert_array_equal(info["final_global_state"].cpu().numpy()[done],
                                          default_global_state_ref(ref_obs, env.groups)[done],
                                          err_msg=where + " final_global_state")
            fresh = reset_ref(p, env.num_envs, env.seed, before["episode"], env.env_id_offset)
            for k in STATE_KEYS:
                ref[k] = np.where(done.reshape((-1,) + (1,) * (ref[k].ndim - 1)), fresh[k], ref[k])
            ref_obs = np.where(done[:, None, None], observe_ref(p, fresh), ref_obs)
        assert_state_equal(snapshot(env), ref, where)
        np.testing.assert_array_equal(obs.cpu().numpy(), ref_obs, err_msg=where + " obs")
        np.testing.assert_array_equal(env.global_state.cpu().numpy(), default_global_state_ref(ref_obs, env.groups),
                                      err_msg=where + " global_state")
    return ends
