"""Compile tier: the fused recurrent actor step compiles ahead of time for sm_90 at the presets' policy
shapes without spilling, and the feed-forward actor compiles without its critic (``WITH_VALUE`` false).

The GRU policies are the presets' policies made recurrent (input = obs_dim * frame_stack, widths
(64, 64) or (64,), tanh or relu, normalisation on) and one of 32 units, with the launch's own
constexprs and warps (``gru_actor_constexprs``, ``gru_launch_warps``), so the PTX is what the GPU runs.
Registers and spills are read with the toolkit's ``ptxas -v``, printed (``-rA`` shows them), and no
spill is allowed; the dots must be 3xTF32 on tensor cores as the feed-forward actor's are. (128 units,
which no preset uses, spill a few hundred bytes: see ``gru_launch_warps``.)

The critic-less actor must not read any critic buffer nor store a value: its PTX loads none of those
kernel parameters.
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

from gpurl.algos.nets import ActorCritic  # noqa: E402
from gpurl.fusion.actor import ACTOR_SM90_SIGNATURE, actor_constexprs, actor_fused_kernel, launch_warps  # noqa: E402
from gpurl.fusion.gru_actor import (GRU_ACTOR_SM90_SIGNATURE, gru_actor_constexprs,  # noqa: E402
                                    gru_actor_fused_kernel, gru_launch_warps)
from gpurl.fusion.packing import PackedPolicy, PackedRecurrentPolicy  # noqa: E402

H100_SHARED_PER_BLOCK = 227 * 1024

# name: (in_dim, nvec, widths, activation, expected (IP, HP, NP, BLOCK_B, warps))
POLICIES = {
    "tag-10v100": (71 * 2, [21, 21], (64, 64), "tanh", (256, 64, 32, 16, 4)),
    "simple-tag": (16, [5], (64, 64), "tanh", (16, 64, 16, 16, 4)),
    "tag-small-gru-only-relu": (22 * 2, [11, 11], (64,), "relu", (64, 64, 16, 16, 4)),
    "widths-32": (30, [7], (32, 32), "tanh", (32, 32, 16, 16, 4)),
}


def gru_launch(name: str) -> tuple[dict, int]:
    in_dim, nvec, widths, activation, expected = POLICIES[name]
    policy = ActorCritic(in_dim, MultiDiscrete(nvec), widths, activation, True, recurrent=True, critic=False)
    p = PackedRecurrentPolicy(policy, activation)
    constexprs, warps = gru_actor_constexprs(p), gru_launch_warps(p)
    assert (p.IP, p.HP, p.NP, constexprs["BLOCK_B"], warps) == expected
    return constexprs, warps


def ptxas_report(ptx: str, ptxas: str, tmp_path) -> dict:
    src = tmp_path / "kernel.ptx"
    src.write_text(ptx)
    arch = re.search(r"\.target (sm_\w+)", ptx).group(1)
    done = subprocess.run([ptxas, f"-arch={arch}", "-v", "-o", str(tmp_path / "kernel.cubin"), str(src)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", done.stderr)
    return dict(arch=arch, registers=int(re.search(r"Used (\d+) registers", done.stderr).group(1)),
                stores=int(spills.group(1)), loads=int(spills.group(2)),
                stack=int(re.search(r"(\d+) bytes stack frame", done.stderr).group(1)))


def test_gru_signature_names_every_runtime_argument():
    import inspect

    params = list(inspect.signature(gru_actor_fused_kernel.fn).parameters)
    constexprs, _ = gru_launch("widths-32")
    assert params == list(GRU_ACTOR_SM90_SIGNATURE) + list(constexprs)


@pytest.fixture(scope="module", params=list(POLICIES))
def compiled(request):
    torch.manual_seed(0)
    constexprs, warps = gru_launch(request.param)
    return request.param, compile_triton_sm90(gru_actor_fused_kernel, GRU_ACTOR_SM90_SIGNATURE, constexprs,
                                              num_warps=warps)


def test_gru_kernel_compiles_for_sm90_fits_the_block_and_does_not_spill(compiled, ptxas, tmp_path):
    name, kernel = compiled
    ptx, cubin = kernel.asm["ptx"], kernel.asm["cubin"]
    assert re.search(r"\.target sm_90a?\b", ptx) and ".entry gru_actor_fused_kernel" in ptx
    assert float64_instructions(ptx) == []
    assert cubin[:4] == b"\x7fELF"
    assert "cvt.rna.tf32.f32" in ptx and "mma" in ptx, "the dots run on tensor cores, as 3xTF32"
    assert kernel.metadata.num_warps == POLICIES[name][4][4]
    assert kernel.metadata.shared <= H100_SHARED_PER_BLOCK, f"{name}: {kernel.metadata.shared} B shared"
    r = ptxas_report(ptx, ptxas, tmp_path)
    print(f"\ngru_actor_fused_kernel {name} ({r['arch']}, {kernel.metadata.num_warps} warps): {r['registers']} "
          f"registers, {r['stores']} B spill stores, {r['loads']} B spill loads, {r['stack']} B stack frame, "
          f"{kernel.metadata.shared} B shared memory")
    assert r["registers"] <= 255
    assert (r["stores"], r["loads"]) == (0, 0), f"{name}: spills {r['stores']} B stores, {r['loads']} B loads"


def test_actor_without_a_critic_compiles_without_reading_it(ptxas, tmp_path):
    policy = ActorCritic(71 * 2, MultiDiscrete([21, 21]), (64, 64), "tanh", True, critic=False)
    p = PackedPolicy(policy, "tanh")
    constexprs = actor_constexprs(p)
    assert constexprs["WITH_VALUE"] is False
    kernel = compile_triton_sm90(actor_fused_kernel, ACTOR_SM90_SIGNATURE, constexprs, num_warps=launch_warps(p))
    ptx = kernel.asm["ptx"]
    assert float64_instructions(ptx) == []
    names = list(ACTOR_SM90_SIGNATURE)
    used = {int(i) for i in re.findall(r"ld\.param\.\w+\s+%\w+,\s*\[actor_fused_kernel_param_(\d+)", ptx)}
    assert names.index("x_ptr") in used and names.index("a_w0") in used, "parameter loads not recognised"
    critic = {names[i] for i in used} & {"c_w0", "c_wh", "c_b", "c_wo", "c_bo", "v_ptr", "sv_e", "sv_i"}
    assert critic == set(), f"the critic-less kernel reads {sorted(critic)}"
    r = ptxas_report(ptx, ptxas, tmp_path)
    print(f"\nactor_fused_kernel tag-10v100 without a critic: {r['registers']} registers, {r['stores']} B spill "
          f"stores, {r['loads']} B spill loads")
    assert (r["stores"], r["loads"]) == (0, 0)
