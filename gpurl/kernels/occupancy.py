"""Theoretical occupancy on sm_90 (H100) and the ``ptxas -v`` resource report, without a GPU.

:func:`occupancy` is the CUDA occupancy calculator's arithmetic (``cuda_occupancy.h``, the header behind
``cudaOccupancyMaxActiveBlocksPerMultiprocessor`` and the Nsight Compute "Occupancy" section), for one
kernel launched with ``threads`` threads per block that ptxas gave ``registers`` registers per thread and
``shared_bytes`` of shared memory per block. :func:`block_limits` says which per-block launch limits a
launch breaks (empty: it launches). :func:`parse_ptxas_verbose` reads what ``ptxas -v`` prints (registers,
spills, stack frame, shared and constant memory per function).

Every number is theoretical: the fraction of the SM's 64 warp slots that resident blocks could fill.
Achieved occupancy (tail effects, a grid smaller than the machine, divergence) needs a profiler on a GPU.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SmLimits:
    """Per-SM and per-block limits of one GPU architecture (defaults: sm_90, H100 SXM/PCIe).

    Values from the CUDA C Programming Guide's "Technical Specifications per Compute Capability" table
    and ``cuda_occupancy.h`` (CUDA 13.0) for compute capability 9.0.
    """

    warp_size: int = 32
    max_threads_per_sm: int = 2048
    max_warps_per_sm: int = 64
    max_blocks_per_sm: int = 32
    max_threads_per_block: int = 1024
    registers_per_sm: int = 65536
    registers_per_block: int = 65536
    max_registers_per_thread: int = 255
    #: Registers are allocated per warp in units of 256 (regs x 32 rounded up to 256).
    register_allocation_unit: int = 256
    #: The register file is split over 4 sub-partitions (one per warp scheduler); a warp's registers
    #: come from one of them, so warps per SM = 4 x floor(16384 / registers per warp).
    register_sub_partitions: int = 4
    #: Shared memory the SM can give blocks (the largest carveout: 228 KiB of the 256 KiB L1/shared).
    shared_per_sm: int = 228 * 1024
    #: Static shared memory per block, and the default limit of static + dynamic without opt-in.
    shared_per_block_static: int = 48 * 1024
    #: Static + dynamic shared memory per block with cudaFuncAttributeMaxDynamicSharedMemorySize opt-in.
    shared_per_block_optin: int = 227 * 1024
    #: Shared memory the driver reserves for every resident block (compute capability >= 8.0).
    shared_reserved_per_block: int = 1024
    shared_allocation_unit: int = 128


SM90 = SmLimits()


@dataclass(frozen=True)
class Occupancy:
    """Resident blocks per SM and the fraction of warp slots they fill, with what limits them.

    limits: the blocks per SM each resource allows (``warps``, ``registers``, ``shared``, ``blocks``);
    limiter: the names of those that reach ``blocks_per_sm`` (several when they tie); occupancy in [0, 1].
    """

    blocks_per_sm: int
    warps_per_block: int
    warps_per_sm: int
    occupancy: float
    limiter: tuple[str, ...]
    limits: dict[str, int] = field(default_factory=dict)


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def occupancy(threads: int, registers: int, shared_bytes: int = 0, limits: SmLimits | None = None) -> Occupancy:
    """Theoretical occupancy of blocks of ``threads`` threads, ``registers`` per thread (from ptxas) and
    ``shared_bytes`` of shared memory per block (static + dynamic), following the CUDA occupancy
    calculator (``cuda_occupancy.h``: cudaOccMaxBlocksPerSMWarpsLimit / RegsLimit / SmemLimit and
    cudaOccMaxBlocksPerMultiprocessor, partitioned global caching off):

    - warps: a block holds ceil(threads / 32) warps; 64 warp slots per SM -> floor(64 / warps) blocks.
    - registers: a warp is given regs x 32 registers rounded up to 256; each of the 4 sub-partitions
      holds floor(16384 / that) warps -> floor(4 x that / warps) blocks. A block whose allocation exceeds
      65536 (counting its warps rounded up to a multiple of 4, the hardware's check) or a thread with more
      than 255 registers does not launch (0 blocks). 0 registers: no register limit.
    - shared memory: the block's bytes + 1 KiB reserved, rounded up to 128 B; floor(228 KiB / that)
      blocks. More than 48 KiB (+1 KiB) needs the opt-in; more than 227 KiB (+1 KiB) does not launch.
    - blocks: at most 32 resident blocks per SM.

    The blocks per SM is the smallest of the four; occupancy = blocks x warps per block / 64.
    limits: another architecture's :class:`SmLimits` (default :data:`SM90`).
    """
    if threads <= 0:
        raise ValueError(f"threads must be > 0, got {threads}")
    if registers < 0 or shared_bytes < 0:
        raise ValueError(f"registers and shared_bytes must be >= 0, got {registers}, {shared_bytes}")
    L = limits or SM90
    warps = -(-threads // L.warp_size)
    by = {"blocks": L.max_blocks_per_sm}
    by["warps"] = 0 if threads > L.max_threads_per_block else L.max_warps_per_sm // warps
    if registers == 0:
        by["registers"] = L.max_blocks_per_sm
    else:
        per_warp = _round_up(registers * L.warp_size, L.register_allocation_unit)
        assumed = per_warp * _round_up(warps, L.register_sub_partitions)
        if registers > L.max_registers_per_thread or max(assumed, per_warp * warps) > L.registers_per_block:
            by["registers"] = 0
        else:
            warps_per_part = (L.registers_per_sm // L.register_sub_partitions) // per_warp
            by["registers"] = warps_per_part * L.register_sub_partitions // warps
    allocated = _round_up(shared_bytes + L.shared_reserved_per_block, L.shared_allocation_unit)
    if allocated > L.shared_per_block_optin + L.shared_reserved_per_block:
        by["shared"] = 0
    else:
        by["shared"] = L.shared_per_sm // allocated
    blocks = min(by.values())
    limiter = tuple(name for name in ("warps", "registers", "shared", "blocks") if by[name] == blocks)
    return Occupancy(blocks, warps, blocks * warps, blocks * warps / L.max_warps_per_sm, limiter, by)


def block_limits(threads: int, registers: int, static_shared: int = 0, dynamic_shared: int = 0,
                 limits: SmLimits | None = None) -> list[str]:
    """The per-block launch limits a launch breaks, as sentences; empty when it fits.

    threads per block <= 1024; registers per thread <= 255; registers x threads <= 65536 (the block's
    register file; also as the hardware allocates it: regs x 32 rounded up to 256 per warp, warps rounded
    up to a multiple of 4); static shared memory <= 48 KiB; static + dynamic <= 227 KiB (the opt-in
    maximum). A launch that fits has :func:`occupancy` >= 1 block per SM. limits: as for :func:`occupancy`.
    """
    L = limits or SM90
    broken = []
    if threads > L.max_threads_per_block:
        broken.append(f"{threads} threads per block > {L.max_threads_per_block}")
    if registers > L.max_registers_per_thread:
        broken.append(f"{registers} registers per thread > {L.max_registers_per_thread}")
    if registers * threads > L.registers_per_block:
        broken.append(f"{registers} registers x {threads} threads = {registers * threads} > {L.registers_per_block}")
    else:
        # The hardware's check: whole 256-register units per warp, warps rounded up to the 4 sub-partitions.
        warps = -(-threads // L.warp_size)
        assumed = (_round_up(registers * L.warp_size, L.register_allocation_unit)
                   * _round_up(warps, L.register_sub_partitions))
        if assumed > L.registers_per_block:
            broken.append(f"{registers} registers x {warps} warps allocate {assumed} > {L.registers_per_block} "
                          f"(256-register units per warp, warps rounded up to 4)")
    if static_shared > L.shared_per_block_static:
        broken.append(f"{static_shared} B static shared memory > {L.shared_per_block_static}")
    if static_shared + dynamic_shared > L.shared_per_block_optin:
        broken.append(f"{static_shared + dynamic_shared} B shared memory > {L.shared_per_block_optin} (opt-in)")
    return broken


# ---- ptxas -v -------------------------------------------------------------------------------------------

@dataclass
class PtxasResources:
    """What ``ptxas -v`` reports for one function (zeros where it printed nothing).

    entry: a kernel (``Compiling entry function``) rather than a non-inlined device function; smem:
    static shared memory bytes; cmem: bytes per constant bank (``{0: 384}``).
    """

    name: str
    entry: bool = False
    arch: str = ""
    registers: int = 0
    barriers: int = 0
    stack_frame: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    smem: int = 0
    cmem: dict[int, int] = field(default_factory=dict)

    @property
    def spills(self) -> int:
        return self.spill_stores + self.spill_loads


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(.*)$")
_ITEM = re.compile(r"(?:used )?(\d+) (barriers|bytes smem|bytes cmem\[(\d+)\])")


def parse_ptxas_verbose(text: str) -> dict[str, PtxasResources]:
    """Function name -> :class:`PtxasResources` from ``ptxas -v`` output (its stderr, or stdout + stderr).

    Understands the lines ptxas 12-13 prints per function::

        ptxas info    : Compiling entry function '_Z6kernelPf' for 'sm_90'
        ptxas info    : Function properties for _Z6kernelPf
            8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
        ptxas info    : Used 40 registers, used 1 barriers, 1024 bytes smem, 380 bytes cmem[0]

    A ``Used`` line belongs to the function last named by ``Compiling entry function`` / ``Function
    properties for``; the frame line to the one named by the ``Function properties`` line above it.
    """
    found: dict[str, PtxasResources] = {}
    current: PtxasResources | None = None
    for line in text.splitlines():
        if m := _ENTRY.search(line):
            current = found.setdefault(m.group(1), PtxasResources(m.group(1)))
            current.entry, current.arch = True, m.group(2)
        elif m := _PROPERTIES.search(line):
            current = found.setdefault(m.group(1), PtxasResources(m.group(1)))
        elif current is not None and (m := _FRAME.search(line)):
            current.stack_frame, current.spill_stores, current.spill_loads = (int(g) for g in m.groups())
        elif current is not None and (m := _USED.search(line)):
            current.registers = int(m.group(1))
            for count, what, bank in _ITEM.findall(m.group(2)):
                if what == "barriers":
                    current.barriers = int(count)
                elif what == "bytes smem":
                    current.smem = int(count)
                else:
                    current.cmem[int(bank)] = int(count)
    return found


__all__ = ["SM90", "Occupancy", "PtxasResources", "SmLimits", "block_limits", "occupancy", "parse_ptxas_verbose"]
