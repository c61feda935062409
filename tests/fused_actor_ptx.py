"""The compile tier's checks of a fused actor's sm_90 build (tests/test_compile_fusion_q_actor.py and
test_compile_fusion_box_actor.py): the PTX targets sm_90 with the kernel as its entry, has no float64, its dots
run on tensor cores as 3xTF32, it stores its actions as ``store`` says, the launch's warps and shared memory
are the expected ones, and ``ptxas -v`` finds no spill (registers and spills printed: ``-rA`` shows them)."""
from __future__ import annotations

import re

from gpurl.kernels.aot import float64_instructions, ptxas_resources

H100_SHARED_PER_BLOCK = 227 * 1024


def check_fused_actor_build(kernel, entry: str, label: str, warps: int, store: tuple[str, str], ptxas) -> str:
    """Assert the checks above of the compiled ``kernel`` (Triton's compiled object) of function ``entry``;
    ``store``: (a regex of its action store, what it stores). Returns the PTX."""
    ptx, cubin = kernel.asm["ptx"], kernel.asm["cubin"]
    assert re.search(r"\.target sm_90a?\b", ptx) and f".entry {entry}" in ptx
    assert float64_instructions(ptx) == []
    assert cubin[:4] == b"\x7fELF"
    assert "cvt.rna.tf32.f32" in ptx and "mma" in ptx, "the dots run on tensor cores, as 3xTF32"
    assert re.search(store[0], ptx), f"the actions are stored as {store[1]}"
    assert kernel.metadata.num_warps == warps
    assert kernel.metadata.shared <= H100_SHARED_PER_BLOCK, f"{label}: {kernel.metadata.shared} B shared"
    r = ptxas_resources(ptx, ptxas)[entry]
    print(f"\n{entry} {label} ({r.arch}, {kernel.metadata.num_warps} warps): {r.registers} registers, "
          f"{r.spill_stores} B spill stores, {r.spill_loads} B spill loads, {r.stack_frame} B stack frame, "
          f"{kernel.metadata.shared} B shared memory")
    assert r.registers <= 255
    assert r.spills == 0, f"{label}: spills {r.spill_stores} B stores, {r.spill_loads} B loads"
    return ptx
