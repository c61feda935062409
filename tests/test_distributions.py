"""Policy action distributions (gpurl/algos/distributions.py) against torch.distributions, and the
ActorCritic heads (gpurl/algos/nets.py) they serve."""
from __future__ import annotations

import gymnasium
import pytest
import torch
from torch.distributions import Categorical, Normal

from gpurl.algos.distributions import Categoricals, DiagGaussian
from gpurl.algos.nets import ActorCritic
from gpurl.fusion.counter_rng import seed_tensor

pytestmark = pytest.mark.cpu

NO_LOG_STD = torch.zeros(0)

# [21, 21] takes the equal-heads path (one [B, heads, n] tensor); [3, 5, 2] the per-head split path.
HEADS = pytest.mark.parametrize("nvec", [[21, 21], [3, 5, 2]], ids=["uniform", "split"])


def torch_reference(nvec, logits, actions):
    """Sum over heads of torch.distributions.Categorical log_prob and entropy."""
    log_prob = entropy = 0
    for h, part in enumerate(logits.split(nvec, dim=-1)):
        d = Categorical(logits=part)
        log_prob = log_prob + d.log_prob(actions[:, h])
        entropy = entropy + d.entropy()
    return log_prob, entropy


@HEADS
def test_categoricals_log_prob_entropy_match_torch(nvec):
    g = torch.Generator().manual_seed(0)
    B = 16
    dist = Categoricals(nvec)
    logits = torch.randn(B, sum(nvec), generator=g) * 2
    actions = torch.stack([torch.randint(n, (B,), generator=g) for n in nvec], -1)
    log_prob, entropy = dist.log_prob_entropy(logits, NO_LOG_STD, actions)
    want_lp, want_ent = torch_reference(nvec, logits, actions)
    torch.testing.assert_close(log_prob, want_lp, rtol=0, atol=1e-5)
    torch.testing.assert_close(entropy, want_ent, rtol=0, atol=1e-5)
    assert log_prob.shape == entropy.shape == (B,)


@HEADS
def test_categoricals_sample_range_log_prob_and_frequencies(nvec):
    B = 20000
    dist = Categoricals(nvec)
    row = torch.randn(sum(nvec), generator=torch.Generator().manual_seed(1))
    logits = row.expand(B, -1).contiguous()
    actions, log_prob = dist.sample(logits, NO_LOG_STD, torch.rand(B, len(nvec), generator=torch.Generator().manual_seed(2)))

    assert actions.dtype == torch.int64 and actions.shape == (B, len(nvec))
    for h, n in enumerate(nvec):
        assert 0 <= int(actions[:, h].min()) and int(actions[:, h].max()) < n
    torch.testing.assert_close(log_prob, dist.log_prob_entropy(logits, NO_LOG_STD, actions)[0], rtol=0, atol=1e-5)
    # ~20000 draws: a frequency's standard error is <= 0.0036, so 0.02 only fails on a wrong sampler.
    for h, part in enumerate(row.split(nvec)):
        freq = torch.bincount(actions[:, h], minlength=nvec[h]).float() / B
        torch.testing.assert_close(freq, torch.softmax(part, -1), rtol=0, atol=0.02)


@HEADS
def test_categoricals_inverse_cdf_takes_the_first_action_whose_cdf_reaches_u(nvec):
    """Uniforms just below and just above a CDF step pick the actions on either side of it."""
    dist = Categoricals(nvec)
    logits = torch.randn(1, sum(nvec), generator=torch.Generator().manual_seed(3))
    cdfs = [torch.softmax(part, -1).cumsum(-1) for part in logits.split(nvec, -1)]
    for k in range(min(nvec) - 1):
        below = torch.tensor([[cdf[0, k].item() - 1e-4 for cdf in cdfs]])
        above = torch.tensor([[cdf[0, k].item() + 1e-4 for cdf in cdfs]])
        assert dist.sample(logits, NO_LOG_STD, below)[0].tolist() == [[k] * len(nvec)]
        assert dist.sample(logits, NO_LOG_STD, above)[0].tolist() == [[k + 1] * len(nvec)]


def test_categoricals_reject_empty_or_zero_heads():
    for nvec in ([], [3, 0]):
        with pytest.raises(ValueError, match="head sizes"):
            Categoricals(nvec)


def test_diag_gaussian_matches_torch_normal():
    g = torch.Generator().manual_seed(4)
    B, D = 10, 3
    dist = DiagGaussian(D)
    mean = torch.randn(B, D, generator=g)
    log_std = torch.tensor([-0.5, 0.0, 0.7])
    actions = torch.randn(B, D, generator=g) * 2
    log_prob, entropy = dist.log_prob_entropy(mean, log_std, actions)
    normal = Normal(mean, log_std.exp())
    torch.testing.assert_close(log_prob, normal.log_prob(actions).sum(-1), rtol=0, atol=1e-5)
    torch.testing.assert_close(entropy, normal.entropy().sum(-1), rtol=0, atol=1e-5)
    assert log_prob.shape == entropy.shape == (B,)


def test_diag_gaussian_sample_log_prob_and_moments():
    B, D = 20000, 3
    dist = DiagGaussian(D)
    mean = torch.tensor([1.0, -2.0, 0.0]).expand(B, D)
    log_std = torch.tensor([-0.5, 0.0, 0.7])
    actions, log_prob = dist.sample(mean, log_std, torch.rand(B, 2 * D, generator=torch.Generator().manual_seed(5)))
    assert actions.dtype == torch.float32 and actions.shape == (B, D)
    torch.testing.assert_close(log_prob, dist.log_prob_entropy(mean, log_std, actions)[0], rtol=0, atol=1e-4)
    # Standard errors are ~0.015 (means) and ~0.01 (stds) at the largest std exp(0.7) ~ 2.
    torch.testing.assert_close(actions.mean(0), mean[0], rtol=0, atol=0.06)
    torch.testing.assert_close(actions.std(0), log_std.exp(), rtol=0, atol=0.05)


SPACES = {
    "discrete": (gymnasium.spaces.Discrete(4), 1, torch.int64),
    "multidiscrete": (gymnasium.spaces.MultiDiscrete([3, 5]), 2, torch.int64),
    "box": (gymnasium.spaces.Box(-1.0, 1.0, (2,)), 2, torch.float32),
}


@pytest.mark.parametrize("name", list(SPACES))
def test_actor_critic_act_and_evaluate_shapes(name):
    space, action_dims, dtype = SPACES[name]
    policy = ActorCritic(6, space, widths=(8, 8), generator=torch.Generator().manual_seed(0))
    assert policy.action_dims == action_dims and policy.action_dtype == dtype
    B = 5
    obs = torch.randn(B, 6, generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        action, log_prob, value, _ = policy.act(obs, torch.arange(B), torch.tensor([7]), seed_tensor(1, "cpu"))
    assert action.shape == (B, action_dims) and action.dtype == dtype
    assert log_prob.shape == value.shape == (B,) and log_prob.dtype == value.dtype == torch.float32
    if dtype == torch.int64:
        high = torch.as_tensor(space.nvec if hasattr(space, "nvec") else [space.n]).view(1, -1)
        assert bool(((action >= 0) & (action < high)).all())

    new_log_prob, entropy, new_value = policy.evaluate(obs, action)
    assert new_log_prob.shape == entropy.shape == new_value.shape == (B,)
    assert new_log_prob.requires_grad and new_value.requires_grad  # evaluate is what the loss differentiates
    # Same parameters, same observations: evaluate agrees with what act sampled.
    torch.testing.assert_close(new_log_prob.detach(), log_prob, rtol=0, atol=1e-5)
    torch.testing.assert_close(new_value.detach(), value, rtol=0, atol=1e-6)


def test_actor_critic_rejects_unsupported_space_and_activation():
    with pytest.raises(TypeError, match="no policy head"):
        ActorCritic(4, gymnasium.spaces.Dict({"a": gymnasium.spaces.Discrete(2)}))
    with pytest.raises(ValueError, match="activation"):
        ActorCritic(4, gymnasium.spaces.Discrete(2), activation="gelu")
