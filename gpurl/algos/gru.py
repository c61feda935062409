"""The recurrent actor, written once in torch: the first MLP layer, a GRU cell, then the rest of the MLP.

``gru_cell`` is the one definition of the recurrence (PyTorch's ``nn.GRUCell`` equations, gate order
reset, update, new), with the policies' rational tanh (:func:`gpurl.fusion.activations.tanh`) for the
candidate state, so the fused Triton step (``gpurl.fusion.gru_actor``) and this reference agree to
float32 rounding:

    r = sigmoid(x W_xr + b_xr + h W_hr + b_hr)
    z = sigmoid(x W_xz + b_xz + h W_hz + b_hz)
    n = tanh(x W_xn + b_xn + r * (h W_hn + b_hn))
    h' = n + z * (h - n)                       (= (1 - z) n + z h)

The hidden state entering a step is zeroed where that step's observation starts an episode (the
rollout storage's ``starts`` flags, the ones GAE uses), inside the step: the acting step and the
learner's replay of a sequence zero it in the same place.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import nn

from ..fusion.activations import ACTIVATIONS, tanh


def gru_cell(x: torch.Tensor, h: torch.Tensor, input_gates: nn.Linear, hidden_gates: nn.Linear) -> torch.Tensor:
    """One GRU step: x float32 [B, in], h [B, H] -> h' [B, H]; ``input_gates``: Linear(in, 3H),
    ``hidden_gates``: Linear(H, 3H), gate blocks in the order r, z, n."""
    gx_r, gx_z, gx_n = input_gates(x).chunk(3, -1)
    gh_r, gh_z, gh_n = hidden_gates(h).chunk(3, -1)
    r = torch.sigmoid(gx_r + gh_r)
    z = torch.sigmoid(gx_z + gh_z)
    n = tanh(gx_n + r * gh_n)
    return n + z * (h - n)


class RecurrentActor(nn.Module):
    """``in_dim -> widths[0]`` (activation) ``-> GRU(widths[0]) -> widths[1:]... -> out_dim``.

    ``step(x, h, start)``: x float32 [B, in_dim] (normalised), h float32 [B, H] the state carried in,
    start bool [B] (zero the state first) -> (head output [B, out_dim], h' [B, H]).
    ``sequence(x, h0, starts)``: x [T, B, in_dim], h0 [B, H], starts bool [T, B] -> (outputs [T, B,
    out_dim], states entering each step [T, B, H]): the step above, T times (the learner's replay,
    back-propagated through the whole sequence).
    """

    def __init__(self, in_dim: int, widths: Sequence[int], out_dim: int, activation: str, out_gain: float,
                 generator: torch.Generator | None = None):
        super().__init__()
        from .layers import mlp, orthogonal_linear

        self.hidden_size = H = widths[0]
        self.embed = nn.Sequential(orthogonal_linear(in_dim, H, math.sqrt(2), generator), ACTIVATIONS[activation]())
        self.input_gates = _gates(H, H, generator)
        self.hidden_gates = _gates(H, H, generator)
        self.head = mlp(H, widths[1:], out_dim, activation, out_gain, generator)
        #: the cell :meth:`sequence` steps with: ``gru_cell``, or its compiled fast path (a learner sets
        #: it; compiling the whole unrolled sequence would build one graph T steps long)
        self.replay_cell = gru_cell

    def step(self, x: torch.Tensor, h: torch.Tensor, start: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = h * (~start).unsqueeze(-1).to(h.dtype)
        h = gru_cell(self.embed(x), h, self.input_gates, self.hidden_gates)
        return self.head(h), h

    def sequence(self, x: torch.Tensor, h0: torch.Tensor, starts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        embedded = self.embed(x)  # the input side of every step at once: one GEMM, not T
        keep = (~starts).unsqueeze(-1).to(x.dtype)
        h, states, outputs = h0, [], []
        for t in range(x.shape[0]):
            h = h * keep[t]
            states.append(h)
            h = self.replay_cell(embedded[t], h, self.input_gates, self.hidden_gates)
            outputs.append(h)
        return self.head(torch.stack(outputs)), torch.stack(states)


def _gates(in_dim: int, hidden: int, generator: torch.Generator | None) -> nn.Linear:
    """Linear(in_dim, 3 * hidden): each gate's block orthogonal (gain 1), biases zero."""
    layer = nn.utils.skip_init(nn.Linear, in_dim, 3 * hidden)
    for block in layer.weight.data.chunk(3, 0):
        nn.init.orthogonal_(block, 1.0, generator=generator)
    nn.init.zeros_(layer.bias)
    return layer


__all__ = ["RecurrentActor", "gru_cell"]
