"""The PPO loss (gpurl/algos/ppo_loss.py), its one definition, against hand-computed cases and against
its compiled fast path: the same loss, statistics and gradients; a whole update through both
backends lands on the same parameters; flat gradients stay views; an empty shard gives zero gradients.
"""
from __future__ import annotations

import math

import gymnasium
import pytest
import torch

from gpurl.algos.compiling import compile_step
from gpurl.algos.nets import ActorCritic
from gpurl.algos.flat import FlatParameters
from gpurl.algos.ppo import PPOLearner
from gpurl.algos.ppo_loss import STAT_NAMES, GroupBatch, LossCoefficients, advantage_moments, groups_loss, ppo_loss
from gpurl.algos.base import LearnContext
from gpurl.multigpu.placement import EnvShard, LocalComm
from gpurl.train import build_config
from gpurl.train.metrics import PhaseTimer

pytestmark = pytest.mark.cpu

IN_DIM = 10
SPACES = {"discrete": gymnasium.spaces.Discrete(5), "multidiscrete": gymnasium.spaces.MultiDiscrete([3, 4, 2]),
          "box": gymnasium.spaces.Box(-1.0, 1.0, (3,))}


def random_policy(space, widths=(32, 32), activation="tanh", seed=0):
    policy = ActorCritic(IN_DIM, space, widths, activation, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():  # away from the small-output init, so every term of the loss matters
        g = torch.Generator().manual_seed(seed + 100)
        for p in policy.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.3)
        policy.obs_norm.mean.normal_(generator=g)
        policy.obs_norm.var.uniform_(0.5, 2.0, generator=g)
    return policy


def random_batch(policy, space, rows, seed) -> GroupBatch:
    g = torch.Generator().manual_seed(seed)
    inputs = policy.normalize(torch.randn(rows, IN_DIM, generator=g) * 2).detach()
    if isinstance(space, gymnasium.spaces.Box):
        actions = torch.randn(rows, space.shape[0], generator=g)
    else:
        nvec = [space.n] if isinstance(space, gymnasium.spaces.Discrete) else list(space.nvec)
        actions = torch.stack([torch.randint(0, int(n), (rows,), generator=g) for n in nvec], 1)
    with torch.no_grad():
        log_prob, _, value = policy.evaluate(inputs, actions, normalized=True)
    old_log_prob = log_prob + 0.3 * torch.randn(rows, generator=g)
    old_value = value + 0.3 * torch.randn(rows, generator=g)
    # Some rows exactly on the policy: ratio 1 and value == old value, the ties of both maxima.
    old_log_prob[:20], old_value[20:40] = log_prob[:20], value[20:40]
    advantages = 3 * torch.randn(rows, generator=g) + 1
    returns = 2 * torch.randn(rows, generator=g)
    return GroupBatch(inputs, actions, old_log_prob, advantages, returns, old_value)


COEFS = {
    "clipped": LossCoefficients(clip_coef=0.2, clip_vloss=True, vf_coef=0.7, ent_coef=0.05),
    "unclipped-value": LossCoefficients(clip_coef=0.2, clip_vloss=False, vf_coef=0.5, ent_coef=0.01),
    "a2c": LossCoefficients(clip_coef=0.0, clip_vloss=False, vf_coef=0.5, ent_coef=0.0),
}


def test_hand_computed_case():
    """One row, a one-layer policy whose outputs we set: the clipped surrogate picks the clipped term,
    the value loss the clipped one, and the statistics follow."""
    policy = ActorCritic(1, gymnasium.spaces.Discrete(2), (1,), "relu", norm_obs=False)
    with torch.no_grad():
        for p in policy.parameters():
            p.zero_()
        policy.actor[-1].bias.copy_(torch.tensor([0.0, math.log(3.0)]))  # p = (1/4, 3/4)
        policy.critic[-1].bias.fill_(2.0)                                 # value 2
    mb = GroupBatch(inputs=torch.zeros(1, 1), actions=torch.tensor([[1]]), log_prob=torch.tensor([math.log(0.5)]),
                    advantages=torch.tensor([1.0]), returns=torch.tensor([1.0]), values=torch.tensor([1.5]))
    coef = COEFS["clipped"]
    loss, stats = ppo_loss(policy, mb, 1, torch.tensor(0.0), torch.tensor(1.0), coef)
    ratio = 0.75 / 0.5                               # 1.5, clipped to 1.2; advantage > 0: min(1.5, 1.2)
    pg = -1.2
    v_loss = 0.5 * max((2.0 - 1.0) ** 2, (1.7 - 1.0) ** 2)   # clipped value 1.5 + 0.2
    entropy = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    want = [pg - 0.05 * entropy + 0.7 * v_loss, pg, v_loss, entropy, (ratio - 1) - math.log(ratio), 1.0]
    torch.testing.assert_close(stats, torch.tensor(want), rtol=1e-6, atol=1e-6)
    assert loss.item() == pytest.approx(want[0], rel=1e-6)


def test_advantage_moments_are_the_unbiased_minibatch_moments():
    adv = torch.tensor([1.0, 2.0, 4.0, 9.0])
    mean, std = advantage_moments(adv, 4, LocalComm())
    assert mean.item() == pytest.approx(4.0) and std.item() == pytest.approx(adv.std().item())


def grads_of(policies, batches, coef, loss_fn):
    for p in policies:
        p.zero_grad(set_to_none=True)
    moments = [advantage_moments(b.advantages, len(b), LocalComm()) for b in batches]
    loss, stats = loss_fn(policies, batches, [len(b) for b in batches], moments, coef)
    loss.backward()
    grads = {f"{i}.{k}": p.grad.clone() for i, pol in enumerate(policies) for k, p in pol.named_parameters()
             if p.grad is not None}
    return grads, stats


def assert_same_grads(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    scale = max(g.abs().max().item() for g in want.values())
    for key, g in want.items():
        # atol relative to the largest gradient: a bias gradient is a sum that cancels to ~1e-5 of its
        # terms, and both sides round those terms in float32 (the compiled side with FMA contraction).
        torch.testing.assert_close(got[key], g, rtol=1e-4, atol=2e-6 * scale, msg=key)


# Each case compiles its own graph (~10 s on 2 vCPUs): a few cases cover options, activations,
# depths and head kinds between them.
CASES = {
    "clipped-tanh-discrete+multidiscrete": ("clipped", "tanh", (64, 64), ("discrete", "multidiscrete")),
    "unclipped-relu-3layers-multidiscrete": ("unclipped-value", "relu", (16, 24, 8), ("multidiscrete",)),
    "a2c-tanh-1layer-box": ("a2c", "tanh", (32,), ("box",)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_compiled_loss_gives_the_eager_loss_statistics_and_gradients(case):
    coef_name, activation, widths, spaces = CASES[case]
    policies = [random_policy(SPACES[s], widths, activation, seed=i) for i, s in enumerate(spaces)]
    batches = [random_batch(p, SPACES[s], rows=700, seed=10 + i) for i, (p, s) in enumerate(zip(policies, spaces))]
    want, want_stats = grads_of(policies, batches, COEFS[coef_name], groups_loss)
    got, got_stats = grads_of(policies, batches, COEFS[coef_name], compile_step(groups_loss))
    assert_same_grads(got, want)
    torch.testing.assert_close(got_stats, want_stats, rtol=1e-5, atol=1e-6)
    assert got_stats.shape == (len(spaces), len(STAT_NAMES))


def learner_run(backend: str, shard: EnvShard | None = None, minibatches: int = 2, reduce_gradients=None):
    """PPOLearner.update over two groups with SGD, through ``backend``; returns (parameters, stats, grads,
    nets). The rollout is [T=4, E=10, n=10] per group; ``shard`` picks this rank's envs of it."""
    cfg = build_config(env="simple_tag", iters=1, epochs=2, minibatches=minibatches, max_grad_norm=0.05,
                       learner_backend=backend)
    spaces = {"a": SPACES["discrete"], "b": SPACES["multidiscrete"]}
    nets = torch.nn.ModuleDict({k: random_policy(s, (32, 32), "tanh", seed=i) for i, (k, s) in enumerate(spaces.items())})
    batches = {k: random_batch(nets[k], s, rows=400, seed=10 + i) for i, (k, s) in enumerate(spaces.items())}
    shard = shard or EnvShard(0, 10, 10)
    rows = torch.arange(400).view(4, 10, 10)[:, shard.lo:shard.hi].reshape(-1)
    batches = {k: b.rows(rows) for k, b in batches.items()}
    for b in batches.values():
        b.agents = 10
    grads = FlatParameters(nets)
    learner = PPOLearner(cfg, None, nets, torch.optim.SGD([grads.param], lr=0.1), grads,
                         "compiled" if backend == "compiled" else "eager")
    ctx = LearnContext(shard, LocalComm(), reduce_gradients or (lambda g: None), torch.Generator().manual_seed(7),
                       PhaseTimer(torch.device("cpu")))
    stats = learner.update(batches, ctx)
    return nets.state_dict(), stats, grads, nets


def test_whole_update_compiled_equals_eager():
    """Two epochs of two minibatches for two groups, gradient clipping binding on every step, SGD (no
    Adam normalisation to magnify rounding): the same parameters and statistics."""
    (pe, se, _, _), (pc, sc, _, _) = learner_run("eager"), learner_run("compiled")
    for key in pe:
        torch.testing.assert_close(pc[key], pe[key], rtol=1e-4, atol=1e-5, msg=key)
    torch.testing.assert_close(sc, se, rtol=1e-4, atol=1e-5)


def test_flat_parameters_and_gradients_stay_views_through_backward_and_step():
    """After a whole update (backward passes, SGD steps on the flat parameter) every module parameter
    and gradient still lives in the flat buffers, and the modules hold what the optimizer wrote."""
    _, _, flat, nets = learner_run("eager")
    offset = 0
    for p in nets.parameters():
        if p.numel():  # an empty tensor (a categorical policy's log_std) has no storage to share
            assert p.data_ptr() == flat.param[offset:].data_ptr(), "a parameter stopped being a view"
            assert p.grad.data_ptr() == flat.grad[offset:].data_ptr(), "a .grad stopped being a view"
            assert torch.equal(p.detach().reshape(-1), flat.param.detach()[offset:offset + p.numel()])
        offset += p.numel()
    assert offset == flat.param.numel() == flat.grad.numel()


def test_a_shard_holding_none_of_a_minibatch_hands_zero_gradients_to_the_reduction(monkeypatch):
    """One env of ten (40 of 400 rows per group) and 4-row minibatches: some minibatches hold none of
    this shard's rows. Their gradients, as handed to the all-reduce, are exactly zero (the rank adds
    nothing to the sum); the others are not."""
    calls = []
    original = PPOLearner.update

    def counting_loss(loss):
        def wrapped(*args):
            calls.append(1)
            return loss(*args)
        return wrapped

    def update(self, batches, ctx):
        self.loss = counting_loss(self.loss)
        return original(self, batches, ctx)

    monkeypatch.setattr(PPOLearner, "update", update)
    seen = []
    reduce = lambda grads: seen.append((len(calls), grads[0].clone()))  # noqa: E731
    _, stats, _, _ = learner_run("eager", EnvShard(0, 1, 10), minibatches=100, reduce_gradients=reduce)
    empty = [g for (n, g), (previous, _) in zip(seen, [(0, None)] + seen) if n == previous]
    full = [g for (n, g), (previous, _) in zip(seen, [(0, None)] + seen) if n > previous]
    assert len(seen) == 200 and empty and full
    assert all(torch.count_nonzero(g) == 0 for g in empty)
    assert all(torch.count_nonzero(g) > 0 for g in full)
    assert torch.isfinite(stats).all()


def test_config_rejects_unknown_backends():
    with pytest.raises(ValueError, match="learner_backend"):
        build_config(env="simple_tag", iters=1, learner_backend="numba")
    with pytest.raises(ValueError, match="policy_backend"):
        build_config(env="simple_tag", iters=1, policy_backend="fused")
