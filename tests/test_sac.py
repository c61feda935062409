"""CPU tier: the SAC family (gpurl/algos/sac.py, box_nets.SquashedGaussianActor): the squashed Gaussian's
log-density against hand-computed cases and against torch.distributions, SAC's soft target and temperature loss
against hand-computed cases, actions inside the Box, and a short run in which the temperature moves towards its
target. tests/test_algo_dist_matrix.py runs MASAC and ISAC under every distribution policy and resumes MASAC's
2-rank checkpoint."""
from __future__ import annotations

import csv
import math

import gymnasium
import numpy as np
import pytest
import torch
from torch.distributions import AffineTransform, Independent, Normal, TanhTransform, TransformedDistribution

from dist_helpers import CONTINUOUS_ARGS
from gpurl.algos import ALGORITHMS, SACParams
from gpurl.algos.box_nets import LOG_STD_MAX, LOG_STD_MIN, SquashedGaussianActor, squashed_log_prob
from gpurl.algos.sac import soft_target, temperature_loss
from gpurl.fusion.counter_rng import seed_tensor
from gpurl.train.cli import config_from_args
from gpurl.train.run import train

pytestmark = pytest.mark.cpu

BOX = gymnasium.spaces.Box(low=np.array([0.0, -2.0], np.float32), high=np.array([1.0, 2.0], np.float32))
LOG_2PI = math.log(2 * math.pi)


def test_the_squashed_log_prob_of_hand_computed_cases():
    # u = 0: the Gaussian's -log(2 pi) / 2 at its mean, less log(1 - tanh(0)^2) = 0 and log(half range 0.5)
    zero = squashed_log_prob(torch.zeros(1, 1), torch.zeros(1, 1), torch.zeros(1, 1), torch.tensor([0.5]))
    assert zero.item() == pytest.approx(-0.5 * LOG_2PI - math.log(0.5), abs=1e-6)
    # mean 0.25, std 0.5, noise 1: u = 0.75; two dimensions, half ranges 0.5 and 2
    noise, log_std = torch.tensor([[1.0, -2.0]]), torch.tensor([[math.log(0.5), 0.0]])
    u = torch.tensor([[0.25, 0.1]]) + log_std.exp() * noise
    expected = sum(-0.5 * z * z - s - 0.5 * LOG_2PI - math.log(1 - math.tanh(v) ** 2) - math.log(h)
                   for z, s, v, h in zip([1.0, -2.0], [math.log(0.5), 0.0], [0.75, -1.9], [0.5, 2.0]))
    got = squashed_log_prob(noise, log_std, u, torch.tensor([0.5, 2.0]))
    assert got.item() == pytest.approx(expected, abs=1e-5)


def test_the_squashed_log_prob_is_torch_distributions_and_finite_where_tanh_saturates():
    actor = SquashedGaussianActor(3, BOX, (16,), "tanh", torch.Generator().manual_seed(0))
    gen = torch.Generator().manual_seed(1)
    x, noise = torch.randn(256, 3, generator=gen), torch.randn(256, 2, generator=gen)
    actions, log_prob = actor.sample(x, noise)
    mean, log_std = actor.gaussian(x)
    squash = [TanhTransform(), AffineTransform(actor.low + actor.half_range, actor.half_range)]
    reference = TransformedDistribution(Independent(Normal(mean, log_std.exp()), 1), squash)
    torch.testing.assert_close(log_prob, reference.log_prob(actions), atol=1e-4, rtol=1e-4)
    # far in the tail tanh(u) rounds to 1, where log(1 - tanh^2) would be -inf: the softplus form stays finite
    u = torch.tensor([[30.0, -30.0]])
    assert torch.isfinite(squashed_log_prob(torch.zeros(1, 2), torch.zeros(1, 2), u, actor.half_range)).all()


def test_the_log_std_stays_in_its_bounds():
    actor = SquashedGaussianActor(3, BOX, (16,), "tanh", torch.Generator().manual_seed(0))
    with torch.no_grad():
        actor.net[-1].bias.copy_(torch.tensor([0.0, 0.0, 1e4, -1e4]))
    _, log_std = actor.gaussian(torch.zeros(1, 3))
    assert log_std.tolist() == [[LOG_STD_MAX, LOG_STD_MIN]]


@pytest.mark.parametrize("scale", [1.0, 1e3])
def test_sampled_actions_stay_inside_the_box_and_deterministic_acting_takes_the_means_squash(scale):
    actor = SquashedGaussianActor(3, BOX, (16,), "tanh", torch.Generator().manual_seed(0))
    x = torch.randn(64, 3, generator=torch.Generator().manual_seed(1)) * scale
    ids, step, seed = torch.arange(64), torch.tensor([3]), seed_tensor(7, "cpu")
    sampled = actor.act(x, ids, step, seed)
    assert (sampled >= torch.tensor(BOX.low)).all() and (sampled <= torch.tensor(BOX.high)).all()
    assert torch.equal(sampled, actor.act(x, ids, step, seed))  # the counter RNG: the same key, the same sample
    assert not torch.equal(sampled, actor.act(x, ids, step + 1, seed))
    assert torch.equal(actor.act(x, ids, step, seed, deterministic=True), actor.squash(actor.gaussian(x)[0]))


def test_the_soft_target_subtracts_the_temperature_times_the_log_prob_from_the_smaller_critic():
    reward, terminated = torch.tensor([[1.0], [2.0]]), torch.tensor([False, True])
    q1, q2 = torch.tensor([[10.0], [5.0]]), torch.tensor([[8.0], [9.0]])
    log_prob = torch.tensor([[-2.0], [-2.0]])
    # row 0: 1 + 0.5 (min(10, 8) - 0.25 (-2)) = 1 + 0.5 * 8.5 = 5.25; row 1 terminated: the reward alone
    target = soft_target(reward, terminated, 0.5, [q1, q2], torch.tensor(0.25), log_prob)
    assert target.tolist() == [[5.25], [2.0]]


def test_the_temperature_loss_and_its_gradient_by_hand():
    log_alpha = torch.tensor(math.log(0.5), requires_grad=True)
    # entropy (-log_prob) 1 and 3 above the target -2: loss = -log(0.5) * mean(-1 - 2, -3 - 2) = log(2) * -4
    loss = temperature_loss(log_alpha, torch.tensor([-1.0, -3.0]), -2.0)
    loss.backward()
    assert loss.item() == pytest.approx(-4 * math.log(2))
    assert log_alpha.grad.item() == pytest.approx(4.0)  # positive: a descent step lowers alpha
    log_alpha.grad = None
    # entropy -3, below the target -2: the gradient is negative, a descent step raises alpha
    temperature_loss(log_alpha, torch.tensor([3.0]), -2.0).backward()
    assert log_alpha.grad.item() == pytest.approx(-1.0)
    # the log-prob is held fixed: the policy gets no gradient from this term
    log_prob = torch.tensor([1.0], requires_grad=True)
    temperature_loss(log_alpha, log_prob, -2.0).backward()
    assert log_prob.grad is None


def test_masac_learns_its_temperature_towards_the_target_entropy(tmp_path):
    assert ALGORITHMS["masac"].params_type is SACParams and ALGORITHMS["isac"].params_type is SACParams
    # The initial policy's entropy (std about exp(-1.5) per dimension, in a Box of half range 0.5) is far above
    # the target of -1 per dimension: alpha falls from its start, and the stats log both
    args = [*CONTINUOUS_ARGS, "--algo", "masac", "--iters", "6", "--alpha-lr", "0.01", "--log-dir", str(tmp_path)]
    train(config_from_args(args), say=lambda *a: None)
    with open(tmp_path / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    alpha = [float(r["alpha/agent"]) for r in rows if float(r["updates/agent"]) > 0]
    entropy = [float(r["entropy/agent"]) for r in rows if float(r["updates/agent"]) > 0]
    assert len(alpha) >= 4 and alpha[0] < 1.0 and alpha[-1] < alpha[0]
    assert all(e > -5.0 for e in entropy)  # 5 dimensions: the target, -5, is below the entropy all along


@pytest.mark.parametrize("anneal", [False, True])
def test_the_learning_rates_stay_constant_by_default_and_anneal_when_asked(anneal):
    from gpurl.train import Trainer

    flags = ["--anneal-lr"] if anneal else []
    cfg = config_from_args([*CONTINUOUS_ARGS, "--algo", "masac", "--iters", "4", "--lr", "1e-3", "--actor-lr", "2e-3",
                            "--alpha-lr", "4e-3", *flags])
    assert cfg.algo_params.anneal_lr is anneal  # constant unless asked, as the DDPG and SAC papers' rates
    trainer = Trainer(cfg)
    for _ in range(3):
        trainer.iterate()
    # the third iteration's learning rates: (1 - 2 / 4) of each optimizer's own when annealed
    factor = 0.5 if anneal else 1.0
    lrs = {key: optimizer.lr.item() for key, optimizer in trainer.algo.optimizers.items()}
    assert lrs == pytest.approx({"optimizer": 1e-3 * factor, "actor_optimizer": 2e-3 * factor,
                                 "alpha_optimizer": 4e-3 * factor})


@pytest.mark.parametrize("algo", ["masac", "matd3"])
def test_the_compiled_update_is_the_eager_one(algo):
    """``learner_backend`` compiled (one torch.compile region per update: the gather, the losses, their gradient
    by torch.func, the clip and the Adam steps) against the definition as written (autograd, eager): three iterations of MASAC (the temperature too) and of MATD3 (both graphs, with
    and without the delayed actor term) end with the same weights to float tolerance."""
    from gpurl.train import Trainer

    trainers = {}
    for backend in ("compiled", "eager"):
        args = [arg for arg in CONTINUOUS_ARGS]
        args[args.index("--learner-backend") + 1] = backend
        trainers[backend] = Trainer(config_from_args([*args, "--algo", algo, "--iters", "3"]))
        assert trainers[backend].algo.backends()["learning"] == backend
        for _ in range(3):
            trainers[backend].iterate()
    compiled, eager = (trainers[b].algo.nets.state_dict() for b in ("compiled", "eager"))
    for name, tensor in compiled.items():
        torch.testing.assert_close(tensor, eager[name], atol=1e-4, rtol=1e-4, msg=name)
