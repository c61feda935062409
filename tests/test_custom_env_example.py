"""examples/custom_env.py (cooperative foraging): CPU kernels vs its NumPy reference bit for bit, hand
cases from its docstrings, the env API, and training it with gpurl's PPO through the example's script.

Every env here steps int64 actions, so the process compiles one step build of the example (~15 s on 2
vCPUs); the training test adds the trainer's own (torch) work, a few seconds.
"""
import json

import gymnasium
import numpy as np
import pytest
import torch

import gpurl
from gpurl.kernels.rng import random_below_ref

from custom_env_harness import (REPO, custom_env, make_small, observe_ref, reset_ref, run_against_reference,
                                snapshot)

pytestmark = pytest.mark.cpu

f32 = np.float32
STAY, RIGHT, LEFT, UP, DOWN = 0, 1, 2, 3, 4  # x+1, x-1, y+1, y-1


# ---- reference vs CPU kernels ----------------------------------------------------------------------


def test_cpu_kernels_equal_reference_7_envs_x_13_agents_across_autoresets():
    env = make_small()
    terminated, truncated = run_against_reference(env, steps=40)
    assert terminated >= env.num_envs and truncated >= env.num_envs  # crossed both kinds of episode end


def test_small_world_build_equals_reference(monkeypatch):
    # A large batch of a small world gets the build with the agent count compiled in (phases inlined into one
    # env-major loop, agent loops unrolled); forced here on 7 envs of 13 agents, it computes the same bits.
    from gpurl.envs import base
    from gpurl.kernels.program import FIXED_AGENTS

    monkeypatch.setattr(base, "FIXED_AGENTS_MIN_ENVS", 1)
    env = make_small()
    assert dict(env._build_constants) == {FIXED_AGENTS: 13}
    terminated, truncated = run_against_reference(env, steps=30)
    assert terminated >= 1 and truncated >= 1


def test_lone_agent_tiny_torus_env_id_offset_and_reward_scale():
    # one agent, no teammate (zeros in the obs), a 2 x 2 torus, no termination, reward 0.3 per item
    env = make_small(num_envs=3, num_agents=1, num_food=1, grid_size=2, food_target=0, food_reward=0.3,
                     env_id_offset=11, seed=5)
    terminated, truncated = run_against_reference(env, steps=20, seed=1)
    assert terminated == 0 and truncated >= 3
    assert (env.obs[:, :, 2:] == 0).all()


def test_odd_torus_and_more_food_than_agents():
    env = make_small(num_envs=4, num_agents=2, num_food=6, grid_size=5, episode_length=4, food_target=5)
    terminated, truncated = run_against_reference(env, steps=16, seed=2)
    assert terminated + truncated >= 8


# ---- by hand -----------------------------------------------------------------------------------------


def _inject(env, xs, ys, food_xs, food_ys, timestep=0, eaten=0):
    s = env.state
    for field, values in (("x", xs), ("y", ys), ("food_x", food_xs), ("food_y", food_ys)):
        getattr(s, field).copy_(torch.tensor(values, dtype=torch.int32).expand(env.num_envs, -1))
    s.timestep.fill_(timestep)
    s.eaten.fill_(eaten)


def _act(env, per_agent):
    return torch.tensor(per_agent, dtype=torch.int64).expand(env.num_envs, -1).contiguous()


def test_eating_wraps_respawns_and_shares_the_reward():
    # L = 4. Agent 0 wraps from x = 3 to x = 0 onto food 0; agents 1 and 2 both step onto food 1 (one
    # item, eaten once); food 2 stays. Every agent gets 2 x 0.5.
    env = make_small(num_envs=2, num_agents=3, num_food=3, grid_size=4, food_reward=0.5, autoreset=False)
    env.reset()
    _inject(env, xs=[3, 1, 2], ys=[0, 1, 2], food_xs=[0, 1, 3], food_ys=[0, 2, 3], timestep=2)
    episode = env.state.episode.clone()
    obs, reward, terminated, truncated, _ = env.step(_act(env, [RIGHT, UP, LEFT]))
    np.testing.assert_array_equal(env.state.x[0].numpy(), [0, 1, 1])
    np.testing.assert_array_equal(env.state.y[0].numpy(), [0, 2, 2])
    np.testing.assert_array_equal(reward.numpy(), np.full((2, 3), f32(1.0)))
    np.testing.assert_array_equal(env.state.eaten.numpy(), [2, 2])
    assert env.step_metrics()["food"].tolist() == [2.0, 2.0]
    assert (env.state.food_x[:, 2] == 3).all() and (env.state.food_y[:, 2] == 3).all()  # not eaten: stays
    # eaten items respawn at the draw keyed by (seed, env, food, episode, 2 + 2t / 3 + 2t), t = 3
    for e in range(2):
        for f in (0, 1):
            want = [int(random_below_ref(env.seed, e, f, int(episode[e]), 2 + 2 * 3 + k, 4)) for k in (0, 1)]
            assert [int(env.state.food_x[e, f]), int(env.state.food_y[e, f])] == want
    assert not terminated.any() and not truncated.any()
    # agent 1's view of food 2 at (3, 3) from (1, 2): offsets (2 -> -2, 1) / 4; nearest teammate agent 2
    # on its own cell: (0, 0)
    np.testing.assert_array_equal(obs[0, 1, 4:8].numpy(), f32([-0.5, 0.25, 0.0, 0.0]))


def test_food_target_terminates_and_episode_length_truncates():
    env = make_small(num_envs=2, num_agents=1, num_food=1, grid_size=6, episode_length=5, food_target=3,
                     autoreset=False)
    env.reset()
    _inject(env, xs=[0], ys=[0], food_xs=[1], food_ys=[0], timestep=4, eaten=2)
    env.state.food_x[1, 0] = 4  # env 1 misses the food on its last step: truncated
    _, reward, terminated, truncated, _ = env.step(_act(env, [RIGHT]))
    assert terminated.tolist() == [True, False] and truncated.tolist() == [False, True]
    np.testing.assert_array_equal(reward.numpy(), f32([[1.0], [0.0]]))
    frozen = snapshot(env)
    _, reward, terminated, truncated, _ = env.step(_act(env, [RIGHT]))  # autoreset=False: frozen
    assert terminated.tolist() == [True, False] and truncated.tolist() == [False, True]
    assert (reward == 0).all() and env.step_metrics()["food"].tolist() == [0.0, 0.0]
    for k, v in snapshot(env).items():
        np.testing.assert_array_equal(v, frozen[k], err_msg=k)
    env.reset(mask=torch.tensor([False, True]))
    assert env.state.timestep.tolist() == [5, 0] and env.state.episode.tolist() == [1, 2]


def test_reset_with_a_seed_reproduces_a_fresh_env():
    env = make_small(num_envs=3)
    env.reset()
    env.step(torch.zeros(3, env.num_agents, dtype=torch.int64))
    obs = env.reset(seed=9).clone()
    fresh = make_small(num_envs=3, seed=9)
    np.testing.assert_array_equal(obs.numpy(), fresh.reset().numpy())
    want = reset_ref(env.params, 3, 9, np.zeros(3, np.int32))
    np.testing.assert_array_equal(obs.numpy(), observe_ref(env.params, want))


# ---- API and errors -----------------------------------------------------------------------------------


def test_registered_groups_spaces_and_shapes():
    assert "foraging" in gpurl.registered()
    env = gpurl.make("foraging", num_envs=4, device="cpu", num_agents=5, num_food=2)
    assert isinstance(env, custom_env.Foraging)
    assert (env.num_envs, env.num_agents, env.obs_dim) == (4, 5, 6)
    assert list(env.groups) == ["forager"] and env.groups["forager"].agents == slice(0, 5)
    assert env.action_space["forager"] == gymnasium.spaces.Discrete(5)
    obs = env.reset()
    assert obs.shape == (4, 5, 6) and obs.dtype == torch.float32
    _, reward, terminated, truncated, info = env.step(torch.zeros(4, 5, dtype=torch.int64))  # [E, N] accepted
    assert reward.shape == (4, 5) and terminated.dtype == torch.bool and info["final_obs"].shape == (4, 5, 6)
    assert set(env.step_metrics()) == {"food"}


def test_bad_params_and_actions_are_named():
    with pytest.raises(TypeError, match=r"unknown parameter 'grid'.*grid_size"):
        gpurl.make("foraging", num_envs=2, device="cpu", grid=4)
    with pytest.raises(ValueError, match=r"foraging: grid_size=1 is out of range; allowed: in \[2, 32768\]"):
        gpurl.make("foraging", num_envs=2, device="cpu", grid_size=1)
    with pytest.raises(ValueError, match="foraging: food_reward=nan is not finite"):
        gpurl.make("foraging", num_envs=2, device="cpu", food_reward=float("nan"))
    env = gpurl.make("foraging", num_envs=2, device="cpu")
    with pytest.raises(RuntimeError, match="reset"):
        env.step(torch.zeros(2, 3, dtype=torch.int64))
    env.reset()
    with pytest.raises(ValueError, match=r"actions\[1, 2, 0\] = 5 is out of range"):
        env.step(torch.tensor([[0, 0, 0], [0, 0, 5]]))
    with pytest.raises(TypeError, match="dtype"):
        env.step(torch.zeros(2, 3))


# ---- training through the example's script ---------------------------------------------------------------


def test_example_script_trains_with_gpurl_ppo(tmp_path, capsys):
    result = custom_env.main(["--iters", "2", "--num-envs", "8", "--rollout-len", "16", "--eval-episodes", "8",
                              "--device", "cpu", "--log-dir", str(tmp_path), "--no-progress", "--torch-threads", "1"])
    assert result["env"] == "foraging" and result["iterations"] == 2
    assert result["return_forager_random"] > 0 and result["food_per_episode_final"] is not None
    assert json.loads((tmp_path / "result.json").read_text())["env"] == "foraging"
    assert "return_forager: random" in capsys.readouterr().out
    assert (REPO / "examples" / "custom_env.py").is_file()
