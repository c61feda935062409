"""CPU tier: IQL, VDN and QMIX through the trainer (gpurl/algos/q_learning.py, gpurl/storage/replay.py).

- each algorithm trains 3 tiny iterations on tag_gridworld: the learner updates in every iteration
  once the buffer holds q_batch transitions (and not before), its statistics are finite, the Q-networks change, the targets follow them by target_tau, and epsilon
  follows its schedule;
- the replay buffer is filled with the rollout's transitions: its inputs are the policy inputs the
  actor saw (checked against the storage of the last rollout);
- checkpoints hold the buffer's transitions (gathered in env order), or only its position with
  ``--no-replay-in-checkpoint``;
- the compiled learner (one region per update) takes the eager learner's steps;
- bad configurations are refused with a clear error: a recurrent policy, a space that is not Discrete.
"""
from __future__ import annotations

import pytest
import torch

from dist_helpers import VALUE_ARGS
from gpurl.algos import PPOParams
from gpurl.train import Trainer
from gpurl.train.checkpoint import load_checkpoint
from gpurl.train.cli import config_from_args
from gpurl.train.config import TrainConfig
from gpurl.storage import rollout_transitions
from gpurl.train.run import train

pytestmark = pytest.mark.cpu


def config(algo: str, *extra: str, iters: int = 3):
    return config_from_args([*VALUE_ARGS, "--algo", algo, "--iters", str(iters), *extra])


@pytest.mark.parametrize("algo", ["iql", "vdn", "qmix"])
def test_trains_from_the_replay_buffer(algo):
    trainer = Trainer(config(algo, "--target-tau", "0.5"))
    before = {k: v.clone() for k, v in trainer.algo.nets.state_dict().items()}
    stats = [trainer.iterate() for _ in range(3)]
    epsilon, updates = (trainer.algo.stat_names.index(n) for n in ("epsilon", "updates"))
    # 8 steps x 4 envs = 32 transitions >= q_batch 16 after the first rollout: 2 updates every iteration
    assert [s[0, updates].item() for s in stats] == [2.0, 4.0, 6.0]
    for s in stats:
        assert torch.isfinite(s).all()
    assert any(not torch.equal(before[k], v) for k, v in trainer.algo.nets.state_dict().items())
    # epsilon: 1.0 at step 0 to 0.05 over half of 3 x 8 steps, read at the step after each rollout
    assert [round(s[0, epsilon].item(), 4) for s in stats] == [round(1.0 - 0.95 * min(1.0, 8 * i / 12), 4)
                                                                for i in (1, 2, 3)]
    # targets: tau 0.5 per update, so they trail the online networks but have moved from the start
    net, target = trainer.algo.nets, trainer.algo.targets
    for name in net:
        w, wt, w0 = net[name].net[0].weight, target[name].net[0].weight, before[f"{name}.net.0.weight"]
        assert not torch.equal(wt, w0) and not torch.equal(wt, w)


def test_first_iteration_waits_for_enough_transitions():
    trainer = Trainer(config("iql", "--q-batch", "40"))  # 32 transitions after one rollout
    first, second = trainer.iterate(), trainer.iterate()
    updates = trainer.algo.stat_names.index("updates")
    assert first[0, updates].item() == 0.0 and second[0, updates].item() == 2.0


def test_buffer_holds_the_rollouts_transitions():
    trainer = Trainer(config("vdn"))
    trainer.rollout()
    expected = rollout_transitions(trainer.storage, trainer.env.obs_dim)
    trainer.replay.insert(**expected)
    T = trainer.config.rollout_len
    assert torch.equal(trainer.replay.inputs[:T], expected["inputs"])
    assert torch.equal(trainer.replay.next_inputs[:T], expected["next_inputs"])
    assert torch.equal(trainer.replay.actions[:T], trainer.storage.actions)
    # the actor's inputs: a group's policy input at step 3 is the buffer's row, frame by frame
    group = trainer.env.groups["tagger"]
    x = trainer.storage.policy_input(3, 4, group.agents, group.obs_dim)[0]
    rows = trainer.replay.inputs[3][:, group.agents]
    assert torch.equal(trainer.algo.learner.objective._group_input(rows, group), x)


@pytest.mark.parametrize("contents", [True, False])
def test_checkpoint_holds_the_buffer_or_its_position(tmp_path, contents):
    flag = "--replay-in-checkpoint" if contents else "--no-replay-in-checkpoint"
    train(config("qmix", flag, "--log-dir", str(tmp_path), iters=2), say=lambda *a: None)
    saved = load_checkpoint(tmp_path / "checkpoint.pt")["replay"]
    assert (saved["position"], saved["size"], saved["capacity"]) == (16 % 12, 12, 12)
    assert ("buffers" in saved) == contents
    if contents:
        assert saved["buffers"]["inputs"].shape[:2] == (12, 4) and saved["buffers"]["state"].shape[-1] > 0


def test_a_recurrent_policy_is_refused_with_the_config(capsys):
    with pytest.raises(SystemExit):
        config_from_args([*VALUE_ARGS, "--iters", "1", "--algo", "iql", "--recurrent", "gru"])
    assert "recurrent='gru' is not read by algo 'iql' (read by: a2c, mappo, ppo)" in capsys.readouterr().err
    with pytest.raises(ValueError, match="algo 'iql' takes QParams, got algo_params of type PPOParams"):
        TrainConfig(algo="iql", algo_params=PPOParams(recurrent="gru"), iters=1).validated()  # the config itself


@pytest.mark.parametrize("algo", ["iql", "qmix"])
def test_the_compiled_learner_takes_the_eager_learners_steps(algo):
    """Each update one compiled region (draw gathered, TD loss, gradient, clip, Adam) lands where the eager
    learner's autograd steps land, through two iterations of updates and target moves."""
    trainers = [Trainer(config(algo, "--learner-backend", backend, "--lr", "1e-4")) for backend in ("eager", "compiled")]
    stats = [[t.iterate() for _ in range(2)] for t in trainers]
    assert trainers[1].algo.backends()["learning"] == "compiled"
    for a, b in zip(*stats):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)
    eager, compiled = (t.algo for t in trainers)
    torch.testing.assert_close(compiled.flat.param, eager.flat.param, rtol=0, atol=1e-6)
    torch.testing.assert_close(compiled.target_flat.param, eager.target_flat.param, rtol=0, atol=1e-6)


def test_an_action_space_that_is_not_discrete_is_refused():
    with pytest.raises(ValueError, match="value-based algorithms .* act in Discrete spaces, got MultiDiscrete"):
        Trainer(config_from_args([*VALUE_ARGS, "--iters", "1", "--algo", "vdn", "--env", "tag_continuous"]))
