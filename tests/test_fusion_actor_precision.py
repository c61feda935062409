"""The fused actor's dot precision, 3xTF32, against fp32 acting (the definition), on the CPU.

Triton's interpreter computes every ``tl.dot`` in plain fp32, whatever its ``input_precision``, so the
interpreter parity tests (tests/test_sim_fusion_actor.py) cannot see what the GPU's "tf32x3" dots do.
This test emulates them in torch, as the sm_90 PTX does them (the compile tier checks the PTX has the
``cvt.rna.tf32.f32`` splits and tensor-core ``mma``): each fp32 operand x is split into
hi = tf32(x) and lo = tf32(x - hi), rounded to nearest with ties away from zero (``cvt.rna``); the
product is hi_a @ hi_b + hi_a @ lo_b + lo_a @ hi_b, each TF32 x TF32 product exact in fp32.

With every linear layer of a preset-shaped policy computed this way, acting is held to acting in
float64 (the exact answer) beside fp32 acting (the definition as the CPU runs it): the same actions as
float64, log-probs and values no further from float64 than 3x fp32's own error, and within the
interpreter parity tests' 1e-4 of fp32. Plain TF32 (one product) must miss the bound by far, so the
bound can fail. The recurrent step (``gpurl.fusion.gru_actor``, whose GRU cell adds six such dots) is held
to the same bound, on its log-probs and on the state it carries to the next step.
"""
from __future__ import annotations

from unittest import mock

import pytest
import torch
from gymnasium.spaces import MultiDiscrete
from torch import nn

from gpurl.algos.nets import ActorCritic

pytestmark = pytest.mark.cpu

PARITY_TOLERANCE = 1e-4   # tests/test_sim_fusion_actor.py: kernel vs definition


def tf32(x: torch.Tensor) -> torch.Tensor:
    """fp32 -> the nearest TF32 (10 mantissa bits), ties away from zero, as ``cvt.rna.tf32.f32``."""
    bits = x.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


def matmul_3xtf32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a_hi, b_hi = tf32(a), tf32(b)
    a_lo, b_lo = tf32(a - a_hi), tf32(b - b_hi)
    return a_hi @ b_lo + a_lo @ b_hi + a_hi @ b_hi


def matmul_1xtf32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return tf32(a) @ tf32(b)


def act_with(matmul, policy: ActorCritic, obs, ids, step, seed, *state):
    """policy.act with every nn.Linear computed as ``matmul(x, W^T) + b`` (the GRU's gates too)."""
    forward = lambda layer, x: matmul(x, layer.weight.T) + layer.bias  # noqa: E731
    with mock.patch.object(nn.Linear, "forward", forward):
        action, log_prob, value, hidden = policy.act(obs, ids, step, seed, *state)
    return (action, log_prob, value) if hidden is None else (action, log_prob, hidden)


def trained_like_policy(in_dim: int, nvec: list[int], seed: int, recurrent: bool = False) -> ActorCritic:
    """A preset-shaped policy with weights and normalisation statistics away from initialisation."""
    gen = torch.Generator().manual_seed(seed)
    policy = ActorCritic(in_dim, MultiDiscrete(nvec), (64, 64), "tanh", True, generator=gen, recurrent=recurrent)
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen))
        policy.obs_norm.mean.copy_(torch.randn(in_dim, generator=gen))
        policy.obs_norm.var.copy_(torch.rand(in_dim, generator=gen) * 4 + 0.1)
    return policy


@pytest.mark.parametrize("in_dim,nvec", [(142, [21, 21]), (44, [11, 11]), (16, [5])],
                         ids=["tag-10v100", "tag-small", "simple-tag"])
def test_3xtf32_dots_act_as_fp32_does(in_dim, nvec):
    policy = trained_like_policy(in_dim, nvec, seed=in_dim)
    rows = 20_000
    gen = torch.Generator().manual_seed(1)
    obs = torch.randn(rows, in_dim, generator=gen) * 3.0
    ids, step, seed = torch.arange(rows), torch.tensor([7]), torch.tensor([2026, 11])
    with torch.no_grad():
        fp32 = policy.act(obs, ids, step, seed)[:3]
        exact = act_with(lambda a, b: (a.double() @ b.double()).float(), policy, obs, ids, step, seed)
        got = act_with(matmul_3xtf32, policy, obs, ids, step, seed)
        coarse = act_with(matmul_1xtf32, policy, obs, ids, step, seed)
    assert torch.equal(fp32[0], exact[0])
    assert torch.equal(got[0], exact[0]), f"{(got[0] != exact[0]).any(-1).sum().item()} rows act differently"
    for k, name in ((1, "log-prob"), (2, "value")):
        fp32_err = (fp32[k] - exact[k]).abs().max().item()
        err = (got[k] - exact[k]).abs().max().item()
        assert err <= 3 * fp32_err, f"3xTF32 {name}: {err:.2e} from float64, fp32 {fp32_err:.2e}"
        assert (got[k] - fp32[k]).abs().max().item() < PARITY_TOLERANCE
        assert (coarse[k] - exact[k]).abs().max().item() > 100 * fp32_err, "one TF32 product misses by far"


def test_3xtf32_dots_step_the_gru_actor_as_fp32_does():
    """The recurrent step (``gpurl.fusion.gru_actor``: the same 3xTF32 dots, six of them in the GRU cell)
    at the tag-10v100 shape, from carried states in [-1, 1] (a quarter of the rows starting an episode):
    the same actions as float64, log-probs and the new state within 3x fp32's own error of float64."""
    policy = trained_like_policy(142, [21, 21], seed=5, recurrent=True)
    rows = 20_000
    gen = torch.Generator().manual_seed(2)
    obs = torch.randn(rows, 142, generator=gen) * 3.0
    state = (torch.rand(rows, 64, generator=gen) * 2 - 1, torch.rand(rows, generator=gen) < 0.25)
    ids, step, seed = torch.arange(rows), torch.tensor([7]), torch.tensor([2026, 11])
    with torch.no_grad():
        fp32 = act_with(lambda a, b: a @ b, policy, obs, ids, step, seed, *state)
        exact = act_with(lambda a, b: (a.double() @ b.double()).float(), policy, obs, ids, step, seed, *state)
        got = act_with(matmul_3xtf32, policy, obs, ids, step, seed, *state)
    assert torch.equal(got[0], exact[0]), f"{(got[0] != exact[0]).any(-1).sum().item()} rows act differently"
    for k, name in ((1, "log-prob"), (2, "hidden state")):
        fp32_err = (fp32[k] - exact[k]).abs().max().item()
        err = (got[k] - exact[k]).abs().max().item()
        assert err <= 3 * fp32_err, f"3xTF32 {name}: {err:.2e} from float64, fp32 {fp32_err:.2e}"
        assert (got[k] - fp32[k]).abs().max().item() < PARITY_TOLERANCE
