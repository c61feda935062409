"""Compile tier: the fused actor kernel compiles ahead of time for sm_90 for the presets' policies.

The constexprs come from a ``PackedPolicy`` of an ``ActorCritic`` built as the trainer builds it
(input = obs_dim * frame_stack, widths (64, 64), tanh, normalisation on) and the launch's own choices
(``block_rows``, 4 warps), so the PTX is the one the GPU runs for each preset. Every int
argument is typed i32; the step and the seed halves are read from int64 device tensors.

Registers and spills are re-read with the toolkit's ``ptxas -v`` on the PTX (arch from the PTX:
Triton emits ``sm_90a``) and printed (``pytest -s`` / ``-rA`` shows them). The kernel spills at the
moment (the fp32 ``input_precision="ieee"`` dots run on FMA units with whole tiles in registers, and
ptxas, given ``.reqntid 128``, chose 32 registers), so there is no spill assertion yet; add
``"0 bytes spill stores"`` once the kernel is tuned.
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

from gpurl.fusion.actor import ACTOR_SM90_SIGNATURE, actor_fused_kernel, block_rows  # noqa: E402
from gpurl.fusion.packing import PackedPolicy  # noqa: E402
from gpurl.algos.nets import ActorCritic  # noqa: E402

NUM_WARPS = 4
H100_SHARED_PER_BLOCK = 227 * 1024   # opt-in maximum of dynamic shared memory per block on sm_90


# preset: (obs_dim, frame_stack, nvec, expected (IP, HP, NP, BLOCK_B)); tag-5v1000 has tag-10v100's
# shapes (obs_dim 71, frame stack 2, 21 x 21 heads), so the same kernel.
PRESETS = {
    "tag-small": (22, 2, [11, 11], (64, 64, 16, 64)),
    "tag-10v100": (71, 2, [21, 21], (256, 64, 32, 32)),
    # Discrete(5) packs as one head of 5 (MultiDiscrete([5])); adversaries' rows are the wider group.
    "simple-tag": (16, 1, [5], (16, 64, 16, 64)),
    "grid-4": (21, 1, [5], (32, 64, 16, 64)),
}


def preset_constexprs(preset: str) -> dict:
    obs_dim, frame_stack, nvec, expected = PRESETS[preset]
    policy = ActorCritic(obs_dim * frame_stack, MultiDiscrete(nvec), (64, 64), "tanh", True)
    p = PackedPolicy(policy, "tanh")
    assert (p.IP, p.HP, p.NP, block_rows(p)) == expected
    return dict(IP=p.IP, HP=p.HP, NP=p.NP, HEADS=p.heads, LAYERS=p.layers, TANH=p.activation == "tanh",
                NORM_CLIP=float(p.norm_clip or 0.0), BLOCK_B=block_rows(p))


def test_signature_names_every_runtime_argument():
    import inspect

    params = list(inspect.signature(actor_fused_kernel.fn).parameters)
    constexprs = preset_constexprs("tag-small")
    assert params == list(ACTOR_SM90_SIGNATURE) + list(constexprs)


@pytest.fixture(scope="module", params=list(PRESETS))
def compiled(request):
    torch.manual_seed(0)
    constexprs = preset_constexprs(request.param)
    return request.param, compile_triton_sm90(actor_fused_kernel, ACTOR_SM90_SIGNATURE, constexprs,
                                              num_warps=NUM_WARPS)


def test_actor_kernel_compiles_for_sm90_without_float64(compiled):
    preset, kernel = compiled
    ptx, cubin = kernel.asm["ptx"], kernel.asm["cubin"]
    assert re.search(r"\.target sm_90a?\b", ptx)
    assert ".entry actor_fused_kernel" in ptx
    assert float64_instructions(ptx) == []
    assert cubin[:4] == b"\x7fELF"
    assert re.search(r"ld\.global", ptx) and re.search(r"st\.global", ptx)
    assert kernel.metadata.num_warps == NUM_WARPS
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
    print(f"\nactor_fused_kernel {preset} ({arch}, {NUM_WARPS} warps): {registers} registers, "
          f"{stores} B spill stores, {loads} B spill loads, {stack} B stack frame, "
          f"{kernel.metadata.shared} B shared memory")
    assert registers <= 255
