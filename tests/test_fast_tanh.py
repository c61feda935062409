"""The CPU policies' tanh (gpurl.fusion.fast_tanh) against float64 tanh: values, gradient, NaN."""
import math

import pytest
import torch

from gpurl.fusion.fast_tanh import Tanh, tanh

pytestmark = pytest.mark.cpu


def test_values_within_3e7_of_float64_tanh_everywhere():
    x = torch.cat([torch.linspace(-12, 12, 1_000_003), torch.logspace(-30, 1, 10_000), -torch.logspace(-30, 1, 10_000),
                   torch.tensor([0.0, 4e-4, -4e-4, 7.9053111, -7.9053111, 1e30, -1e30])])
    y = tanh(x)
    err = (y.double() - torch.tanh(x.double())).abs()
    assert err.max().item() < 3e-7, f"worst at x={x[err.argmax()].item()}"
    assert y.abs().max().item() <= 1.0
    # relative accuracy near zero too (tanh(x) ~ x there)
    small = x.abs() < 1e-2
    rel = err[small] / x[small].double().abs().clamp(min=1e-38)
    assert rel.max().item() < 1e-6


def test_non_finite_inputs():
    y = tanh(torch.tensor([math.nan, math.inf, -math.inf]))
    assert math.isnan(y[0].item())
    assert abs(y[1].item() - 1.0) < 3e-7 and abs(y[2].item() + 1.0) < 3e-7


def test_module_gradient_is_one_minus_y_squared():
    torch.manual_seed(0)
    x = (torch.randn(333, 17) * 3).requires_grad_()
    g = torch.randn(333, 17)
    Tanh()(x).backward(g)
    ref = g * (1 - torch.tanh(x.detach().double()) ** 2)
    assert torch.allclose(x.grad.double(), ref, atol=2e-6)


def test_non_contiguous_input_and_other_dtypes_fall_back_exactly():
    x = torch.randn(64, 10).t()                    # a transposed view
    assert (tanh(x) - torch.tanh(x)).abs().max().item() < 3e-7
    x64 = torch.randn(50, dtype=torch.float64)
    assert torch.equal(tanh(x64), torch.tanh(x64))  # not float32: torch.tanh itself
    assert torch.equal(Tanh()(x64), torch.tanh(x64))
