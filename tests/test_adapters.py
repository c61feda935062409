"""Gymnasium / PettingZoo adapters (gpurl.envs.adapters): their own conformance checks, equality with the
gpurl env stepped directly, Gymnasium's SAME_STEP reporting (against SyncVectorEnv), mpe2 names and
dynamics for simple_tag, seeding, and errors."""
from __future__ import annotations

import warnings
from collections import OrderedDict

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

pytest.importorskip("pettingzoo")
from pettingzoo.test import parallel_api_test, parallel_seed_test  # noqa: E402
from pettingzoo.test.state_test import test_parallel_env as pettingzoo_state_test  # noqa: E402

import gpurl  # noqa: E402
from gpurl.envs import Group, KernelEnv  # noqa: E402
from gpurl.envs.adapters import GymVectorEnv, ParallelEnv, gym_vector_env, parallel_env  # noqa: E402
from gpurl.envs.adapters._common import random_actions  # noqa: E402

pytestmark = pytest.mark.cpu
torch.set_num_threads(1)

# Small configs, few of them: each env's CPU kernels compile once per process (tens of seconds).
CONFIGS = {
    "simple_tag": ("simple_tag", dict(max_cycles=5)),
    "simple_tag_box": ("simple_tag", dict(max_cycles=5, continuous_actions=True)),
    "tag_continuous": ("tag_continuous", dict(num_taggers=2, num_runners=3, episode_length=6,
                                              use_full_observation=False, num_other_agents_observed=2)),
    "tag_gridworld": ("tag_gridworld", dict(num_taggers=2, grid_length=3, episode_length=6)),
}
#: (config, the group the vector env exposes): Discrete with a cut obs row, Box, MultiDiscrete, Discrete.
VECTOR_CASES = [("simple_tag", "good"), ("simple_tag_box", "adversary"), ("tag_continuous", "runner"),
                ("tag_gridworld", "tagger")]


def make(config: str, **kwargs):
    name, params = CONFIGS[config]
    return gpurl.make(name, device="cpu", **{**params, **kwargs})


def make_parallel(config: str, **kwargs) -> ParallelEnv:
    name, params = CONFIGS[config]
    return parallel_env(name, **{**params, **kwargs})


def obs_policy(space: gymnasium.Space, obs: torch.Tensor) -> torch.Tensor:
    """A deterministic policy of the observations [E, n, d] -> actions [E, n, dims] (in range)."""
    key = obs.abs().sum(-1) * 1000
    if isinstance(space, gymnasium.spaces.Discrete):
        return (key.long() % space.n).unsqueeze(-1)
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        return torch.stack([(key.long() + 7 * d) % int(n) for d, n in enumerate(space.nvec)], -1)
    return torch.sigmoid(obs[..., :space.shape[0]] * 3)


# ---- PettingZoo --------------------------------------------------------------------------------------


@pytest.mark.parametrize("config", list(CONFIGS))
def test_parallel_env_passes_pettingzoo_api_and_seed_tests(config):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the API test reports missing/extra keys as warnings
        parallel_api_test(make_parallel(config, seed=1), num_cycles=100)
    parallel_seed_test(lambda: make_parallel(config), num_cycles=20)
    par = make_parallel(config)
    pettingzoo_state_test(par)  # state() inside state_space
    assert par.state_space.shape == (par.env.global_state_dim,) and par.state().dtype == np.float32


@pytest.mark.parametrize("config", list(CONFIGS))
def test_parallel_env_is_env_index_of_a_batch(config):
    """Env 2 of a direct gpurl batch with the same seed, under the same actions, over two episodes."""
    E, k, seed = 4, 2, 11
    direct = make(config, num_envs=E, seed=seed, autoreset=False)
    par = make_parallel(config, env_index=k, seed=seed)
    obs, _ = par.reset()
    direct_obs = direct.reset().clone()
    for episode in range(2):
        steps = 0
        while True:
            assert set(obs) == set(par.agents) == set(par.possible_agents)
            np.testing.assert_array_equal(par.state(), direct.global_state[k].numpy())  # PettingZoo's state()
            for row, agent in enumerate(par.possible_agents):
                dim = par.observation_space(agent).shape[0]
                assert obs[agent].dtype == np.float32 and obs[agent].shape == (dim,)
                np.testing.assert_array_equal(obs[agent], direct_obs[k, row, :dim].numpy())
            actions = {a: par.action_space(a).sample() for a in par.agents}
            rows = []  # [E, N, action_dims]: env k takes the adapter's actions, the others random ones
            for e in range(E):
                acts = actions if e == k else {a: par.action_space(a).sample() for a in par.possible_agents}
                rows.append([np.asarray(acts[a]).reshape(-1) for a in par.possible_agents])
            obs, rew, term, trunc, info = par.step(actions)
            stepped = direct.step(torch.as_tensor(np.array(rows)))
            direct_obs, direct_rew, dterm, dtrunc = (x.clone() for x in stepped[:4])
            steps += 1
            assert steps <= 6, f"episode {episode} still running after {steps} steps"
            assert all(isinstance(r, float) for r in rew.values())
            np.testing.assert_array_equal([rew[a] for a in par.possible_agents], direct_rew[k].numpy())
            assert set(term.values()) == {bool(dterm[k])} and set(trunc.values()) == {bool(dtrunc[k])}
            assert info == {a: {} for a in par.possible_agents}
            if not par.agents:
                assert bool(dterm[k] | dtrunc[k]) and set(obs) == set(par.possible_agents)
                np.testing.assert_array_equal(par.state(), direct.global_state[k].numpy())  # the last step's
                break
        obs, _ = par.reset()
        direct_obs = direct.reset().clone()
    # A new seed re-keys both alike.
    obs, _ = par.reset(seed=5)
    direct_obs = direct.reset(seed=5)
    for row, agent in enumerate(par.possible_agents):
        np.testing.assert_array_equal(obs[agent], direct_obs[k, row, :len(obs[agent])].numpy())


@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "box"])
def test_simple_tag_parallel_env_matches_mpe2(continuous):
    """Names, spaces and (from the same start) a few steps of dynamics against mpe2's parallel_env itself."""
    simple_tag_v3 = pytest.importorskip("mpe2.simple_tag_v3")
    from pettingzoo.utils.env_logger import EnvLogger

    config = "simple_tag_box" if continuous else "simple_tag"
    ours = make_parallel(config, seed=4)
    theirs = simple_tag_v3.parallel_env(max_cycles=5, continuous_actions=continuous)
    assert ours.possible_agents == theirs.possible_agents
    for agent in ours.possible_agents:
        assert ours.observation_space(agent) == theirs.observation_space(agent)
        assert ours.action_space(agent) == theirs.action_space(agent)
    obs, _ = ours.reset()
    theirs.reset(seed=0)
    world, state = theirs.unwrapped.world, ours.env.state
    for i, agent in enumerate(world.agents):  # mpe2 starts where gpurl drew
        agent.state.p_pos = state.pos[0, i].numpy().astype(np.float64)
        agent.state.p_vel = state.vel[0, i].numpy().astype(np.float64)
    for j, landmark in enumerate(world.landmarks):
        landmark.state.p_pos = state.landmark_pos[0, j].numpy().astype(np.float64)
    for agent in ours.possible_agents:
        np.testing.assert_allclose(obs[agent], theirs.unwrapped.observe(agent), atol=1e-6)
    EnvLogger.suppress_output()  # mpe2 warns on every clipped Box action
    try:
        for _ in range(4):
            actions = {a: ours.action_space(a).sample() for a in ours.agents}
            obs, rew, _, _, _ = ours.step(actions)
            obs_m, rew_m, _, _, _ = theirs.step(actions)
            for agent in ours.possible_agents:
                np.testing.assert_allclose(obs[agent], obs_m[agent], atol=1e-4, err_msg=agent)
                np.testing.assert_allclose(rew[agent], rew_m[agent], atol=1e-4, err_msg=agent)
    finally:
        EnvLogger.unsuppress_output()


def test_parallel_env_names_and_prefixes():
    par = make_parallel("tag_continuous")
    assert par.possible_agents == ["tagger_0", "tagger_1", "runner_0", "runner_1", "runner_2"]
    assert par.observation_space("runner_2").shape == (15,)
    assert par.action_space("tagger_0") == gymnasium.spaces.MultiDiscrete([11, 11])
    assert par.action_space("tagger_0") is not par.action_space("tagger_1")  # seeded one by one
    renamed = ParallelEnv(make("simple_tag", num_envs=1, autoreset=False), agent_prefixes={"good": "prey"})
    assert renamed.possible_agents == ["adversary_0", "adversary_1", "adversary_2", "prey_0"]
    assert renamed.observation_space("prey_0").shape == (14,)


def test_parallel_env_takes_every_form_of_a_discrete_action_alike():
    """Plain ints (the adapter's fast path), numpy integers, 0-d arrays, bools and tensors step alike."""
    forms = [int, np.int64, np.array, lambda k: torch.tensor(k), lambda k: bool(k) if k < 2 else k]
    runs = []
    for form in forms:
        par = make_parallel("simple_tag")
        par.reset(seed=3)
        obs = []
        for t in range(5):  # the whole episode (max_cycles=5)
            step = par.step({a: form((t + k) % 5) for k, a in enumerate(par.agents)})
            obs.append(np.concatenate([step[0][a] for a in par.possible_agents]))
        runs.append(np.stack(obs))
    assert all(np.array_equal(run, runs[0]) for run in runs[1:])


def test_parallel_env_errors():
    par = make_parallel("simple_tag")
    with pytest.raises(RuntimeError, match="reset"):
        par.step({})
    with pytest.raises(RuntimeError, match=r"reset\(\) before state\(\)"):
        par.state()
    par.reset(seed=0)
    good = {a: 0 for a in par.agents}
    with pytest.raises(ValueError, match=r"missing \['agent_0'\]"):
        par.step({a: 0 for a in par.agents[:-1]})
    with pytest.raises(ValueError, match="unknown.*'agent_9'"):
        par.step({**good, "agent_9": 0})
    with pytest.raises(ValueError, match="action 5 of agent 'adversary_1' is out of range"):
        par.step({**good, "adversary_1": 5})
    with pytest.raises(ValueError, match="action -1 of agent 'adversary_1' is out of range"):
        par.step({**good, "adversary_1": -1})  # a plain int takes the fast path only when in range
    with pytest.raises(ValueError, match="action 5 of agent 'agent_0' is out of range"):
        par.step({**good, "agent_0": np.int64(5)})
    with pytest.raises(ValueError, match="must be integers"):
        par.step({**good, "agent_0": 1.0})
    with pytest.raises(ValueError, match="dict"):
        par.step([0, 0, 0, 0])
    with pytest.raises(ValueError, match="unknown agent 'nobody'"):
        par.action_space("nobody")
    before = par.env.state.pos.clone()
    with pytest.raises(ValueError, match=r"shape \(1,\).*got \(1, 5\)"):
        par.step({**good, "agent_0": np.zeros(5, np.int64)})
    assert torch.equal(par.env.state.pos, before)  # rejected before anything changed
    box = make_parallel("simple_tag_box")
    box.reset()
    with pytest.raises(ValueError, match=r"shape \(1, 5\)"):
        box.step({a: np.zeros(4, np.float32) for a in box.agents})
    stateless = make_parallel("simple_tag", global_state=False)
    stateless.reset(seed=0)
    with pytest.raises(RuntimeError, match="made with global_state=False"):
        stateless.state()
    with pytest.raises(ValueError, match="num_envs=1"):
        ParallelEnv(make("simple_tag", num_envs=2, autoreset=False))
    with pytest.raises(ValueError, match="autoreset=False"):
        ParallelEnv(make("simple_tag", num_envs=1))
    with pytest.raises(ValueError, match="unknown group 'runner'"):
        ParallelEnv(make("simple_tag", num_envs=1, autoreset=False), agent_prefixes={"runner": "r"})
    with pytest.raises(ValueError, match="own prefix"):
        ParallelEnv(make("simple_tag", num_envs=1, autoreset=False), agent_prefixes={"good": "adversary"})


# ---- Gymnasium vector env ----------------------------------------------------------------------------


@pytest.mark.parametrize("config, group", VECTOR_CASES)
def test_vector_env_spaces_shapes_dtypes(config, group):
    env = make(config, num_envs=3)
    venv = GymVectorEnv(env, group=group)
    spec = env.groups[group]
    n = 3 * (spec.agents.stop - spec.agents.start)
    assert venv.num_envs == n and venv.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert venv.single_observation_space == gymnasium.spaces.Box(-np.inf, np.inf, (spec.obs_dim,), np.float32)
    assert venv.single_action_space == spec.action_space
    assert venv.observation_space == batch_space(venv.single_observation_space, n)
    assert venv.action_space == batch_space(venv.single_action_space, n)
    obs, info = venv.reset(seed=3)
    assert info == {} and obs.dtype == np.float32 and venv.observation_space.contains(obs)
    venv.action_space.seed(0)
    for _ in range(7):  # past one episode end
        obs, rew, term, trunc, info = venv.step(venv.action_space.sample())
        assert venv.observation_space.contains(obs)
        assert rew.shape == term.shape == trunc.shape == (n,)
        assert rew.dtype == np.float64 and term.dtype == trunc.dtype == np.bool_
        for j in np.flatnonzero(info.get("_final_obs", [])):
            assert venv.single_observation_space.contains(info["final_obs"][j])
    venv.close()
    assert venv.closed


@pytest.mark.parametrize("config, group", VECTOR_CASES)
def test_vector_env_equals_direct_env(config, group):
    """Adapter vs the env stepped directly (autoreset=False, ended envs reset by mask): obs, rewards, flags,
    final obs; other groups act by a policy of their observations; episodes end at staggered steps."""
    E = 3
    env = make(config, num_envs=E, seed=8)
    venv = GymVectorEnv(env, group=group,
                        other_actions=lambda name, obs: obs_policy(env.groups[name].action_space, obs))
    direct = make(config, num_envs=E, seed=8, autoreset=False)
    spec = direct.groups[group]
    G, dim = spec.agents.stop - spec.agents.start, spec.obs_dim
    obs = venv.reset()[0]
    want = direct.reset().clone()
    for env in (venv.env, direct):  # stagger the episode ends through the documented state injection
        env.state.timestep.copy_(torch.tensor([0, 1, 3], dtype=torch.int32))
    venv.action_space.seed(1)
    ends = 0
    for _ in range(12):
        np.testing.assert_array_equal(obs, want[:, spec.agents, :dim].reshape(E * G, dim).numpy())
        actions = venv.action_space.sample()
        box = isinstance(spec.action_space, gymnasium.spaces.Box)
        full = torch.zeros(E, direct.num_agents, direct.action_dims, dtype=torch.float32 if box else torch.int64)
        for name, g in direct.groups.items():
            full[:, g.agents] = obs_policy(g.action_space, want[:, g.agents, :g.obs_dim]).to(full.dtype)
        full[:, spec.agents] = torch.as_tensor(actions).view(E, G, -1).to(full.dtype)
        obs, rew, term, trunc, info = venv.step(actions)
        d_obs, d_rew, d_term, d_trunc, _ = direct.step(full)
        np.testing.assert_array_equal(rew, d_rew[:, spec.agents].reshape(-1).numpy())
        np.testing.assert_array_equal(term, np.repeat(d_term.numpy(), G))
        np.testing.assert_array_equal(trunc, np.repeat(d_trunc.numpy(), G))
        ended = (d_term | d_trunc).numpy()
        if ended.any():
            ends += int(ended.sum())
            assert set(info) == {"final_obs", "_final_obs", "final_info", "_final_info"}
            assert info["final_info"] == {}
            np.testing.assert_array_equal(info["_final_obs"], np.repeat(ended, G))
            np.testing.assert_array_equal(info["_final_info"], np.repeat(ended, G))
            final = d_obs[:, spec.agents, :dim].reshape(E * G, dim).numpy()
            for j in range(E * G):
                if ended[j // G]:
                    np.testing.assert_array_equal(info["final_obs"][j], final[j])
                else:
                    assert info["final_obs"][j] is None
            direct.reset(mask=torch.as_tensor(ended))
        else:
            assert info == {}
        want = direct.obs.clone()
    assert ends >= 3


def test_vector_env_same_step_reporting_matches_sync_vector_env():
    """A one-agent KernelEnv through GymVectorEnv reports exactly what SyncVectorEnv(SAME_STEP) reports
    for the same env written as a gymnasium.Env (group=None: the whole env)."""
    E = 3
    ours = GymVectorEnv(Countdown(num_envs=E, device="cpu", seed=0, autoreset=True))
    theirs = gymnasium.vector.SyncVectorEnv([CountdownGym] * E, autoreset_mode=AutoresetMode.SAME_STEP)
    assert ours.group == "solo" and ours.num_envs == E
    assert ours.single_observation_space == theirs.single_observation_space
    assert ours.action_space == theirs.action_space
    assert data_equivalence(ours.reset(seed=0), theirs.reset(seed=0), exact=True)
    rng = np.random.default_rng(0)
    for _ in range(12):
        actions = rng.integers(0, 3, E)
        a, b = ours.step(actions), theirs.step(actions)
        assert data_equivalence(a, b, exact=True), (a, b)


def test_vector_env_seeding_and_other_actions():
    def run(venv, seed, steps=7):
        out = [venv.reset(seed=seed)[0]]
        for t in range(steps):
            out.extend(venv.step(np.full(venv.num_envs, t % 5))[:2])
        return out

    one = gym_vector_env("simple_tag", 2, "good", device="cpu", max_cycles=5)
    two = gym_vector_env("simple_tag", 2, "good", device="cpu", max_cycles=5)
    first = run(one, 9)
    assert data_equivalence(first, run(two, 9), exact=True)  # same seed, same random adversaries
    assert data_equivalence(first, run(one, 9), exact=True)  # reset(seed) repeats the run
    assert not data_equivalence(first, run(one, 10), exact=True)
    noop = gym_vector_env("simple_tag", 2, "good", device="cpu", max_cycles=5, other_actions="noop")
    zeros = gym_vector_env("simple_tag", 2, "good", device="cpu", max_cycles=5,
                           other_actions=lambda name, obs: torch.zeros(obs.shape[:2], dtype=torch.int64))
    assert data_equivalence(run(noop, 9), run(zeros, 9), exact=True)
    assert not data_equivalence(run(noop, 9), first, exact=True)


def test_random_other_actions_cover_their_space():
    gen = torch.Generator().manual_seed(0)
    out = torch.zeros(50, 40, 2, dtype=torch.int64)
    random_actions(gymnasium.spaces.MultiDiscrete([3, 11]), out, gen)
    assert out[..., 0].unique().tolist() == [0, 1, 2] and out[..., 1].unique().tolist() == list(range(11))
    box = torch.zeros(50, 40, 5)
    random_actions(gymnasium.spaces.Box(-1.0, 2.0, (5,), np.float32), box[:, ::2], gen)  # strided target
    assert box[:, ::2].min() >= -1 and box[:, ::2].max() < 2 and box[:, ::2].std() > 0.5
    assert (box[:, 1::2] == 0).all()


def test_vector_env_errors():
    env = make("simple_tag", num_envs=2)
    with pytest.raises(ValueError, match="unknown group 'runner'.*'adversary', 'good'"):
        GymVectorEnv(env, group="runner")
    with pytest.raises(ValueError, match="group=None.*pass group="):
        GymVectorEnv(env)
    with pytest.raises(ValueError, match="autoreset=True"):
        GymVectorEnv(make("simple_tag", num_envs=2, autoreset=False), group="good")
    with pytest.raises(ValueError, match="other_actions"):
        GymVectorEnv(env, group="good", other_actions="greedy")
    venv = GymVectorEnv(env, group="adversary")
    venv.reset(seed=0)
    before = env.state.pos.clone()
    with pytest.raises(ValueError, match=r"shape \(6,\).*got \(5,\)"):
        venv.step(np.zeros(5, np.int64))
    with pytest.raises(ValueError, match="integers"):
        venv.step(np.zeros(6, np.float32))
    with pytest.raises(ValueError, match=r"action 7 of sub-env 4 \(env 1, adversary agent 1\) is out of range"):
        venv.step(np.array([0, 0, 0, 0, 7, 0]))
    bad = GymVectorEnv(env, group="adversary", other_actions=lambda name, obs: torch.zeros(2, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"other_actions\('good', obs\) must return shape"):
        bad.step(np.zeros(6, np.int64))
    floats = GymVectorEnv(env, group="adversary", other_actions=lambda name, obs: torch.zeros(2, 1, 1))
    with pytest.raises(ValueError, match="integer actions"):
        floats.step(np.zeros(6, np.int64))
    assert torch.equal(env.state.pos, before)
    with pytest.raises(ValueError, match="one int"):
        venv.reset(seed=[1, 2])
    with pytest.raises(ValueError, match="no options"):
        venv.reset(options={"reset_mask": np.ones(6, bool)})


# ---- a tiny pure-torch env with one agent (group=None), and the same env as a gymnasium.Env ----------


class Countdown(KernelEnv):
    """One agent "solo": obs [t, last action]; reward = action; action 2 terminates; truncated at t == 4.
    No kernel: its launcher (:class:`CountdownLauncher`) steps it in torch."""

    LENGTH = 4

    def __init__(self, *, num_envs, device, seed, autoreset, validate=True):
        super().__init__(num_envs=num_envs, device=device, seed=seed, autoreset=autoreset, validate=validate)
        self._setup_outputs(1, OrderedDict(solo=Group(slice(0, 1), 2, gymnasium.spaces.Discrete(3))))
        self.t = torch.zeros(num_envs, dtype=torch.int32)
        self._tensors = {"restart": torch.zeros(num_envs, dtype=torch.bool)}  # reset() marks the envs to restart
        self._consts = self._reset_consts = None  # no kernel constants
        self.launcher = CountdownLauncher(self)

    def _rekey(self, mask):
        pass


class CountdownLauncher:
    """What Countdown's reset and step call (gpurl.envs.launch_path's interface)."""

    def __init__(self, env: Countdown):
        self.env = env

    def reset(self, consts):
        self._restart(self.env._tensors["restart"])

    def _restart(self, mask):
        self.env.t[mask] = 0
        self.env.obs[mask] = 0

    def step(self, consts, actions, out):
        env, a = self.env, actions[:, 0, 0]
        env.t += 1
        env.reward[:, 0] = a.float()
        env.terminated.copy_(a == 2)
        env.truncated.copy_((env.t >= env.LENGTH) & ~env.terminated)
        env.obs[:, 0, 0], env.obs[:, 0, 1] = env.t.float(), a.float()
        done = env.terminated | env.truncated
        env.final_obs[done] = env.obs[done]
        self._restart(done)

    def constants_changed(self):
        pass


class CountdownGym(gymnasium.Env):
    observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gymnasium.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        terminated = action == 2
        return (np.array([self.t, action], np.float32), float(action), bool(terminated),
                bool(self.t >= Countdown.LENGTH and not terminated), {})
