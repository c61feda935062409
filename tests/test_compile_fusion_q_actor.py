"""Compile tier: the fused epsilon-greedy actor compiles ahead of time for sm_90 without float64 or spills.

The Q-networks are built as the value-based algorithms build them (``QNetwork``: input = obs_dim *
frame_stack, the config's widths and activation) and packed as ``QActor`` packs them (``pack_q_network``),
with the launch's own constexprs and warps, so the PTX is what the GPU runs: the MPE tasks of
bench/algorithms.py (simple_spread's 18 inputs, simple_tag's adversaries' 16, 5 actions, 64 x 64 tanh),
a wide one (100 x 37 relu, 128 padded units: 16-row programs, 8 warps) and a 50-action one. Registers
and spills are read with the toolkit's ``ptxas -v`` (:func:`gpurl.kernels.aot.ptxas_resources`), printed
(``-rA`` shows them); no spill is allowed, and the dots are 3xTF32 on tensor cores as the PPO actor's.
"""
from __future__ import annotations

import inspect

import gymnasium
import pytest
import torch

from fused_actor_ptx import check_fused_actor_build
from gpurl.kernels.aot import compile_triton_sm90

pytestmark = pytest.mark.compile

triton = pytest.importorskip("triton")

from gpurl.algos.q_nets import QNetwork  # noqa: E402
from gpurl.fusion.actor import launch_warps  # noqa: E402
from gpurl.fusion.q_actor import (Q_ACTOR_SM90_SIGNATURE, pack_q_network, q_actor_constexprs,  # noqa: E402
                                  q_actor_fused_kernel)

# name: (in_dim, actions, widths, activation, expected (IP, HP, NP, BLOCK_B, warps))
NETWORKS = {
    "simple-spread": (18, 5, (64, 64), "tanh", (32, 64, 16, 64, 4)),
    "simple-tag-adversary": (16, 5, (64, 64), "tanh", (16, 64, 16, 64, 4)),
    "wide-100x37-relu": (44, 9, (100, 37), "relu", (64, 128, 32, 16, 8)),   # NP 32: see PackedPolicy
    "actions-50": (30, 50, (32,), "tanh", (32, 32, 64, 64, 4)),
}


def q_launch(name: str) -> tuple[dict, int]:
    in_dim, actions, widths, activation, expected = NETWORKS[name]
    net = QNetwork(in_dim, gymnasium.spaces.Discrete(actions), widths, activation, torch.Generator().manual_seed(0))
    p = pack_q_network(net.net, actions, activation)
    constexprs, warps = q_actor_constexprs(p), launch_warps(p)
    assert (p.IP, p.HP, p.NP, constexprs["BLOCK_B"], warps) == expected
    return constexprs, warps


def test_signature_names_every_runtime_argument():
    params = list(inspect.signature(q_actor_fused_kernel.fn).parameters)
    constexprs, _ = q_launch("simple-spread")
    assert params == list(Q_ACTOR_SM90_SIGNATURE) + list(constexprs)


@pytest.fixture(scope="module", params=list(NETWORKS))
def compiled(request):
    constexprs, warps = q_launch(request.param)
    return request.param, compile_triton_sm90(q_actor_fused_kernel, Q_ACTOR_SM90_SIGNATURE, constexprs,
                                              num_warps=warps)


def test_q_actor_compiles_for_sm90_without_float64_or_spills(compiled, ptxas):
    name, kernel = compiled
    check_fused_actor_build(kernel, "q_actor_fused_kernel", name, NETWORKS[name][4][4],
                            (r"st\.global\S*\.b64", "int64"), ptxas)
