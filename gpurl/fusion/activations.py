"""The policies' activations, written once in torch: ``tanh`` as a rational function, and ``relu``.

Why not ``torch.tanh``: on the CPU both eager torch and inductor evaluate tanh to libm accuracy, at
about twice the cost of the matrix product it follows in a 64-wide MLP. A rational approximation is
a handful of multiply-adds that inductor compiles into the same vectorised loop as the bias add
(XLA, the JAX peer's compiler, uses one too). This is Eigen's [13/6] minimax rational on [-7.9053,
7.9053] (beyond it tanh is +-1 to float32 precision), within 4e-7 of float64 tanh everywhere. The
fused Triton actor evaluates the same polynomial (``gpurl.fusion.actor``), so acting on the GPU
and its torch reference agree to float32 rounding.

The backward pass is tanh's own derivative, ``1 - y**2`` from the saved output (what ``torch.tanh``
saves too): differentiating the rational term by term would keep four intermediates alive per
element and run markedly slower under inductor.
"""
from __future__ import annotations

import torch
from torch import nn

def rational_tanh(v: torch.Tensor) -> torch.Tensor:
    """tanh of ``v`` (any float tensor), within 4e-7 of float64 tanh; NaN stays NaN.

    Eigen's generic_fast_tanh_float: x * P(x^2) / Q(x^2) with x clamped to +-7.9053. The coefficients
    are literals, not module constants: TorchDynamo cannot capture globals read inside an
    ``autograd.Function``. The Triton twin (``gpurl.fusion.actor._rational_tanh``) repeats them.
    """
    x = v.clamp(-7.90531110763549805, 7.90531110763549805)
    x2 = x * x
    p = x2 * -2.76076847742355e-16 + 2.00018790482477e-13
    p = x2 * p + -8.60467152213735e-11
    p = x2 * p + 5.12229709037114e-08
    p = x2 * p + 1.48572235717979e-05
    p = x2 * p + 6.37261928875436e-04
    p = x2 * p + 4.89352455891786e-03
    q = x2 * 1.19825839466702e-06 + 1.18534705686654e-04
    q = x2 * q + 2.26843463243900e-03
    q = x2 * q + 4.89352518554385e-03
    # Below 4e-4 tanh(x) = x to float32 precision, and the ratio would lose digits.
    return torch.where(v.abs() < 4e-4, v, x * p / q)


class _RationalTanh(torch.autograd.Function):
    # forward and setup_context apart: the form torch.func's transforms (the learner's grad) accept.
    @staticmethod
    def forward(x):
        return rational_tanh(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * (1 - y * y)


def tanh(x: torch.Tensor) -> torch.Tensor:
    """The policies' tanh (with its gradient)."""
    return _RationalTanh.apply(x)


class Tanh(nn.Module):
    """``nn.Tanh`` with :func:`tanh`: what the policies' MLPs use between layers."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return tanh(x)


ACTIVATIONS = {"tanh": Tanh, "relu": nn.ReLU}

__all__ = ["ACTIVATIONS", "Tanh", "rational_tanh", "tanh"]
