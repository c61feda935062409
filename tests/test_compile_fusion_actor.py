"""Compile tier: the fused actor kernel compiles ahead of time for sm_90 for the presets' policies.

The constexprs come from a ``PackedPolicy`` of an ``ActorCritic`` built as the trainer builds it
(input = obs_dim * frame_stack, widths (64, 64), tanh, normalisation on) and the launch's own choices
(``actor_constexprs``, ``launch_warps``), so the PTX is the one the GPU runs for each preset; two
policies of other widths (32, and 100 x 37 and 128 x 128, which pad to 128) cover the other geometry. Every int
argument is typed i32; the step and the seed halves are read from int64 device tensors.

Registers and spills are re-read with the toolkit's ``ptxas -v`` on the PTX (arch from the PTX: Triton
emits ``sm_90a``), printed (``pytest -s`` / ``-rA`` shows them), and no spill is allowed. The dots are
3xTF32 tensor-core products (``cvt.rna.tf32.f32`` splits each operand); the first fp32 "ieee" version,
on the FMA units with whole operand tiles in registers, spilled at every preset.
"""
from __future__ import annotations

import re
import subprocess

import pytest
import torch
from gymnasium.spaces import MultiDiscrete

from gpurl.kernels.aot import compile_triton_sm90, float64_instructions

pytestmark = pytest.mark.compile

triton = pytest.importorskip("triton")

from gpurl.fusion.actor import ACTOR_SM90_SIGNATURE, actor_constexprs, actor_fused_kernel, launch_warps  # noqa: E402
from gpurl.fusion.packing import PackedPolicy  # noqa: E402
from gpurl.algos.nets import ActorCritic  # noqa: E402

H100_SHARED_PER_BLOCK = 227 * 1024   # opt-in maximum of dynamic shared memory per block on sm_90


# policy: (in_dim, nvec, widths, expected (IP, HP, NP, BLOCK_B, warps)). The presets' policies have
# in_dim = obs_dim * frame_stack; tag-5v1000 has tag-10v100's shapes (obs_dim 71, frame stack 2, 21 x 21
# heads), so the same kernel. Discrete(5) packs as one head of 5 (MultiDiscrete([5])); simple-tag's
# adversaries' rows are the wider group.
POLICIES = {
    "tag-small": (22 * 2, [11, 11], (64, 64), (64, 64, 16, 64, 4)),
    "tag-10v100": (71 * 2, [21, 21], (64, 64), (256, 64, 32, 64, 4)),
    "simple-tag": (16, [5], (64, 64), (16, 64, 16, 64, 4)),
    "grid-4": (21, [5], (64, 64), (32, 64, 16, 64, 4)),
    "widths-32": (30, [7], (32, 32), (32, 32, 16, 64, 4)),
    "widths-100x37": (44, [21, 4], (100, 37), (64, 128, 32, 16, 8)),
    "widths-128-discrete5": (30, [5], (128, 128), (32, 128, 32, 16, 8)),  # NP 16 spilled here
}


def policy_launch(name: str) -> tuple[dict, int]:
    """(constexprs, warps) of the fused actor's launch for the policy ``name``."""
    in_dim, nvec, widths, expected = POLICIES[name]
    policy = ActorCritic(in_dim, MultiDiscrete(nvec), widths, "tanh", True)
    p = PackedPolicy(policy, "tanh")
    constexprs, warps = actor_constexprs(p), launch_warps(p)
    assert (p.IP, p.HP, p.NP, constexprs["BLOCK_B"], warps) == expected
    return constexprs, warps


def test_signature_names_every_runtime_argument():
    import inspect

    params = list(inspect.signature(actor_fused_kernel.fn).parameters)
    constexprs, _ = policy_launch("tag-small")
    assert params == list(ACTOR_SM90_SIGNATURE) + list(constexprs)


@pytest.fixture(scope="module", params=list(POLICIES))
def compiled(request):
    torch.manual_seed(0)
    constexprs, warps = policy_launch(request.param)
    return request.param, compile_triton_sm90(actor_fused_kernel, ACTOR_SM90_SIGNATURE, constexprs, num_warps=warps)


def test_actor_kernel_compiles_for_sm90_without_float64(compiled):
    preset, kernel = compiled
    ptx, cubin = kernel.asm["ptx"], kernel.asm["cubin"]
    assert re.search(r"\.target sm_90a?\b", ptx)
    assert ".entry actor_fused_kernel" in ptx
    assert float64_instructions(ptx) == []
    assert cubin[:4] == b"\x7fELF"
    assert re.search(r"ld\.global", ptx) and re.search(r"st\.global", ptx)
    assert kernel.metadata.num_warps == POLICIES[preset][3][4]
    assert "cvt.rna.tf32.f32" in ptx and "mma" in ptx, "the dots run on tensor cores, as 3xTF32"
    assert kernel.metadata.shared <= H100_SHARED_PER_BLOCK, f"{preset}: {kernel.metadata.shared} B shared"


def test_actor_kernel_assembles_and_reports_registers(compiled, ptxas, tmp_path):
    preset, kernel = compiled
    ptx = kernel.asm["ptx"]
    src = tmp_path / "actor.ptx"
    src.write_text(ptx)
    arch = re.search(r"\.target (sm_\w+)", ptx).group(1)
    done = subprocess.run([ptxas, f"-arch={arch}", "-v", "-o", str(tmp_path / "actor.cubin"), str(src)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    registers = int(re.search(r"Used (\d+) registers", done.stderr).group(1))
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", done.stderr)
    stores, loads = int(spills.group(1)), int(spills.group(2))
    stack = int(re.search(r"(\d+) bytes stack frame", done.stderr).group(1))
    print(f"\nactor_fused_kernel {preset} ({arch}, {kernel.metadata.num_warps} warps): {registers} registers, "
          f"{stores} B spill stores, {loads} B spill loads, {stack} B stack frame, "
          f"{kernel.metadata.shared} B shared memory")
    assert registers <= 255
    assert (stores, loads) == (0, 0), f"{preset}: spills {stores} B stores, {loads} B loads"
