"""The fused CPU PPO update (gpurl.train.ppo_cpu) against autograd on group_loss, its reference: the same
gradients and statistics for every loss option, activation, depth and categorical head layout; the same
parameters after a whole ppo_update; and when it is (not) used."""
from __future__ import annotations

import gymnasium
import pytest
import torch

from gpurl.train import build_config, ppo_cpu
from gpurl.train.placement import LocalComm
from gpurl.train.policy import ActorCritic
from gpurl.train.ppo import GroupBatch, group_loss, ppo_update
from gpurl.train.ppo_cpu import FusedGroupUpdate, fused_cpu_groups, unsupported_reason

pytestmark = pytest.mark.cpu

IN_DIM = 10
SPACES = {"discrete": gymnasium.spaces.Discrete(5), "multidiscrete": gymnasium.spaces.MultiDiscrete([3, 4, 2])}


def random_policy(space, widths, activation, seed):
    torch.manual_seed(seed)
    policy = ActorCritic(IN_DIM, space, widths, activation)
    with torch.no_grad():  # away from the small-output init, so every term of the loss matters
        for p in policy.parameters():
            p.add_(torch.randn_like(p) * 0.3)
        policy.obs_norm.mean.normal_()
        policy.obs_norm.var.uniform_(0.5, 2.0)
    return policy


def random_batch(policy, space, rows, seed) -> GroupBatch:
    g = torch.Generator().manual_seed(seed)
    inputs = torch.randn(rows, IN_DIM, generator=g) * 2
    nvec = [space.n] if isinstance(space, gymnasium.spaces.Discrete) else list(space.nvec)
    actions = torch.stack([torch.randint(0, int(n), (rows,), generator=g) for n in nvec], 1)
    with torch.no_grad():
        log_prob, _, value = policy.evaluate(inputs, actions)
    old_log_prob = log_prob + 0.3 * torch.randn(rows, generator=g)
    old_value = value + 0.3 * torch.randn(rows, generator=g)
    # Some rows exactly on the policy: ratio 1 and value == old value, the ties of both maxima.
    old_log_prob[:20], old_value[20:40] = log_prob[:20], value[20:40]
    advantages = 3 * torch.randn(rows, generator=g) + 1
    returns = 2 * torch.randn(rows, generator=g)
    return GroupBatch(inputs, actions, old_log_prob, advantages, returns, old_value)


def autograd_grads(policy, batch, idx, cfg):
    policy.zero_grad(set_to_none=True)
    loss, stats = group_loss(policy, batch.rows(idx), len(idx), cfg, LocalComm())
    loss.backward()
    grads = {k: p.grad.clone() for k, p in policy.named_parameters() if p.grad is not None}
    policy.zero_grad(set_to_none=True)
    return grads, stats


def fused_grads(policy, batch, idx, cfg, stale_grads: bool = False):
    update = FusedGroupUpdate(policy, batch.inputs, batch.columns(), batch.actions, max_rows=len(idx) + 7)
    if stale_grads:
        update.flat_grad.fill_(1e3)
    stats = update.loss_and_grads(idx, len(idx), cfg, LocalComm())
    return {k: p.grad.clone() for k, p in policy.named_parameters() if p.grad is not None}, stats


def assert_same_grads(got: dict, want: dict) -> None:
    assert got.keys() >= want.keys()
    scale = max(g.abs().max().item() for g in want.values())
    for key, g in want.items():
        # atol relative to the largest gradient: a bias gradient is a sum that cancels to ~1e-5 of its
        # terms, and both sides round those terms in float32.
        torch.testing.assert_close(got[key], g, rtol=1e-4, atol=2e-6 * scale, msg=key)


LOSS_OPTIONS = {
    "clipped": dict(clip_coef=0.2, clip_vloss=True, norm_adv=True),
    "unclipped-value": dict(clip_coef=0.2, clip_vloss=False, norm_adv=False),
    "no-clipping": dict(clip_coef=0.0, clip_vloss=True, norm_adv=True),
}


@pytest.mark.parametrize("options", sorted(LOSS_OPTIONS))
@pytest.mark.parametrize("space", sorted(SPACES))
@pytest.mark.parametrize("activation,widths", [("tanh", (64, 64)), ("relu", (64, 64)), ("tanh", (32,)),
                                               ("relu", (16, 24, 8))])
def test_gradients_and_stats_match_autograd(options, space, activation, widths):
    cfg = build_config(env="simple_tag", iters=1, ent_coef=0.05, vf_coef=0.7, **LOSS_OPTIONS[options])
    policy = random_policy(SPACES[space], widths, activation, seed=1)
    batch = random_batch(policy, SPACES[space], rows=700, seed=2)
    idx = torch.cat([torch.arange(40), torch.randperm(660, generator=torch.Generator().manual_seed(3))[:260] + 40])
    want, want_stats = autograd_grads(policy, batch, idx, cfg)
    got, got_stats = fused_grads(policy, batch, idx, cfg)
    assert_same_grads(got, want)
    torch.testing.assert_close(got_stats, want_stats, rtol=1e-5, atol=1e-6)


def test_every_gradient_element_is_rewritten():
    """Gradients are written, not accumulated: stale values in .grad must not leak into the update."""
    cfg = build_config(env="simple_tag", iters=1)
    policy = random_policy(SPACES["discrete"], (64, 64), "tanh", seed=4)
    batch = random_batch(policy, SPACES["discrete"], rows=300, seed=5)
    idx = torch.arange(300)
    want, _ = autograd_grads(policy, batch, idx, cfg)
    got, _ = fused_grads(policy, batch, idx, cfg, stale_grads=True)
    assert_same_grads(got, want)


@pytest.mark.parametrize("activation,widths", [("tanh", (64, 64)), ("relu", (32,)), ("tanh", (16, 24, 8))])
def test_a_minibatch_in_blocks_matches_autograd(monkeypatch, activation, widths):
    """A minibatch larger than BLOCK_ROWS runs in equal blocks whose gradients and statistics are summed
    (here 300 rows in blocks of 75; stale .grad values must not leak into the sum either)."""
    monkeypatch.setattr(ppo_cpu, "BLOCK_ROWS", 80)
    cfg = build_config(env="simple_tag", iters=1, ent_coef=0.05, vf_coef=0.7)
    policy = random_policy(SPACES["multidiscrete"], widths, activation, seed=8)
    batch = random_batch(policy, SPACES["multidiscrete"], rows=500, seed=9)
    idx = torch.cat([torch.arange(40), torch.randperm(460, generator=torch.Generator().manual_seed(3))[:260] + 40])
    want, want_stats = autograd_grads(policy, batch, idx, cfg)
    got, got_stats = fused_grads(policy, batch, idx, cfg, stale_grads=True)
    assert_same_grads(got, want)
    torch.testing.assert_close(got_stats, want_stats, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("max_grad_norm", [0.0, 0.05])  # 0.05: clipping binds on every step here
def test_whole_update_matches_autograd_update(max_grad_norm):
    """ppo_update through both paths, with SGD (no Adam normalisation to magnify rounding): the same
    parameters after two epochs of two minibatches for two groups (gradient clipping included), and
    the same statistics."""
    cfg = {name: build_config(env="simple_tag", iters=1, epochs=2, minibatches=2, max_grad_norm=max_grad_norm,
                              learner_backend=name) for name in ("torch", "auto")}
    spaces = {"a": SPACES["discrete"], "b": SPACES["multidiscrete"]}
    start = {k: random_policy(space, (32, 32), "tanh", seed=i) for i, (k, space) in enumerate(spaces.items())}
    batches = {k: random_batch(start[k], spaces[k], rows=400, seed=10 + i) for i, k in enumerate(spaces)}
    results = {}
    for name in ("torch", "auto"):
        policies = torch.nn.ModuleDict({k: random_policy(space, (32, 32), "tanh", seed=i)
                                        for i, (k, space) in enumerate(spaces.items())})
        optimizer = torch.optim.SGD(policies.parameters(), lr=0.1)
        stats = ppo_update(policies, optimizer, batches, cfg[name], torch.Generator().manual_seed(7))
        results[name] = (policies.state_dict(), stats)
    (params_t, stats_t), (params_f, stats_f) = results["torch"], results["auto"]
    for key in params_t:
        torch.testing.assert_close(params_f[key], params_t[key], rtol=1e-4, atol=1e-5, msg=key)
    for k in spaces:
        torch.testing.assert_close(stats_f[k], stats_t[k], rtol=1e-4, atol=1e-5)


def test_an_empty_shard_of_a_minibatch_gives_zero_gradients():
    cfg = build_config(env="simple_tag", iters=1)
    policy = random_policy(SPACES["discrete"], (16,), "tanh", seed=6)
    batch = random_batch(policy, SPACES["discrete"], rows=50, seed=7)
    _, stats = fused_grads(policy, batch, torch.zeros(0, dtype=torch.int64), cfg)
    assert all(torch.count_nonzero(p.grad) == 0 for p in policy.parameters() if p.numel())
    assert torch.count_nonzero(stats) == 0


def test_which_runs_use_it(monkeypatch):
    policies = torch.nn.ModuleDict({"a": random_policy(SPACES["discrete"], (16,), "tanh", seed=0)})
    batches = {"a": random_batch(policies["a"], SPACES["discrete"], rows=40, seed=1)}
    sizes = {"a": 40}
    assert fused_cpu_groups(policies, batches, sizes, build_config(env="simple_tag", iters=1)) is not None
    assert fused_cpu_groups(policies, batches, sizes,
                            build_config(env="simple_tag", iters=1, learner_backend="torch")) is None
    box = ActorCritic(IN_DIM, gymnasium.spaces.Box(-1, 1, (2,)))
    assert "not categorical" in unsupported_reason(box)
    assert unsupported_reason(torch.nn.Linear(2, 2)) is not None
    # A Trainer on the CPU takes it (a silent fall-back to autograd would lose the speed unnoticed).
    from gpurl.train import Trainer
    from gpurl.train import ppo_cpu

    calls = []
    original = ppo_cpu.FusedGroupUpdate.loss_and_grads
    monkeypatch.setattr(ppo_cpu.FusedGroupUpdate, "loss_and_grads",
                        lambda self, *a, **k: calls.append(1) or original(self, *a, **k))
    cfg = build_config("simple-tag", num_envs=4, rollout_len=5, iters=1, eval_episodes=0, device="cpu",
                       checkpoint_every=0, progress=False)
    trainer = Trainer(cfg)
    trainer.read_losses(trainer.iterate())
    assert len(calls) == cfg.epochs * cfg.minibatches * len(trainer.trained)


def test_config_rejects_an_unknown_learner_backend():
    with pytest.raises(ValueError, match="learner_backend"):
        build_config(env="simple_tag", iters=1, learner_backend="jax")


def test_vectorisable_exp_and_log_are_accurate():
    """exp32 / log32 (the head pass's softmax) against float64 numpy: exp within 3 ulp over its whole
    float32 range, log within 2e-7 relative (1e-6 absolute near 1) over 1e-30 .. 1e30; NaN stays NaN."""
    import numba
    import numpy as np

    from gpurl.fusion.learner_cpu import exp32, log32

    @numba.njit
    def apply(f, x):
        out = np.empty_like(x)
        for i in range(x.size):
            out[i] = f(x[i])
        return out

    x = np.linspace(-87, 88, 1_000_003).astype(np.float32)
    want = np.exp(x.astype(np.float64))
    assert np.max(np.abs(apply(exp32, x) - want) / want) < 3 * 2.0 ** -23
    assert apply(exp32, np.array([-200.0], np.float32))[0] < 1e-37
    x = np.geomspace(1e-30, 1e30, 1_000_003).astype(np.float32)
    got, want = apply(log32, x), np.log(x.astype(np.float64))
    assert np.max(np.abs(got - want) / np.maximum(np.abs(want), 5.0)) < 2e-7
    assert np.isnan(apply(exp32, np.array([np.nan], np.float32))[0])
    assert np.isnan(apply(log32, np.array([np.nan], np.float32))[0])
