"""Compile tier: gpurl.fusion's Triton kernels compile ahead of time for sm_90 without float64.

Compiled with the block size and warp count gae_triton launches with (``GAE_BLOCK``, ``GAE_NUM_WARPS``).
Triton targets sm_90a and assembles with its bundled ptxas; the toolkit's ptxas (``ptxas`` fixture)
re-assembles the PTX with ``-v`` to check registers and spills.
"""
from __future__ import annotations

import re
import subprocess

import pytest

from gpurl.kernels.aot import compile_triton_sm90, float64_instructions

pytestmark = pytest.mark.compile

triton = pytest.importorskip("triton")

from gpurl.fusion.gae import GAE_BLOCK, GAE_NUM_WARPS, GAE_SM90_SIGNATURE, gae_fused_kernel  # noqa: E402



@pytest.fixture(scope="module")
def gae_compiled():
    return compile_triton_sm90(gae_fused_kernel, GAE_SM90_SIGNATURE, {"BLOCK": GAE_BLOCK}, num_warps=GAE_NUM_WARPS)


def test_gae_kernel_compiles_for_sm90_without_float64(gae_compiled):
    ptx, cubin = gae_compiled.asm["ptx"], gae_compiled.asm["cubin"]
    assert re.search(r"\.target sm_90a?\b", ptx)
    assert ".entry gae_fused_kernel" in ptx
    assert float64_instructions(ptx) == []
    assert cubin[:4] == b"\x7fELF"
    # The reverse scan stays a loop (not unrolled over T) that reads inputs and writes outputs.
    assert re.search(r"ld\.global", ptx) and re.search(r"st\.global", ptx) and "bra" in ptx


def test_gae_kernel_fits_in_registers(gae_compiled, ptxas, tmp_path):
    src = tmp_path / "gae.ptx"
    src.write_text(gae_compiled.asm["ptx"])
    arch = re.search(r"\.target (sm_\w+)", gae_compiled.asm["ptx"]).group(1)
    done = subprocess.run([ptxas, f"-arch={arch}", "-v", "-o", str(tmp_path / "gae.cubin"), str(src)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    registers = int(re.search(r"Used (\d+) registers", done.stderr).group(1))
    assert "0 bytes spill stores" in done.stderr, done.stderr
    # 65536 registers / 2048 threads per SM: <= 32 keeps full occupancy, <= 64 at least half.
    assert registers <= 64, done.stderr


def test_bookkeeping_kernel_compiles_for_sm90_without_float64():
    from gpurl.fusion.bookkeeping import BOOKKEEPING_BLOCK_E, BOOKKEEPING_SM90_SIGNATURE, bookkeeping_kernel

    compiled = compile_triton_sm90(bookkeeping_kernel, BOOKKEEPING_SM90_SIGNATURE,
                                   {"BLOCK_E": BOOKKEEPING_BLOCK_E, "BLOCK_C": 8}, num_warps=4)
    ptx = compiled.asm["ptx"]
    assert ".entry bookkeeping_kernel" in ptx and float64_instructions(ptx) == []
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
