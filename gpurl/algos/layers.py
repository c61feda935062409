"""The layers every policy network is built from: orthogonally initialised linear layers and MLPs."""
from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import nn

from ..fusion.activations import ACTIVATIONS


def mlp(in_dim: int, widths: Sequence[int], out_dim: int, activation: str, out_gain: float,
        generator: torch.Generator | None = None) -> nn.Sequential:
    """Linear layers ``in_dim -> widths... -> out_dim``, orthogonal init (PPO's usual gains) drawn
    from ``generator`` (the global RNG when None; a given generator leaves the global one untouched)."""
    layers: list[nn.Module] = []
    dims = [in_dim, *widths]
    for a, b in zip(dims[:-1], dims[1:]):
        layers += [orthogonal_linear(a, b, math.sqrt(2), generator), ACTIVATIONS[activation]()]
    layers.append(orthogonal_linear(dims[-1], out_dim, out_gain, generator))
    return nn.Sequential(*layers)


def mlp_parameters(in_dim: int, widths: Sequence[int], out_dim: int) -> int:
    """Weights and biases of :func:`mlp` ``(in_dim, widths, out_dim)``, counted without building it (exact
    Python ints: a size check before allocating)."""
    dims = [in_dim, *widths, out_dim]
    return sum((a + 1) * b for a, b in zip(dims[:-1], dims[1:]))


def orthogonal_linear(in_features: int, out_features: int, gain: float, generator: torch.Generator | None) -> nn.Linear:
    # skip_init: nn.Linear's own (Kaiming) init would draw from the global RNG, only to be overwritten.
    layer = nn.utils.skip_init(nn.Linear, in_features, out_features)
    nn.init.orthogonal_(layer.weight, gain, generator=generator)
    nn.init.zeros_(layer.bias)
    return layer


__all__ = ["mlp", "mlp_parameters", "orthogonal_linear"]
