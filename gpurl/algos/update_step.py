"""One gradient step of any algorithm, written once as functions of device tensors: the gradient of an
objective with respect to the flat parameter vector, each network's gradient norm clipped on its own,
then Adam (:mod:`.flat_adam`).

An *objective* is an ``nn.Module`` whose parameters are the trained networks' and whose ``forward(*inputs)``
returns ``(loss, statistics)`` of one minibatch. Its gradient comes two ways from the same definition:
- :func:`gradient_autograd`: the objective runs on views of the flat ``nn.Parameter`` and
  ``torch.autograd.grad`` returns one flat gradient (eager; a recurrent objective, whose replay steps a
  compiled cell, runs this way);
- :func:`gradient_functional`: ``torch.func.grad`` of the objective as a function of the flat vector,
  which ``torch.compile`` traces together with the clip and the Adam step into one compiled region
  (:func:`train_step`): one host call per minibatch, nothing read back, no allocation the graph does not
  own, so a CUDA graph can capture it.

Nothing here reads device memory from the host, and the learning rate is a device tensor.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from .compiling import COMPILE_OPTIONS, RNG_COMPILE_OPTIONS
from .flat import FlatParameters
from .flat_adam import FlatAdam, adam_update_


def gradient_autograd(objective: nn.Module, flat: FlatParameters, prefix: str, *inputs):
    """``(gradient float32 [P], statistics)`` of ``objective(*inputs)`` at the current parameters."""
    loss, stats = torch.func.functional_call(objective, flat.views(flat.param, prefix), inputs, strict=False)
    (grad,) = torch.autograd.grad(loss, flat.param)
    return grad, stats.detach()


def gradient_functional(objective: nn.Module, flat: FlatParameters, prefix: str, *inputs):
    """:func:`gradient_autograd` by ``torch.func.grad`` (traceable by ``torch.compile`` as a whole)."""
    def loss_of(vector):
        loss, stats = torch.func.functional_call(objective, flat.views(vector, prefix), inputs, strict=False)
        return loss, stats.detach()

    return torch.func.grad(loss_of, has_aux=True)(flat.data)


@torch.no_grad()
def apply_gradient(flat: FlatParameters, adams: FlatAdam | Sequence[FlatAdam], grad: torch.Tensor,
                   max_grad_norm: float) -> None:
    """Clip each network's part of ``grad`` to norm ``max_grad_norm`` (0: no clipping) as
    ``nn.utils.clip_grad_norm_`` does, then one Adam step of the flat parameter (or one step of each of
    ``adams``, over its span: the others' spans do not move)."""
    if max_grad_norm > 0:
        parts = [grad[a:b] for a, b in flat.spans.values()]
        scales = [(max_norm_scale(torch.linalg.vector_norm(p), max_grad_norm)) for p in parts]
        grad = torch.cat([p * s for p, s in zip(parts, scales)])
    for adam in (adams,) if isinstance(adams, FlatAdam) else adams:
        start, stop = adam.span
        adam_update_(adam.param, grad[start:stop], adam.exp_avg, adam.exp_avg_sq, adam.step, adam.lr, adam.eps,
                     adam.betas)


def max_norm_scale(norm: torch.Tensor, max_norm: float) -> torch.Tensor:
    """``clip_grad_norm_``'s factor: ``min(1, max_norm / (norm + 1e-6))``."""
    return (max_norm / (norm + 1e-6)).clamp(max=1.0)


def train_step(objective: nn.Module, flat: FlatParameters, prefix: str, adam: FlatAdam | Sequence[FlatAdam],
               max_grad_norm: float, totals: torch.Tensor, *inputs) -> None:
    """Gradient, clip and Adam step of one minibatch, its statistics added to ``totals`` (one device:
    nothing to reduce between the gradient and the step)."""
    grad, stats = gradient_functional(objective, flat, prefix, *inputs)
    totals.add_(stats)
    apply_gradient(flat, adam, grad, max_grad_norm)


def _compiled(fn, options: dict = COMPILE_OPTIONS):
    return torch.compile(fn, dynamic=False, fullgraph=True, options=options)


#: The compiled fast paths (shapes are fixed for a run: no dynamic sizes, one graph per configuration), by
#: whether the objective draws from the counter RNG (:data:`~.compiling.RNG_COMPILE_OPTIONS`; an objective's
#: ``draws_noise``).
train_step_compiled = {rng: _compiled(train_step, RNG_COMPILE_OPTIONS if rng else COMPILE_OPTIONS)
                       for rng in (False, True)}
gradient_compiled = {rng: _compiled(gradient_functional, RNG_COMPILE_OPTIONS if rng else COMPILE_OPTIONS)
                     for rng in (False, True)}
apply_gradient_compiled = _compiled(apply_gradient)


class GradientStep:
    """How a learner takes one step over a minibatch: ``step(totals, *inputs)``.

    ``compiled``: the objective's gradient, the clip and Adam as compiled regions (one per minibatch on one
    device; two around the gradient reduction on several); else eager, the gradient by autograd.
    ``compile_gradient=False`` keeps the gradient eager while the clip and Adam compile (a recurrent
    objective: compiling its replay would unroll T steps into one graph). ``reduce``: called with
    ``[gradient]`` between the gradient and the step (a distribution policy's all-reduce), None on one
    device. ``adam``: one FlatAdam, or several over spans of the flat parameter (:func:`apply_gradient`).
    An objective whose ``draws_noise`` is true evaluates the counter RNG (its compile options differ).
    """

    def __init__(self, objective: nn.Module, flat: FlatParameters, prefix: str,
                 adam: FlatAdam | Sequence[FlatAdam], max_grad_norm: float, compiled: bool, reduce=None,
                 compile_gradient: bool = True):
        self.objective, self.flat, self.prefix = objective, flat, prefix
        self.adam = adam if isinstance(adam, FlatAdam) else tuple(adam)
        self.max_grad_norm, self.reduce = max_grad_norm, reduce
        self.compiled_gradient = compiled and compile_gradient
        self.compiled_apply = compiled
        self.rng = bool(getattr(objective, "draws_noise", False))

    def __call__(self, totals: torch.Tensor, *inputs) -> None:
        args = (self.objective, self.flat, self.prefix)
        if self.compiled_gradient and self.reduce is None:
            train_step_compiled[self.rng](*args, self.adam, self.max_grad_norm, totals, *inputs)
            return
        if self.compiled_gradient:
            grad, stats = gradient_compiled[self.rng](*args, *inputs)
        else:
            grad, stats = gradient_autograd(*args, *inputs)
        totals.add_(stats)
        if self.reduce is not None:
            self.reduce([grad])
        (apply_gradient_compiled if self.compiled_apply else apply_gradient)(self.flat, self.adam, grad,
                                                                             self.max_grad_norm)


__all__ = ["GradientStep", "apply_gradient", "gradient_autograd", "gradient_functional", "max_norm_scale",
           "train_step"]
