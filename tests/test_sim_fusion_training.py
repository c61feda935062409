"""One PPO iteration with the fused path (Triton actor + GAE under the interpreter) against the eager
torch definitions: the same counter-RNG actions, so the same rollout and first-iteration losses within
tolerance."""
from __future__ import annotations

import pytest
import torch

from gpurl.train import Trainer, build_config

pytestmark = pytest.mark.sim

TINY = dict(num_taggers=2, num_runners=3, grid_length=4.0, episode_length=6, use_full_observation=False,
            num_other_agents_observed=3, tagging_distance=0.05)


def one_iteration(backend: str):
    cfg = build_config(env="tag_continuous", env_params=TINY, num_envs=3, rollout_len=8, iters=2, epochs=2,
                       minibatches=2, frame_stack=2, seed=4, device="cpu", policy_backend=backend,
                       learner_backend="eager")
    trainer = Trainer(cfg)
    losses = trainer.read_losses(trainer.iterate())
    return trainer, losses


def test_fused_path_matches_torch_path_first_iteration():
    fused, fused_losses = one_iteration("triton")
    ref, ref_losses = one_iteration("eager")
    assert fused.algo.backends()["acting"] == "triton" and ref.algo.backends()["acting"] == "eager"
    s, r = fused.storage, ref.storage
    assert torch.equal(s.actions, r.actions), "the counter RNG gave different actions"
    assert torch.equal(s.reward, r.reward) and torch.equal(s.terminated | s.truncated, r.terminated | r.truncated)
    assert bool((s.truncated | s.terminated).any()), "the rollout should cross an episode end"
    torch.testing.assert_close(s.log_prob, r.log_prob, atol=1e-5, rtol=0)
    torch.testing.assert_close(s.value, r.value, atol=1e-4, rtol=1e-4)  # slot T: the learner's bootstrap value
    assert fused_losses.keys() == ref_losses.keys()
    for key in fused_losses:
        assert fused_losses[key] == pytest.approx(ref_losses[key], rel=1e-3, abs=1e-5), key


def test_q_learning_with_the_fused_actor_matches_the_torch_actor():
    """QMIX for 3 iterations with the fused epsilon-greedy actor and with the eager one: the same actions
    in every rollout, through the learner's updates (the packed weights follow them: ``sync_actors``)."""
    from dist_helpers import VALUE_ARGS
    from gpurl.train.cli import config_from_args

    trainers = {}
    for backend in ("triton", "eager"):
        cfg = config_from_args([*VALUE_ARGS, "--algo", "qmix", "--iters", "3", "--policy-backend", backend])
        trainers[backend] = Trainer(cfg)
        assert trainers[backend].algo.backends()["acting"] == backend
    fused, ref = trainers["triton"], trainers["eager"]
    explored = []
    for _ in range(3):
        stats = [trainer.iterate() for trainer in (fused, ref)]
        assert torch.equal(fused.storage.actions, ref.storage.actions), "the counter RNG gave different actions"
        assert torch.equal(stats[0], stats[1])
        explored.append(stats[0][0, fused.algo.stat_names.index("epsilon")].item())
    assert explored[-1] < 0.5 and stats[0][0, fused.algo.stat_names.index("updates")].item() == 6.0
    for name, tensor in fused.algo.nets.state_dict().items():
        assert torch.equal(tensor, ref.algo.nets.state_dict()[name]), name


@pytest.mark.parametrize("algo", ["maddpg", "masac"])
def test_the_box_family_with_the_fused_actor_follows_the_torch_actor(algo):
    """MADDPG (noise added) and MASAC (a squashed sample) for 3 iterations with the fused Box actor and with the
    eager one: the same actions to float tolerance in every rollout (the interpreter's dots and cosine round
    differently), through the learner's updates (the packed weights follow them: ``sync_actors``)."""
    from dist_helpers import CONTINUOUS_ARGS
    from gpurl.train.cli import config_from_args

    trainers = {}
    for backend in ("triton", "eager"):
        cfg = config_from_args([*CONTINUOUS_ARGS, "--algo", algo, "--iters", "3", "--policy-backend", backend])
        trainers[backend] = Trainer(cfg)
        assert trainers[backend].algo.backends()["acting"] == backend
    fused, ref = trainers["triton"], trainers["eager"]
    for _ in range(3):
        for trainer in (fused, ref):
            trainer.iterate()
        torch.testing.assert_close(fused.storage.actions, ref.storage.actions, atol=1e-4, rtol=0)
    assert fused.algo.learner.updates == 6  # 2 updates per iteration (4 envs x 8 steps hold a batch of 16)
    for name, tensor in fused.algo.nets.state_dict().items():
        torch.testing.assert_close(tensor, ref.algo.nets.state_dict()[name], atol=1e-3, rtol=1e-3, msg=name)
