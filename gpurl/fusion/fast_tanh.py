"""tanh for CPU float32 tensors at memory speed: a rational approximation compiled by Numba.

Why: torch's CPU ``tanh`` evaluates an accurate vectorised libm tanh at ~2.5 ns per element, slower
than the matmul it follows for PPO's 64-wide layers (a [9600, 64] x [64, 64] product takes 0.8 ms,
its tanh 1.6 ms on one core); it was a third of a simple-tag PPO iteration. XLA (the JAX peer) uses a
rational approximation instead; so does this: Eigen's [13/6] minimax rational on [-7.9053, 7.9053]
(beyond it tanh is +-1 to float32 precision), within 3e-7 of float64 tanh everywhere.

:class:`Tanh` is the ``nn.Module`` the policies use: this approximation on CPU float32 tensors
(forward and backward, ``grad * (1 - y**2)`` from the saved output), ``torch.tanh`` on every other
device and dtype (a GPU's tanh is already fast). It has no parameters, so a policy's state dict is
the same with either.
"""
from __future__ import annotations

import numba
import numpy as np
import torch
from torch import nn

# Eigen's generic_fast_tanh_float coefficients: tanh(x) ~ x * P(x^2) / Q(x^2).
_CLAMP = np.float32(7.90531110763549805)
_A1, _A3, _A5 = np.float32(4.89352455891786e-03), np.float32(6.37261928875436e-04), np.float32(1.48572235717979e-05)
_A7, _A9 = np.float32(5.12229709037114e-08), np.float32(-8.60467152213735e-11)
_A11, _A13 = np.float32(2.00018790482477e-13), np.float32(-2.76076847742355e-16)
_B0, _B2 = np.float32(4.89352518554385e-03), np.float32(2.26843463243900e-03)
_B4, _B6 = np.float32(1.18534705686654e-04), np.float32(1.19825839466702e-06)
_TINY = np.float32(4e-4)  # below it tanh(x) = x to float32 precision (and the rational loses digits)

#: Elements per parallel chunk: big enough to amortise a thread hand-off, small enough to split
#: a [9600, 64] activation over two cores.
_CHUNK = 16384


#: fastmath without "nnan"/"ninf": a NaN must come out as NaN (the trainer stops on non-finite losses).
_FAST = {"contract", "arcp", "nsz", "afn", "reassoc"}


@numba.njit(fastmath=_FAST, error_model="numpy", inline="always")
def _tanh_scalar(v):
    x = min(max(v, -_CLAMP), _CLAMP)
    x2 = x * x
    p = x2 * _A13 + _A11
    p = x2 * p + _A9
    p = x2 * p + _A7
    p = x2 * p + _A5
    p = x2 * p + _A3
    p = x2 * p + _A1
    q = x2 * _B6 + _B4
    q = x2 * q + _B2
    q = x2 * q + _B0
    return v if abs(v) < _TINY or v != v else x * p / q


@numba.njit(fastmath=_FAST, error_model="numpy", inline="always")
def _tanh_span(x, out):
    # A flat loop over one span: LLVM vectorises it (a loop with computed bounds it does not).
    for i in range(x.size):
        out[i] = _tanh_scalar(x[i])


@numba.njit(fastmath=_FAST, error_model="numpy", inline="always")
def _tanh_grad_span(grad, y, out):
    for i in range(y.size):
        out[i] = grad[i] * (np.float32(1.0) - y[i] * y[i])


# error_model="numpy": IEEE division. Numba's default raises on division by zero, and that branch
# keeps LLVM from vectorising the loop (8x slower).
@numba.njit(parallel=True, fastmath=_FAST, error_model="numpy", cache=True)
def _tanh_kernel(x, out):
    n = x.size
    for c in numba.prange((n + _CHUNK - 1) // _CHUNK):
        lo, hi = c * _CHUNK, min(n, (c + 1) * _CHUNK)
        _tanh_span(x[lo:hi], out[lo:hi])


@numba.njit(parallel=True, fastmath=_FAST, error_model="numpy", cache=True)
def _tanh_grad_kernel(grad, y, out):
    n = y.size
    for c in numba.prange((n + _CHUNK - 1) // _CHUNK):
        lo, hi = c * _CHUNK, min(n, (c + 1) * _CHUNK)
        _tanh_grad_span(grad[lo:hi], y[lo:hi], out[lo:hi])


@numba.njit(fastmath=_FAST, error_model="numpy", cache=True)
def _tanh_serial(x, out):
    _tanh_span(x, out)


@numba.njit(fastmath=_FAST, error_model="numpy", cache=True)
def _tanh_grad_serial(grad, y, out):
    _tanh_grad_span(grad, y, out)


def _flat(t: torch.Tensor) -> np.ndarray:
    return t.detach().reshape(-1).numpy()  # host-ok: CPU tensors only (_fast_path), a zero-copy view


def _fast_path(x: torch.Tensor) -> bool:
    return x.device.type == "cpu" and x.dtype == torch.float32


def _run(parallel, serial, *tensors: torch.Tensor) -> None:
    # A parallel region costs ~20 us of thread hand-off: more than the whole tanh of a rollout step's
    # few hundred rows (~4 us), so only large arrays (the update's minibatches) are split.
    arrays = [_flat(t) for t in tensors]
    (parallel if arrays[0].size >= 4 * _CHUNK else serial)(*arrays)


def tanh(x: torch.Tensor) -> torch.Tensor:
    """tanh of ``x`` without autograd: the approximation for CPU float32, else ``torch.tanh``."""
    if not _fast_path(x):
        return torch.tanh(x)
    x = x.contiguous()
    out = torch.empty_like(x)
    _run(_tanh_kernel, _tanh_serial, x, out)
    return out


class _TanhFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        out = torch.empty_like(y)
        _run(_tanh_grad_kernel, _tanh_grad_serial, grad.contiguous(), y, out)
        return out


class Tanh(nn.Module):
    """Drop-in for ``nn.Tanh``: the fast approximation (with its gradient) on CPU float32 tensors."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not _fast_path(x):
            return torch.tanh(x)
        if torch.is_grad_enabled() and x.requires_grad:
            return _TanhFunction.apply(x)
        return tanh(x)


__all__ = ["Tanh", "tanh"]
