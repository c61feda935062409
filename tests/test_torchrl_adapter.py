"""TorchRL adapter (gpurl.envs.adapters.torchrl): TorchRL's own spec check on every built-in env, equality with
the gpurl env stepped directly across episode ends, every step's data surviving in a rollout (the adapter's
copies), seeding, ended envs, a MAPPO/IPPO run through TorchRL's collector and PPO loss, and errors."""
from __future__ import annotations

import subprocess
import sys
import warnings

import pytest
import torch

# torchrl and tensordict come with the dev extra (the torchrl extra): a missing one fails here, not skips.
from tensordict.nn import TensorDictModule, TensorDictSequential
from torchrl.collectors import Collector  # TorchRL 0.14's name for SyncDataCollector
from torchrl.envs.utils import check_env_specs, step_mdp
from torchrl.modules import MultiAgentMLP, ProbabilisticActor
from torchrl.objectives import ClipPPOLoss, ValueEstimators

import gpurl
from gpurl.envs.adapters import GpurlTorchRLEnv, torchrl_env
from gpurl.envs.registry import _FACTORIES

pytestmark = pytest.mark.cpu
torch.set_num_threads(1)

#: Cheap builds: the configs tests/test_adapters.py compiles too (each env class compiles once per machine).
PARAMS = {
    "tag_continuous": dict(num_taggers=2, num_runners=3, episode_length=6, use_full_observation=False,
                           num_other_agents_observed=2),
    "tag_gridworld": dict(num_taggers=2, grid_length=3, episode_length=6),
}
#: The built-in envs: those gpurl's own modules register (a test module imported before this one, in the same
#: pytest process, may have registered an env of its own, e.g. the custom-env example's "foraging").
BUILT_IN = [name for name in gpurl.registered()
            if getattr(_FACTORIES[name], "__module__", "").startswith("gpurl.")]
#: (env, params, categorical actions): Discrete with two obs widths, Box, one-hot, MultiDiscrete, narrower Box;
#: one group's actions handed to gpurl as they are (Discrete and Box).
CASES = {
    "simple_tag": ("simple_tag", dict(max_cycles=5), True),
    "simple_tag_box": ("simple_tag", dict(max_cycles=5, continuous_actions=True), True),
    "simple_tag_one_hot": ("simple_tag", dict(max_cycles=5), False),
    "tag_continuous": ("tag_continuous", PARAMS["tag_continuous"], True),
    "speaker_listener_box": ("simple_speaker_listener", dict(max_cycles=5, continuous_actions=True), True),
    "simple_spread": ("simple_spread", dict(max_cycles=5), True),
    "simple_spread_box": ("simple_spread", dict(max_cycles=5, continuous_actions=True), True),
}


def params_of(name: str) -> dict:
    """Cheap params of a built-in env; the MPE ones with 2-step episodes, so short rollouts cross an end."""
    return PARAMS.get(name, dict(max_cycles=2))


def make_pair(case: str, num_envs: int, seed: int, **kwargs):
    """(adapter, the same gpurl env made directly) from the same seed."""
    name, params, categorical = CASES[case]
    adapter = torchrl_env(name, num_envs, device="cpu", seed=seed, categorical_actions=categorical,
                          **params, **kwargs)
    direct = gpurl.make(name, num_envs=num_envs, device="cpu", seed=seed, autoreset=False, **params, **kwargs)
    return adapter, direct


def gpurl_actions(env: GpurlTorchRLEnv, td) -> torch.Tensor:
    """The adapter's per-group actions of ``td`` as the direct env takes them, [E, N, action_dims]."""
    gp = env.env
    full = torch.zeros(gp.num_envs, gp.num_agents, gp.action_dims, dtype=gp.action_dtype)
    for name, g in gp.groups.items():
        action = td[name, "action"]
        if not env.categorical_actions:
            action = action.argmax(-1)  # Discrete one-hot [E, n, k] -> index [E, n]
        action = action.reshape(gp.num_envs, g.agents.stop - g.agents.start, -1)
        full[:, g.agents, :action.shape[-1]] = action.to(full.dtype)
    return full


def assert_group_obs(td, direct_obs: torch.Tensor, env: GpurlTorchRLEnv, prefix=()):
    for name, g in env.env.groups.items():
        torch.testing.assert_close(td[(*prefix, name, "observation")], direct_obs[:, g.agents, :g.obs_dim],
                                   rtol=0, atol=0)


def stagger(*envs, timesteps):
    """Staggered episode ends through the documented state injection (env.state.timestep)."""
    for env in envs:
        env.state.timestep.copy_(torch.tensor(timesteps, dtype=torch.int32))


# ---- TorchRL's own conformance check -------------------------------------------------------------------


@pytest.mark.parametrize("name", BUILT_IN)
def test_check_env_specs_passes_for_every_built_in_env(name):
    env = torchrl_env(name, 4, device="cpu", seed=1, **params_of(name))
    check_env_specs(env, break_when_any_done="both")
    data = env.rollout(7, break_when_any_done=False)  # past an episode end: the reset path too
    assert data["next", "done"].any()
    keys = list(env.full_observation_spec.keys(True, True))
    assert all(env.full_observation_spec.is_in(data["next"][:, t].select(*keys)) for t in range(7))
    for name_, g in env.env.groups.items():
        n = g.agents.stop - g.agents.start
        assert data[name_, "observation"].shape == (4, 7, n, g.obs_dim)
        assert data["next", name_, "reward"].shape == data["next", name_, "done"].shape == (4, 7, n, 1)
        assert len(env.group_map[name_]) == n


def test_specs_follow_vmas_conventions():
    from torchrl.data import Bounded, Categorical, MultiCategorical, MultiOneHot, OneHot, Unbounded

    tag = torchrl_env("simple_tag", 4, device="cpu", max_cycles=5)
    assert tag.batch_size == (4,) and tag.group_map == {"adversary": ["adversary_0", "adversary_1", "adversary_2"],
                                                        "good": ["agent_0"]}
    assert tag.full_action_spec["adversary", "action"] == Categorical(5, shape=(4, 3), dtype=torch.int64)
    assert tag.full_observation_spec["good", "observation"] == Unbounded((4, 1, 14), dtype=torch.float32)
    assert tag.full_observation_spec["state"].shape == (4, tag.env.global_state_dim)
    assert tag.full_reward_spec["adversary", "reward"] == Unbounded((4, 3, 1), dtype=torch.float32)
    assert set(tag.done_keys) == {"done", "terminated", "truncated", *((g, k) for g in ("adversary", "good")
                                                                       for k in ("done", "terminated", "truncated"))}
    assert tag.full_done_spec["good", "truncated"] == Categorical(2, shape=(4, 1, 1), dtype=torch.bool)
    one_hot = torchrl_env("simple_tag", 4, device="cpu", categorical_actions=False, global_state=False)
    assert isinstance(one_hot.full_action_spec["good", "action"], OneHot)
    assert one_hot.full_action_spec["good", "action"].shape == (4, 1, 5)
    assert "state" not in one_hot.full_observation_spec.keys()
    box = torchrl_env("simple_tag", 4, device="cpu", continuous_actions=True)
    spec = box.full_action_spec["adversary", "action"]
    assert isinstance(spec, Bounded) and spec.shape == (4, 3, 5) and spec.dtype == torch.float32
    assert (spec.space.low == 0).all() and (spec.space.high == 1).all()
    tc = torchrl_env("tag_continuous", 4, device="cpu", **PARAMS["tag_continuous"])
    assert isinstance(tc.full_action_spec["runner", "action"], MultiCategorical)
    assert tc.full_action_spec["runner", "action"].shape == (4, 3, 2)
    tc_hot = torchrl_env("tag_continuous", 4, device="cpu", categorical_actions=False, **PARAMS["tag_continuous"])
    assert isinstance(tc_hot.full_action_spec["tagger", "action"], MultiOneHot)
    assert tc_hot.full_action_spec["tagger", "action"].shape == (4, 2, 22)
    check_env_specs(tc_hot)
    check_env_specs(one_hot)


# ---- equality with the gpurl env stepped directly ------------------------------------------------------


@pytest.mark.parametrize("case", list(CASES))
def test_steps_equal_the_direct_env_across_episode_ends(case):
    """TorchRL's step_and_maybe_reset vs the gpurl env stepped with the same actions and reset by mask:
    observations (the ended episode's last one in "next", the new one after the reset), rewards and flags."""
    E = 3
    env, direct = make_pair(case, E, seed=8)
    td = env.reset()
    assert_group_obs(td, direct.reset(), env)
    stagger(env.env, direct, timesteps=[0, 1, 3])
    torch.manual_seed(0)
    ends = 0
    for _ in range(12):
        td = env.rand_action(td)
        stepped, td = env.step_and_maybe_reset(td)
        d_obs, d_reward, d_term, d_trunc, _ = direct.step(gpurl_actions(env, stepped))
        assert_group_obs(stepped, d_obs, env, prefix=("next",))
        d_done = d_term | d_trunc
        for key, want in dict(done=d_done, terminated=d_term, truncated=d_trunc).items():
            assert torch.equal(stepped["next", key], want.unsqueeze(-1))
        for name, g in direct.groups.items():
            n = g.agents.stop - g.agents.start
            assert torch.equal(stepped["next", name, "reward"], d_reward[:, g.agents].unsqueeze(-1))
            assert torch.equal(stepped["next", name, "terminated"], d_term.view(E, 1, 1).expand(E, n, 1))
            assert torch.equal(stepped["next", name, "done"], d_done.view(E, 1, 1).expand(E, n, 1))
        if d_done.any():
            ends += int(d_done.sum())
            direct.reset(mask=d_done.clone())
        assert_group_obs(td, direct.obs, env)  # after the reset of the ended envs
        assert not td["done"].any()
    assert ends >= 4


def test_global_state_equals_the_direct_envs():
    """"state" after steps (the ended episode's last in "next") and after partial resets."""
    env, direct = make_pair("simple_tag", 2, seed=4)
    td = env.reset()
    direct.reset()
    assert torch.equal(td["state"], direct.global_state)
    stagger(env.env, direct, timesteps=[0, 3])
    torch.manual_seed(1)
    for _ in range(7):
        td = env.rand_action(td)
        stepped, td = env.step_and_maybe_reset(td)
        _, _, d_term, d_trunc, _ = direct.step(gpurl_actions(env, stepped))
        assert torch.equal(stepped["next", "state"], direct.global_state)
        direct.reset(mask=(d_term | d_trunc).clone())
        assert torch.equal(td["state"], direct.global_state)


def test_a_rollout_holds_every_steps_data():
    """Each step's TensorDict must survive the later steps and resets (TorchRL stacks them at the end): a
    rollout over staggered episode ends, replayed on the direct env with its actions, matches at every step;
    and the step's outputs are views of the kernel's own per-step tensors, not of the env's buffers."""
    E, T = 3, 14
    env, direct = make_pair("simple_tag", E, seed=2)
    start = env.reset()
    stagger(env.env, timesteps=[0, 2, 3])
    torch.manual_seed(3)
    data = env.rollout(T, break_when_any_done=False, auto_reset=False, tensordict=start)
    assert data.batch_size == (E, T)
    obs = direct.reset().clone()
    stagger(direct, timesteps=[0, 2, 3])
    for t in range(T):
        assert_group_obs(data[:, t], obs, env)
        d_obs, d_reward, d_term, d_trunc, _ = direct.step(gpurl_actions(env, data[:, t]))
        assert_group_obs(data[:, t], d_obs, env, prefix=("next",))
        assert torch.equal(data["next", "adversary", "reward"][:, t].squeeze(-1), d_reward[:, :3])
        direct.reset(mask=(d_term | d_trunc).clone())
        obs = direct.obs.clone()
    assert data["next", "done"].sum() >= 6
    moved = data["adversary", "observation"][:, 1:] != data["adversary", "observation"][:, :-1]
    assert moved.any(-1).any(-1).all()  # consecutive observations differ (no step's data overwritten)

    stepped = env.rand_step(env.reset())
    views = [stepped["next", g, "observation"] for g in ("adversary", "good")]
    assert views[0].untyped_storage().data_ptr() == views[1].untyped_storage().data_ptr()  # one [E, N, D] tensor
    assert views[0].untyped_storage().data_ptr() != env.env.obs.untyped_storage().data_ptr()
    assert not views[0].is_contiguous()  # a strided view of the kernel's output, not a copy


def test_a_step_mask_leaves_ended_envs_frozen():
    """TorchRL's "_step" mask [E, 1] (what rollout(break_when_all_done=True) passes): the envs it leaves out are
    ended ones, which validate=True accepts and gpurl keeps frozen; the others step as the direct env's do."""
    env, direct = make_pair("simple_tag", 3, seed=6)
    td = env.reset()
    direct.reset()
    stagger(env.env, direct, timesteps=[0, 3, 4])  # max_cycles=5: env 2 ends at the first step, env 1 next
    torch.manual_seed(4)
    for _ in range(3):
        td = env.rand_action(td)
        td.set("_step", ~td["done"])
        before = env.env.state.pos.clone()
        stepped = env.step(td)
        d_obs, d_reward, d_term, d_trunc, _ = direct.step(gpurl_actions(env, stepped))
        ran = ~td["done"].squeeze(-1)
        assert torch.equal(env.env.state.pos[~ran], before[~ran])  # frozen
        assert (stepped["next", "adversary", "reward"][~ran] == 0).all()
        assert_group_obs(stepped["next"][ran], d_obs[ran], env)
        assert torch.equal(stepped["next", "done"].squeeze(-1), d_term | d_trunc)
        td = step_mdp(stepped)
    assert td["done"].squeeze(-1).tolist() == [False, True, True]


# ---- seeding, ended envs, partial resets ---------------------------------------------------------------


def test_seeding_repeats_gpurl_make():
    env = torchrl_env("simple_tag", 3, device="cpu", seed=0)
    torch.manual_seed(0)
    first = env.rollout(4)
    env.set_seed(7)
    reset = env.reset()
    assert_group_obs(reset, gpurl.make("simple_tag", num_envs=3, device="cpu", seed=7).reset(), env)
    env.set_seed(0)
    torch.manual_seed(0)
    assert (env.rollout(4) == first).all()
    with pytest.raises((TypeError, ValueError), match="seed"):
        env.set_seed(-1)


def test_partial_reset_restarts_only_masked_envs():
    env, direct = make_pair("simple_tag", 4, seed=5)
    td = env.reset()
    direct.reset()
    torch.manual_seed(2)
    for _ in range(2):
        td = env.rand_action(td)
        td = step_mdp(env.step(td))
        direct.step(gpurl_actions(env, td))
    mask = torch.tensor([True, False, True, False])
    td.set("_reset", mask.unsqueeze(-1))
    out = env.reset(td)
    direct.reset(mask=mask)
    assert_group_obs(out, direct.obs, env)
    # A per-group "_reset" ([E, n, 1]) resets the env too.
    td = step_mdp(env.step(env.rand_action(out)))
    direct.step(gpurl_actions(env, td))
    group_mask = torch.zeros(4, 1, 1, dtype=torch.bool)
    group_mask[3] = True
    td.set(("good", "_reset"), group_mask)
    out = env.reset(td)
    direct.reset(mask=torch.tensor([False, False, False, True]))
    assert_group_obs(out, direct.obs, env)


@pytest.mark.parametrize("validate", [True, False])
def test_stepping_an_ended_env(validate):
    """validate=True: a ValueError before anything changes; validate=False: gpurl's frozen env (reward 0, its
    flags kept, its state unchanged), and a reset restarts it."""
    env = torchrl_env("simple_tag", 2, device="cpu", seed=1, max_cycles=2, validate=validate)
    td = env.reset()
    for _ in range(2):
        td = step_mdp(env.step(env.rand_action(td)))
    assert td["done"].all()
    before = env.env.state.pos.clone()
    td = env.rand_action(td)
    if validate:
        with pytest.raises(ValueError, match=r"env\(s\) \[0, 1\] ended and were not reset"):
            env.step(td)
    else:
        stepped = env.step(td)
        assert stepped["next", "truncated"].all() and (stepped["next", "adversary", "reward"] == 0).all()
    assert torch.equal(env.env.state.pos, before)
    td.set("_reset", td["done"].clone())
    td = env.reset(td)
    assert not td["done"].any()
    env.step(env.rand_action(td))  # running again


# ---- TorchRL's PPO through its collector ---------------------------------------------------------------


def group_actor_critic(env: GpurlTorchRLEnv, name: str):
    """A tiny IPPO actor (MultiAgentMLP, shared parameters, categorical) and MAPPO critic (centralised)."""
    g = env.env.groups[name]
    n = len(env.group_map[name])
    net = MultiAgentMLP(n_agent_inputs=g.obs_dim, n_agent_outputs=int(g.action_space.n), n_agents=n,
                        centralised=False, share_params=True, depth=1, num_cells=16, activation_class=torch.nn.Tanh)
    actor = ProbabilisticActor(TensorDictModule(net, in_keys=[(name, "observation")], out_keys=[(name, "logits")]),
                               spec=env.full_action_spec_unbatched[name, "action"], in_keys=[(name, "logits")],
                               out_keys=[(name, "action")], distribution_class=torch.distributions.Categorical,
                               return_log_prob=True, log_prob_key=(name, "action_log_prob"))
    critic_net = MultiAgentMLP(n_agent_inputs=g.obs_dim, n_agent_outputs=1, n_agents=n, centralised=True,
                               share_params=True, depth=1, num_cells=16, activation_class=torch.nn.Tanh)
    critic = TensorDictModule(critic_net, in_keys=[(name, "observation")], out_keys=[(name, "state_value")])
    return actor, critic


def test_collector_with_mappo_losses_trains_simple_tag():
    """TorchRL's multi-agent PPO recipe, one policy and one ClipPPOLoss (GAE) per group of simple_tag."""
    torch.manual_seed(0)
    E, T, iterations = 16, 32, 3
    env = torchrl_env("simple_tag", E, device="cpu", seed=3, max_cycles=10)
    nets = {name: group_actor_critic(env, name) for name in env.env.groups}
    policy = TensorDictSequential(*(actor for actor, _ in nets.values()))
    losses, optimisers = {}, {}
    for name, (actor, critic) in nets.items():
        loss = ClipPPOLoss(actor, critic, clip_epsilon=0.2, entropy_coeff=0.01, normalize_advantage=False)
        loss.set_keys(reward=(name, "reward"), action=(name, "action"), sample_log_prob=(name, "action_log_prob"),
                      value=(name, "state_value"), done=(name, "done"), terminated=(name, "terminated"),
                      advantage=(name, "advantage"), value_target=(name, "value_target"))
        loss.make_value_estimator(ValueEstimators.GAE, gamma=0.99, lmbda=0.95)
        losses[name] = loss
        optimisers[name] = torch.optim.Adam(loss.parameters(), lr=3e-3)
    initial = {name: [p.detach().clone() for p in loss.parameters()] for name, loss in losses.items()}
    collector = Collector(env, policy, frames_per_batch=E * T, total_frames=iterations * E * T,
                          auto_register_policy_transforms=False)
    groups = list(env.env.groups)
    batches = 0
    for data in collector:
        batches += 1
        assert data.batch_size == (E, T) and data["next", "done"].sum() == E * 3  # episodes of 10 steps
        # The collector's data is the env's: where no episode ended, "next" observations are the next step's.
        running = ~data["next", "done"][:, :-1, 0]
        for name in groups:
            assert torch.equal(data["next", name, "observation"][:, :-1][running],
                               data[name, "observation"][:, 1:][running])
        for name, loss in losses.items():
            with torch.no_grad():
                loss.value_estimator(data, params=loss.critic_network_params,
                                     target_params=loss.target_critic_network_params)
            flat = data.reshape(-1)
            for _ in range(2):
                terms = loss(flat)
                total = terms["loss_objective"] + terms["loss_critic"] + terms["loss_entropy"]
                assert torch.isfinite(total)
                optimisers[name].zero_grad()
                total.backward()
                optimisers[name].step()
        collector.update_policy_weights_()
    collector.shutdown()
    assert batches == iterations
    for name, loss in losses.items():
        assert any(not torch.equal(p, q) for p, q in zip(loss.parameters(), initial[name])), name


# ---- errors --------------------------------------------------------------------------------------------


def test_errors_are_clear_and_change_nothing():
    env = torchrl_env("simple_tag", 2, device="cpu", seed=0)
    td = env.rand_action(env.reset())
    before = env.env.state.pos.clone()

    def step_with(**changes):
        bad = td.clone()
        for key, value in changes.items():
            group, field = key.split("__")
            bad.set((group, field), value)
        return env.step(bad)

    with pytest.raises(ValueError, match=r"\('adversary', 'action'\) must have shape \(2, 3\).*got \(2, 3, 1\)"):
        step_with(adversary__action=torch.zeros(2, 3, 1, dtype=torch.int64))
    with pytest.raises(TypeError, match=r"\('good', 'action'\) must have an integer dtype.*float32"):
        step_with(good__action=torch.zeros(2, 1))
    with pytest.raises(ValueError, match=r"out of range"):
        step_with(good__action=torch.full((2, 1), 5))
    with pytest.raises(ValueError, match=r"missing \['good'\], unknown group\(s\) \['runner'\]"):
        bad = td.clone().exclude(("good", "action"))
        bad.set(("runner", "action"), torch.zeros(2, 1, dtype=torch.int64))
        env.step(bad)
    elsewhere = td.clone().clear_device_()  # a tensordict with a device would move the action there
    elsewhere.set(("good", "action"), torch.zeros(2, 1, dtype=torch.int64, device="meta"))
    with pytest.raises(ValueError, match=r"must be on cpu, got meta"):
        env.step(elsewhere)
    assert torch.equal(env.env.state.pos, before)

    box = torchrl_env("simple_tag", 2, device="cpu", continuous_actions=True)
    box_td = box.rand_action(box.reset())
    box_td.set(("good", "action"), torch.zeros(2, 1, 5, dtype=torch.int64))
    with pytest.raises(TypeError, match=r"\('good', 'action'\) must have dtype torch.float32"):
        box.step(box_td)
    one_hot = torchrl_env("simple_tag", 2, device="cpu", categorical_actions=False)
    hot_td = one_hot.rand_action(one_hot.reset())
    hot_td.set(("good", "action"), torch.ones(2, 1, 5, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"must be one-hot"):
        one_hot.step(hot_td)

    with pytest.raises(ValueError, match="autoreset=False"):
        GpurlTorchRLEnv(gpurl.make("simple_tag", num_envs=2, device="cpu"))
    with pytest.raises(ValueError, match=r"autoreset=True clashes"):
        torchrl_env("simple_tag", 2, device="cpu", autoreset=True)
    torchrl_env("simple_tag", 2, device="cpu", autoreset=False)  # its own value is fine
    assert env.to("cpu") is env
    with pytest.raises(ValueError, match=r"stays on the device its gpurl env was made on \(cpu\)"):
        env.to("meta")


def test_the_adapters_package_imports_torchrl_only_when_used():
    code = ("import sys, gpurl.envs.adapters as a; assert 'torchrl' not in sys.modules, 'imported at import'; "
            "a.GpurlTorchRLEnv; assert 'torchrl' in sys.modules")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_no_warnings_from_torchrl_on_a_rollout_over_resets():
    env = torchrl_env("simple_tag", 2, device="cpu", max_cycles=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. TorchRL's warning on a partial "_reset" missing data
        data = env.rollout(7, break_when_any_done=False)
    assert data["next", "done"].sum() == 2 * 2
