"""bench/peers_lib/gemm_floor.py, the matrix products bench/benchmarl_offpolicy.py records on each side and times
alone: the calls and FLOP of a linear layer's forward and backward against hand-computed counts (the timing is the
bench's, not a test's)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from peers_lib.gemm_floor import GemmRecorder  # noqa: E402

pytestmark = pytest.mark.cpu


def test_a_linear_layers_forward_and_backward_are_three_products_of_hand_counted_flop():
    layer = torch.nn.Linear(5, 3)
    x = torch.randn(4, 5, requires_grad=True)
    recorder = GemmRecorder()
    with recorder:
        layer(x).sum().backward()
        torch.relu(x)  # not a product: not counted
    # forward addmm [4, 5] x [5, 3]; backward: the input's gradient [4, 3] x [3, 5], the weight's [3, 4] x [4, 5];
    # each 2 * 4 * 5 * 3 FLOP
    assert sum(recorder.calls.values()) == 3
    assert sorted(name for name, *_ in recorder.calls) == ["addmm", "mm", "mm"]
    assert recorder.flops == 3 * 2 * 4 * 5 * 3
    batched = GemmRecorder()
    with batched:
        for _ in range(2):
            torch.bmm(torch.randn(2, 3, 4), torch.randn(2, 4, 6))
    assert batched.calls.most_common(1)[0][1] == 2 and batched.flops == 2 * (2 * 2 * 3 * 4 * 6)



def test_a_broadcast_bias_is_recorded_with_its_strides_and_replays():
    from peers_lib.gemm_floor import gemm_seconds

    recorder = GemmRecorder()
    with recorder:
        torch.addmm(torch.randn(3).expand(4, 3), torch.randn(4, 5), torch.randn(5, 3))
    (key,) = recorder.calls
    assert key[1] == ((4, 3), (0, 1))  # the bias: four rows of one
    assert gemm_seconds(recorder, min_seconds=0.001) > 0
