"""CPU tier: the deterministic-policy family (gpurl/algos/ddpg.py, box_nets.py): the TD3 target and target
smoothing against hand-computed cases, actions inside the Box whatever the noise, and clear refusals of
action spaces it cannot act in. tests/test_algo_dist_matrix.py runs MADDPG, IDDPG and MATD3 under every
distribution policy and resumes MADDPG's 2-rank checkpoint."""
from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch

from dist_helpers import CONTINUOUS_ARGS
from gpurl.algos import ALGORITHMS, DDPGParams, TD3Params
from gpurl.algos.ddpg import smoothed, td3_target
from gpurl.algos.box_nets import Critic, DeterministicActor
from gpurl.envs.params import ParameterError
from gpurl.fusion.counter_rng import seed_tensor
from gpurl.train.cli import config_from_args

pytestmark = pytest.mark.cpu

BOX = gymnasium.spaces.Box(low=np.array([0.0, -2.0], np.float32), high=np.array([1.0, 2.0], np.float32))


def test_the_td3_target_takes_the_smaller_critic_and_stops_at_a_termination():
    reward = torch.tensor([[1.0, 2.0], [0.5, 0.5]])
    terminated = torch.tensor([False, True])
    q1 = torch.tensor([[10.0, 4.0], [7.0, 7.0]])
    q2 = torch.tensor([[8.0, 6.0], [1.0, 1.0]])
    # row 0: 1 + 0.5 * min(10, 8) = 5, 2 + 0.5 * min(4, 6) = 4; row 1 terminated: the reward alone
    assert td3_target(reward, terminated, 0.5, [q1, q2]).tolist() == [[5.0, 4.0], [0.5, 0.5]]
    assert td3_target(reward, terminated, 0.5, [q1]).tolist() == [[6.0, 4.0], [0.5, 0.5]]  # DDPG: one critic


def test_target_smoothing_clips_the_noise_then_the_box():
    low, half = torch.tensor([0.0, -2.0]), torch.tensor([0.5, 2.0])
    actions = torch.tensor([[0.5, 0.0], [0.9, 1.9]])
    noise = torch.tensor([[3.0, -0.1], [0.1, 0.1]])
    # noise clipped to 0.5 half ranges: 0.5 + 0.25 = 0.75; -0.1 * 2 = -0.2; 0.9 + 0.05 = 0.95; 1.9 + 0.2 -> 2
    out = smoothed(actions, noise, 0.5, low, half)
    torch.testing.assert_close(out, torch.tensor([[0.75, -0.2], [0.95, 2.0]]))


@pytest.mark.parametrize("std", [0.1, 100.0])
def test_actions_stay_inside_the_box_and_evaluation_takes_the_policys(std):
    actor = DeterministicActor(3, BOX, (16,), "tanh", torch.Generator().manual_seed(0))
    x = torch.randn(64, 3, generator=torch.Generator().manual_seed(1)) * 10
    ids, step, seed = torch.arange(64), torch.tensor([3]), seed_tensor(7, "cpu")
    noisy = actor.act(x, ids, step, seed, std)
    assert (noisy >= torch.tensor(BOX.low)).all() and (noisy <= torch.tensor(BOX.high)).all()
    assert not torch.equal(noisy, actor(x))
    assert torch.equal(actor.act(x, ids, step, seed, std, deterministic=True), actor(x))
    assert torch.equal(noisy, actor.act(x, ids, step, seed, std))  # the counter RNG: the same key, the same noise


def test_a_central_critic_reads_the_state_every_action_and_the_agents_id():
    critic = Critic(4, 2, 3, True, (8,), "relu", torch.Generator().manual_seed(0))
    state, actions = torch.randn(5, 4), torch.randn(5, 3, 2)
    q = critic(state, actions)
    assert q.shape == (5, 3)
    assert not torch.allclose(q[:, 0], q[:, 1])  # the one-hot id tells the agents apart
    moved = actions.clone()
    moved[:, 2] += 1.0  # agent 2's action changes agent 0's value: the critic reads the joint action
    assert not torch.allclose(critic(state, moved)[:, 0], q[:, 0])


def test_the_family_declares_its_parameters_and_matd3_is_ddpg_with_td3s_defaults():
    assert ALGORITHMS["maddpg"].params_type is DDPGParams and ALGORITHMS["iddpg"].params_type is DDPGParams
    td3 = TD3Params()
    assert isinstance(td3, DDPGParams) and (td3.twin_critics, td3.target_noise, td3.policy_delay) == (True, 0.2, 2)
    cfg = config_from_args([*CONTINUOUS_ARGS, "--algo", "matd3", "--iters", "1", "--policy-delay", "3"])
    assert type(cfg.algo_params) is TD3Params and cfg.algo_params.policy_delay == 3


def test_an_env_without_box_actions_is_refused_with_what_to_do():
    from gpurl.train import Trainer

    cfg = config_from_args(["--env", "tag_continuous", "--num-envs", "2", "--iters", "1", "--device", "cpu",
                            "--eval-episodes", "0", "--algo", "iddpg"])  # MultiDiscrete actions
    with pytest.raises(ParameterError, match="act in 1-d Box spaces.*continuous_actions=True"):
        Trainer(cfg)


def per_parameter_adam(flat_state: dict, parameters: list[torch.Tensor]) -> dict:
    """A flat Adam's state as ``torch.optim.Adam(parameters)`` laid it out (one state per tensor): the layout of
    the family's checkpoints before its networks became views of one flat parameter."""
    moments = flat_state["state"][0]
    sizes = [q.numel() for q in parameters]
    parts = {name: moments[name].split(sizes) for name in ("exp_avg", "exp_avg_sq")}
    state = {i: {"step": moments["step"].clone(), **{name: parts[name][i].view(q.shape).clone() for name in parts}}
             for i, q in enumerate(parameters)}
    return {"state": state, "param_groups": [{**flat_state["param_groups"][0], "params": list(range(len(sizes)))}]}


@pytest.mark.parametrize("algo", ["matd3", "masac"])
def test_a_checkpoint_from_before_the_flat_parameter_loads_and_continues_the_same(algo):
    """A checkpoint whose optimizers were torch.optim.Adam over each network tensor (``critics.parameters()``,
    ``actors.parameters()``, ``log_alpha.parameters()``) and which holds no iteration count loads into the flat
    optimizers: their moments are the saved ones, and the next iteration ends where the saving run's does."""
    from gpurl.train import Trainer

    cfg = config_from_args([*CONTINUOUS_ARGS, "--algo", algo, "--iters", "6"])
    saving, loading = Trainer(cfg), Trainer(cfg)
    for _ in range(3):
        saving.iterate()
    algo_state = saving.algo.state_dict()
    old = dict(algo_state, optimizer=per_parameter_adam(algo_state["optimizer"], [*saving.algo.critics.parameters()]),
               actor_optimizer=per_parameter_adam(algo_state["actor_optimizer"], [*saving.algo.actors.parameters()]))
    if algo == "masac":
        old["alpha_optimizer"] = per_parameter_adam(algo_state["alpha_optimizer"],
                                                    [*saving.algo.log_alpha.parameters()])
    del old["iteration"]
    assert len(old["optimizer"]["state"]) > 2
    whole = saving.state_dict()
    whole["algo_state"] = old
    loading.load_state_dict(whole)
    for key, adam in saving.algo.optimizers.items():
        loaded = loading.algo.optimizers[key]
        assert torch.equal(loaded.exp_avg, adam.exp_avg) and torch.equal(loaded.exp_avg_sq, adam.exp_avg_sq), key
        assert loaded.step.item() == adam.step.item() > 0
    saving.algo.learner.iteration = 0  # the old checkpoint's learning-rate schedule starts again (constant here)
    saving.iterate()
    loading.iterate()
    for name, tensor in saving.algo.nets.state_dict().items():
        torch.testing.assert_close(loading.algo.nets.state_dict()[name], tensor, atol=0, rtol=0, msg=name)

