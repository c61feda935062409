"""Compile tier: the fused Box actor compiles ahead of time for sm_90 without float64 or spills.

The policies are built as the off-policy Box algorithms build them (``DeterministicActor`` for MADDPG / IDDPG /
MATD3, ``SquashedGaussianActor`` for MASAC / ISAC: input = obs_dim * frame_stack, the config's widths and
activation, the env's Box) and packed as ``BoxActor`` packs them (``pack_box_policy``), with the launch's own
constexprs and warps, so the PTX is what the GPU runs, with the noise (exploration, or the Gaussian's sample)
and without (deterministic acting): the continuous-action MPE tasks of bench/algorithms.py (simple_spread's 18
inputs, simple_tag's adversaries' 16, Box(0, 1, (5,)), 64 x 64 tanh) and a wide one (100 x 37 relu, 128 padded
units: 16-row programs, 8 warps, 32 padded outputs). Registers and spills are read with the toolkit's ``ptxas
-v`` (:func:`gpurl.kernels.aot.ptxas_resources`), printed (``-rA`` shows them); no spill is allowed, no float64
(the Box-Muller cosine is a float32 polynomial: libdevice's ``cosf`` would bring its float64 reduction), and the
dots are 3xTF32 on tensor cores as the PPO actor's.
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

from gpurl.algos.box_nets import DeterministicActor, SquashedGaussianActor  # noqa: E402
from gpurl.fusion.actor import launch_warps  # noqa: E402
from gpurl.fusion.box_actor import (BOX_ACTOR_SM90_SIGNATURE, box_actor_constexprs,  # noqa: E402
                                    box_actor_fused_kernel, pack_box_policy)

KINDS = {"deterministic": DeterministicActor, "squashed": SquashedGaussianActor}

# name: (in_dim, action dims, widths, activation, expected (IP, HP, NP, BLOCK_B, warps))
NETWORKS = {
    "simple-spread": (18, 5, (64, 64), "tanh", (32, 64, 16, 64, 4)),
    "simple-tag-adversary": (16, 5, (64, 64), "tanh", (16, 64, 16, 64, 4)),
    "wide-100x37-relu": (44, 7, (100, 37), "relu", (64, 128, 32, 16, 8)),   # NP 32: see PackedPolicy
}
CASES = [(name, kind, noise) for name in NETWORKS for kind in KINDS for noise in (True, False)]


def box_launch(name: str, kind: str, noise: bool) -> tuple[dict, int]:
    in_dim, actions, widths, activation, expected = NETWORKS[name]
    actor = KINDS[kind](in_dim, gymnasium.spaces.Box(0.0, 1.0, (actions,)), widths, activation,
                        torch.Generator().manual_seed(0))
    p = pack_box_policy(actor.net, actor.action_dims, actor.outputs_per_dim, activation)
    constexprs, warps = box_actor_constexprs(p, noise), launch_warps(p)
    assert (p.IP, p.HP, p.NP, constexprs["BLOCK_B"], warps) == expected
    assert constexprs["SQUASHED"] == (kind == "squashed") and constexprs["NOISE"] == noise
    return constexprs, warps


def test_signature_names_every_runtime_argument():
    params = list(inspect.signature(box_actor_fused_kernel.fn).parameters)
    constexprs, _ = box_launch("simple-spread", "deterministic", True)
    assert params == list(BOX_ACTOR_SM90_SIGNATURE) + list(constexprs)


@pytest.fixture(scope="module", params=CASES, ids=[f"{n}-{k}-{'noise' if z else 'no-noise'}" for n, k, z in CASES])
def compiled(request):
    constexprs, warps = box_launch(*request.param)
    return request.param, compile_triton_sm90(box_actor_fused_kernel, BOX_ACTOR_SM90_SIGNATURE, constexprs,
                                              num_warps=warps)


def test_box_actor_compiles_for_sm90_without_float64_or_spills(compiled, ptxas):
    (name, kind, noise), kernel = compiled
    label = f"{name} {kind} {'noise' if noise else 'no noise'}"
    ptx = check_fused_actor_build(kernel, "box_actor_fused_kernel", label, NETWORKS[name][4][4],
                                  (r"st\.global\S*\.b32", "float32"), ptxas)
    assert "__nv_cosf" not in ptx
