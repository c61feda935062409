"""gpurl.kernels.occupancy: sm_90 theoretical occupancy against hand-computed cases, the per-block launch
limits and the ``ptxas -v`` parser on a sample of ptxas 13's output.

Hand computation (H100: 64 warp slots, 32 blocks, 65536 registers in 4 sub-partitions of 16384, registers
given per warp in units of 256, 228 KiB shared memory per SM, 1 KiB reserved per block):
blocks/SM = min(64 // warps, 4 * (16384 // roundup(regs * 32, 256)) // warps,
228 KiB // roundup(shared + 1 KiB, 128), 32); occupancy = blocks * warps / 64.
"""
from __future__ import annotations

import pytest

from gpurl.kernels.occupancy import SM90, block_limits, occupancy, parse_ptxas_verbose

pytestmark = pytest.mark.cpu


@pytest.mark.parametrize("threads, registers, shared, blocks, occ, limiter", [
    # 8 warps x 1024 registers: 16 warps per sub-partition -> 64 warps -> 8 blocks; warps tie.
    (256, 32, 0, 8, 1.0, ("warps", "registers")),
    # 8 warps x 4096 registers: 4 warps per sub-partition -> 16 warps -> 2 blocks.
    (256, 128, 0, 2, 0.25, ("registers",)),
    # 1-warp blocks: 32 resident blocks at most -> 32 warps.
    (32, 32, 0, 32, 0.5, ("blocks",)),
    # 2-warp blocks: 64 // 2 = 32 = the block limit.
    (64, 16, 0, 32, 1.0, ("warps", "blocks")),
    # 48 KiB + 1 KiB reserved = 50176 B per block: 233472 // 50176 = 4 blocks of 4 warps.
    (128, 32, 48 * 1024, 4, 0.25, ("shared",)),
    # 40 KiB + 1 KiB = 41984: 5 blocks of 4 warps.
    (128, 32, 40 * 1024, 5, 20 / 64, ("shared",)),
    # Sub-partitions: 48 registers -> 1536 per warp, 16384 // 1536 = 10 warps each -> 40 warps -> 20 blocks
    # of 2 warps (a register file taken whole would fit 42 warps, 21 blocks).
    (64, 48, 0, 20, 40 / 64, ("registers",)),
    # Allocation granularity: 126 registers -> 4032 -> 4096 per warp, like 128 (tag_step at 110 agents).
    (128, 126, 0, 4, 0.25, ("registers",)),
    (256, 255, 0, 1, 0.125, ("registers",)),
    # A register total that does not launch: 32 warps x 4096 = 131072 > 65536.
    (1024, 128, 0, 0, 0.0, ("registers",)),
    # More threads than a block may have.
    (1056, 16, 0, 0, 0.0, ("warps",)),
    # More shared memory than the opt-in maximum.
    (128, 32, 228 * 1024, 0, 0.0, ("shared",)),
])
def test_hand_computed_occupancy(threads, registers, shared, blocks, occ, limiter):
    result = occupancy(threads, registers, shared)
    assert result.blocks_per_sm == blocks
    assert result.occupancy == pytest.approx(occ)
    assert result.warps_per_sm == blocks * -(-threads // 32)
    assert result.limiter == limiter


def test_zero_registers_and_partial_warps():
    # A block of 33 threads holds 2 warps; no registers reported means no register limit.
    result = occupancy(33, 0)
    assert (result.warps_per_block, result.blocks_per_sm, result.occupancy) == (2, 32, 1.0)
    with pytest.raises(ValueError):
        occupancy(0, 32)


def test_block_limits():
    assert block_limits(256, 64, 48 * 1024) == []
    assert block_limits(128, 32, 1024, 200 * 1024) == []  # dynamic shared memory through the opt-in
    assert len(block_limits(2048, 16)) == 1
    assert len(block_limits(512, 256)) == 2  # over 255 per thread and over 65536 per block
    assert block_limits(256, 256) == ["256 registers per thread > 255"]  # 65536 registers: the block fits
    assert "static shared" in block_limits(128, 32, 48 * 1024 + 1)[0]
    assert "opt-in" in block_limits(128, 32, 1024, 227 * 1024)[0]
    # 200 x 320 = 64000 fits the simple product, but 10 warps are allocated as 12 of 6400: 76800.
    broken = block_limits(320, 200)
    assert len(broken) == 1 and "76800" in broken[0]
    assert occupancy(320, 200).blocks_per_sm == 0
    # Every launch that fits has at least one resident block.
    for threads in (32, 96, 128, 256, 512, 1024):
        for registers in (16, 32, 64, 65, 128, 200, 255):
            if not block_limits(threads, registers):
                assert occupancy(threads, registers).blocks_per_sm >= 1, (threads, registers)


SAMPLE = """\
ptxas info    : 264 bytes gmem
ptxas info    : Compiling entry function '_Z4stepPfS_i' for 'sm_90'
ptxas info    : Function properties for _Z4stepPfS_i
    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 126 registers, used 1 barriers, 2048 bytes smem, 384 bytes cmem[0], 8 bytes cmem[2]
ptxas info    : Function properties for _Z6helperf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'actor_fused_kernel' for 'sm_90a'
ptxas info    : Function properties for actor_fused_kernel
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers
ptxas info    : Compile time = 854.478 ms
"""


def test_ptxas_verbose_parser():
    found = parse_ptxas_verbose(SAMPLE)
    assert list(found) == ["_Z4stepPfS_i", "_Z6helperf", "actor_fused_kernel"]
    step = found["_Z4stepPfS_i"]
    assert step.entry and step.arch == "sm_90"
    assert (step.registers, step.barriers, step.smem, step.cmem) == (126, 1, 2048, {0: 384, 2: 8})
    assert (step.stack_frame, step.spill_stores, step.spill_loads, step.spills) == (16, 8, 12, 20)
    helper = found["_Z6helperf"]
    assert not helper.entry and helper.registers == 0 and helper.spills == 0
    actor = found["actor_fused_kernel"]
    assert actor.entry and actor.arch == "sm_90a" and actor.registers == 32 and actor.smem == 0
    assert parse_ptxas_verbose("") == {}


def test_limits_are_h100s():
    assert (SM90.registers_per_sm, SM90.max_threads_per_sm, SM90.max_blocks_per_sm, SM90.max_warps_per_sm) == (
        65536, 2048, 32, 64)
    assert (SM90.shared_per_sm, SM90.shared_per_block_optin, SM90.shared_per_block_static) == (
        228 * 1024, 227 * 1024, 48 * 1024)
