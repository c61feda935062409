"""sm_90 resources of one compiled kernel, and when they are a problem: registers, spills, shared memory, from
``ptxas -v``. (Part of a library: bench/kernel_inventory.py re-exports it, bench/kernel_report.py prints the
RESULT line, and the compile tier's limit checks, tests/test_compile_kernel_limits.py, use it too.)
"""
from __future__ import annotations

from dataclasses import dataclass

from gpurl.kernels.aot import ptxas_resources
from gpurl.kernels.occupancy import block_limits, occupancy

#: Spill bytes (stores, and loads, each) a kernel may have, by name, where they were read (nvdisasm line info) to
#: sit off its step. None now: tag_continuous's 8 bytes at a reset went with its team phase.
SPILL_ALLOWANCE: dict[str, int] = {}


@dataclass
class Resources:
    """sm_90 resources of one kernel: registers per thread, spills (every function of its PTX), stack
    frame, static shared memory (ptxas) and dynamic shared memory (Triton's launch), per block."""

    registers: int
    spill_stores: int
    spill_loads: int
    stack_frame: int
    static_shared: int
    dynamic_shared: int = 0
    arch: str = "sm_90"

    @property
    def spills(self) -> int:
        return self.spill_stores + self.spill_loads

    def problems(self, threads: int, kernel: str = "") -> list[str]:
        """Why ``kernel`` at ``threads`` per block is not clean: spills beyond its :data:`SPILL_ALLOWANCE`, or a
        broken per-block limit."""
        found = block_limits(threads, self.registers, self.static_shared, self.dynamic_shared)
        if max(self.spill_stores, self.spill_loads) > SPILL_ALLOWANCE.get(kernel, 0):
            found.append(f"spills: {self.spill_stores} B stores, {self.spill_loads} B loads")
        if not found and occupancy(threads, self.registers, self.static_shared + self.dynamic_shared).blocks_per_sm < 1:
            found.append("no block fits an SM")
        return found


def resources_of_ptx(ptx: str, entry: str | None = None, dynamic_shared: int = 0, ptxas: str | None = None) -> Resources:
    """:class:`Resources` of the kernel ``entry`` (the PTX's only entry when None) from ``ptxas -v``."""
    report = ptxas_resources(ptx, ptxas)
    entries = [r for r in report.values() if r.entry and (entry is None or r.name == entry)]
    if len(entries) != 1:
        raise ValueError(f"expected one entry {entry or ''} in the PTX, found {[r.name for r in entries]}")
    k = entries[0]
    return Resources(k.registers, sum(r.spill_stores for r in report.values()),
                     sum(r.spill_loads for r in report.values()), k.stack_frame, k.smem, dynamic_shared, k.arch)
