"""The PPO loss (gpurl/algos/ppo_loss.py), its one definition, against hand-computed cases and against
its compiled fast path: the same loss, statistics and gradients; the learner's objective differentiated in one
compiled region (torch.func) and by autograd; a whole update through both backends lands on the same
parameters; parameters stay views of the flat one; clipping and Adam against torch's own.
"""
from __future__ import annotations

import math

import gymnasium
import pytest
import torch

from gpurl.algos.compiling import compile_step
from gpurl.algos.flat import FlatParameters
from gpurl.algos.flat_adam import FlatAdam, flat_adam_state
from gpurl.algos.nets import ActorCritic
from gpurl.algos.ppo_loss import (STAT_NAMES, GroupBatch, LossCoefficients, advantage_moments, groups_loss, ppo_loss,
                                 stat_row)
from gpurl.algos.update_step import apply_gradient, gradient_autograd, gradient_compiled
from gpurl.multigpu.placement import LocalComm
from gpurl.train import Trainer, build_config

from test_train_ppo import TINY

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
    terms = ppo_loss(policy, mb, 1, torch.tensor(0.0), torch.tensor(1.0), coef)
    loss, stats = terms.loss, stat_row(terms)
    ratio = 0.75 / 0.5                               # 1.5, clipped to 1.2; advantage > 0: min(1.5, 1.2)
    pg = -1.2
    v_loss = 0.5 * max((2.0 - 1.0) ** 2, (1.7 - 1.0) ** 2)   # clipped value 1.5 + 0.2
    entropy = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    want = [pg - 0.05 * entropy + 0.7 * v_loss, pg, v_loss, entropy, (ratio - 1) - math.log(ratio), 1.0]
    torch.testing.assert_close(stats, torch.tensor(want), rtol=1e-6, atol=1e-6)
    assert loss.item() == pytest.approx(want[0], rel=1e-6)
    assert terms.pg_loss.item() == pytest.approx(pg, rel=1e-6) and terms.v_loss.item() == pytest.approx(v_loss)
    assert terms.entropy.item() == pytest.approx(entropy, rel=1e-6) and terms.clipfrac.item() == 1.0
    assert STAT_NAMES == ("loss", "pg_loss", "v_loss", "entropy", "approx_kl", "clipfrac")  # the log's columns


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


def tiny_trainer(**overrides) -> Trainer:
    """A tiny Tag (two trained groups, frame stacking, truncation) whose rollout acts eagerly, so trainers of
    different learner backends see the same samples."""
    values = dict(env="tag_continuous", env_params=TINY, num_envs=4, rollout_len=8, iters=3, epochs=2, minibatches=3,
                  eval_episodes=0, seed=5, progress=False, device="cpu", policy_backend="eager", max_grad_norm=0.05,
                  frame_stack=2)
    values.update(overrides)
    return Trainer(build_config(**values))


def packed_epoch(trainer: Trainer):
    """The learner's objective and one epoch of its minibatches, shuffled from a fresh rollout."""
    learner, s = trainer.algo.learner, trainer.storage
    trainer.rollout()
    learner._build(s, trainer.learn_context)
    advantages, returns = learner.advantages(s)
    learner.samples.pack(s, advantages, returns, learner.nets, learner.value_norms)
    learner.samples.shuffle(learner.seed, torch.tensor([3]))
    inputs = [learner.samples.group_inputs(name, torch.tensor([[0.2, 1.5]] * 3)) for name in learner.nets]
    return learner, inputs


@pytest.mark.parametrize("algo", ["ppo", "mappo"])
def test_the_compiled_gradient_is_the_autograd_gradient(algo):
    """One minibatch of the learner's objective: its gradient by torch.func inside one compiled region, and
    by autograd through the eager objective: the same flat gradient and statistics."""
    learner, inputs = packed_epoch(tiny_trainer(algo=algo, learner_backend="compiled"))
    for m in learner.minibatch_ids:
        args = (learner.objective, learner.flat, "trainable.", m, inputs)
        want, want_stats = gradient_autograd(*args)
        got, got_stats = gradient_compiled[False](*args)
        assert want.shape == learner.flat.param.shape and want.abs().max() > 0
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6 * want.abs().max().item())
        torch.testing.assert_close(got_stats, want_stats, rtol=1e-5, atol=1e-6)


def test_whole_update_compiled_equals_eager():
    """Two epochs of three minibatches for two groups, the clip binding: the compiled and eager learners land
    on the same parameters and statistics from the same rollout."""
    trainers = [tiny_trainer(learner_backend=b, lr=1e-4) for b in ("eager", "compiled")]
    stats = [t.iterate() for t in trainers]
    (pe, pc) = (t.algo.flat.param.detach() for t in trainers)
    assert not torch.equal(pe, trainers[0].algo.flat.param.new_zeros(pe.shape))
    torch.testing.assert_close(pc, pe, rtol=0, atol=1e-6)
    torch.testing.assert_close(stats[1], stats[0], rtol=1e-4, atol=1e-6)


def test_flat_parameters_stay_views_through_updates():
    """After whole updates every module parameter still lives in the flat parameter, holding what Adam wrote."""
    trainer = tiny_trainer(learner_backend="compiled")
    before = trainer.algo.flat.param.detach().clone()
    trainer.iterate()
    flat = trainer.algo.flat
    assert not torch.equal(flat.param.detach(), before)
    offset = 0
    for p in trainer.algo.trainable.parameters():
        if p.numel():  # an empty tensor (a categorical policy's log_std) has no storage to share
            assert p.data_ptr() == flat.param[offset:].data_ptr(), "a parameter stopped being a view"
            assert torch.equal(p.detach().reshape(-1), flat.param.detach()[offset:offset + p.numel()])
        offset += p.numel()
    assert offset == flat.param.numel()


def test_clipping_is_clip_grad_norm_per_network_and_adam_is_torch_adam():
    """apply_gradient against its references: each network's part of the gradient clipped as
    nn.utils.clip_grad_norm_ clips it alone, then torch.optim.Adam's step, over steps with a changing learning
    rate (the learning rate a device tensor); and Adam's state dict loads both ways."""
    nets = torch.nn.ModuleDict({"a": torch.nn.Linear(5, 3), "b": torch.nn.Linear(2, 4)})
    flat = FlatParameters(nets)
    reference = [p.detach().clone().requires_grad_() for p in nets.parameters()]
    adam = FlatAdam(flat.data, 1e-2, eps=1e-5)
    torch_adam = torch.optim.Adam(reference, lr=1e-2, eps=1e-5)
    g = torch.Generator().manual_seed(0)
    for k in range(5):
        grad = torch.randn(flat.param.shape, generator=g) * (3.0 if k % 2 else 0.01)
        lr = 1e-2 * (1 - k / 5)
        adam.lr.fill_(lr)
        apply_gradient(flat, adam, grad, max_grad_norm=0.5)
        for p, part in zip(reference, grad.split(flat.sizes)):
            p.grad = part.view(p.shape).clone()
        torch.nn.utils.clip_grad_norm_(reference[:2], 0.5)
        torch.nn.utils.clip_grad_norm_(reference[2:], 0.5)
        for group in torch_adam.param_groups:
            group["lr"] = lr
        torch_adam.step()
        torch.testing.assert_close(flat.param.detach(), torch.cat([p.detach().reshape(-1) for p in reference]),
                                   rtol=1e-5, atol=1e-6)
    copy = FlatAdam(flat.data.clone(), 1e-2, eps=1e-5)
    flat_state = torch_adam.state_dict()  # per-parameter state: not a flat one
    with pytest.raises(ValueError, match="one flat parameter"):
        copy.load_state_dict(flat_state)
    copy.load_state_dict(adam.state_dict())
    assert torch.equal(copy.exp_avg_sq, adam.exp_avg_sq) and int(copy.step) == 5
    one = torch.optim.Adam([torch.nn.Parameter(flat.data.clone())], lr=1e-2, eps=1e-5)
    one.load_state_dict(adam.state_dict())  # a flat Adam's state is a one-parameter torch Adam's
    assert torch.equal(one.state_dict()["state"][0]["exp_avg"], adam.exp_avg)


def test_adams_over_spans_step_only_their_own_and_a_per_tensor_state_converts():
    """Two FlatAdams over spans of one flat parameter, with their own learning rates, the second stepping every
    other time (the off-policy actor-critics' critics and delayed actors) against a torch.optim.Adam per span; then
    flat_adam_state turns each torch Adam's per-tensor state dict into the flat Adam's, and refuses one whose
    tensors took different step counts."""
    nets = torch.nn.ModuleDict({"a": torch.nn.Linear(5, 3), "b": torch.nn.Linear(2, 4)})
    flat = FlatParameters(nets)
    spans = [flat.spans["a"], flat.spans["b"]]
    adams = [FlatAdam(flat.data, lr, eps=1e-8, span=span) for lr, span in zip((1e-2, 3e-3), spans)]
    reference = [p.detach().clone().requires_grad_() for p in nets.parameters()]
    torch_adams = [torch.optim.Adam(reference[:2], lr=1e-2), torch.optim.Adam(reference[2:], lr=3e-3)]
    g = torch.Generator().manual_seed(0)
    for k in range(4):
        grad = torch.randn(flat.param.shape, generator=g)
        due = adams if k % 2 else adams[:1]
        apply_gradient(flat, due, grad, max_grad_norm=0.0)
        for p, part in zip(reference, grad.split(flat.sizes)):
            p.grad = part.view(p.shape).clone()
        for torch_adam in torch_adams[:len(due)]:
            torch_adam.step()
        torch.testing.assert_close(flat.param.detach(), torch.cat([p.detach().reshape(-1) for p in reference]),
                                   rtol=1e-5, atol=1e-6)
    for adam, torch_adam in zip(adams, torch_adams):
        state = flat_adam_state(torch_adam.state_dict())
        assert state["param_groups"][0]["params"] == [0]
        copy = FlatAdam(flat.data.clone(), 1.0, eps=1e-8, span=adam.span)
        copy.load_state_dict(state)
        torch.testing.assert_close(copy.exp_avg, adam.exp_avg)
        torch.testing.assert_close(copy.exp_avg_sq, adam.exp_avg_sq)
        assert copy.step.item() == adam.step.item() == torch_adam.state_dict()["state"][0]["step"].item()
    uneven = torch_adams[0].state_dict()
    uneven["state"][1]["step"] = uneven["state"][1]["step"] + 1
    with pytest.raises(ValueError, match="different step counts"):
        flat_adam_state(uneven)


def test_config_rejects_unknown_backends():
    with pytest.raises(ValueError, match="learner_backend"):
        build_config(env="simple_tag", iters=1, learner_backend="numba")
    with pytest.raises(ValueError, match="policy_backend"):
        build_config(env="simple_tag", iters=1, policy_backend="fused")
