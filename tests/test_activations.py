"""The policies' tanh (gpurl.fusion.activations), one rational function, against float64 tanh: values,
gradient, NaN; and its compiled form against the eager one. (The Triton twin is held to it through
the fused actor in tests/test_sim_fusion_actor.py.)"""
import math

import pytest
import torch

from gpurl.algos.compiling import compile_step
from gpurl.fusion.activations import Tanh, rational_tanh, tanh

pytestmark = pytest.mark.cpu

POINTS = torch.cat([torch.linspace(-12, 12, 1_000_003), torch.logspace(-30, 1, 10_000), -torch.logspace(-30, 1, 10_000),
                    torch.tensor([0.0, 4e-4, -4e-4, 7.9053111, -7.9053111, 1e30, -1e30])])


def test_values_within_4e7_of_float64_tanh_everywhere():
    y = rational_tanh(POINTS)
    err = (y.double() - torch.tanh(POINTS.double())).abs()
    assert err.max().item() < 4e-7, f"worst at x={POINTS[err.argmax()].item()}"
    assert y.abs().max().item() <= 1.0
    # relative accuracy near zero too (tanh(x) ~ x there)
    small = POINTS.abs() < 1e-2
    rel = err[small] / POINTS[small].double().abs().clamp(min=1e-38)
    assert rel.max().item() < 1e-6


def test_non_finite_inputs():
    y = tanh(torch.tensor([math.nan, math.inf, -math.inf]))
    assert math.isnan(y[0].item())
    assert abs(y[1].item() - 1.0) < 3e-7 and abs(y[2].item() + 1.0) < 3e-7


def test_module_gradient_is_one_minus_y_squared():
    x = (torch.randn(333, 17, generator=torch.Generator().manual_seed(0)) * 3).requires_grad_()
    g = torch.randn(333, 17, generator=torch.Generator().manual_seed(1))
    Tanh()(x).backward(g)
    ref = g * (1 - torch.tanh(x.detach().double()) ** 2)
    assert torch.allclose(x.grad.double(), ref, atol=2e-6)


def test_compiled_tanh_equals_eager_within_float32_rounding():
    compiled = compile_step(rational_tanh)
    got, want = compiled(POINTS), rational_tanh(POINTS)
    # FMA contraction in the compiled loop rounds differently in the last bits: both within 4e-7 of tanh.
    assert (got.double() - torch.tanh(POINTS.double())).abs().max().item() < 4e-7
    assert (got - want).abs().max().item() < 8e-7
    assert math.isnan(compiled(torch.tensor([math.nan])).item())
