"""Compile tier: toolkit kernels compile to sm_90 PTX without float64 and assemble with ptxas.

Env kernels get the same treatment in their own test files: ``compile_ptx_sm90(kernel, args)``,
``float64_instructions(ptx)`` must be empty, ``assemble_sm90(ptx, ptxas)`` (the ``ptxas`` fixture from
conftest skips only when no ptxas exists at all).
"""
import numpy as np
import pytest

from gpurl.kernels.aot import (
    PtxasError,
    assemble_sm90,
    compile_ptx_sm90,
    compile_triton_sm90,
    float64_instructions,
    sass_instructions,
    sass_loops,
    sass_sm90,
)
from gpurl.kernels.neighbors_team import k_nearest_team
from gpurl.kernels.program import EnvKernel, per_agent, per_agent_team
from gpurl.kernels.team import team_range, team_row

from toolkit_kernels import (
    affine_kernel,
    double_kernel,
    heading_kernel,
    promote_kernel,
    rng_args,
    rng_kernel,
    swarm_args,
    swarm_kernel,
)

pytestmark = pytest.mark.compile

X = np.zeros((2, 3), np.float32)

# (kernel, launch args after num_envs/num_agents): only dtypes/ranks matter, not sizes.
CLEAN_KERNELS = {
    "plain_write": (double_kernel, (X,)),
    "device_function": (affine_kernel, (X, np.float32(3))),
    "barrier_namedtuple": (swarm_kernel, swarm_args(2, 3)),
    "rng": (rng_kernel, rng_args(2, 3, 2, seed=1, counter=0)),
}


def _assert_sm90_clean(kernel, args, ptxas, **allow) -> None:
    ptx = compile_ptx_sm90(kernel, args)
    assert ".target sm_90" in ptx
    assert float64_instructions(ptx, **allow) == []
    cubin = assemble_sm90(ptx, ptxas)
    assert cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("name", sorted(CLEAN_KERNELS))
def test_kernel_compiles_for_sm90_without_float64(name, ptxas):
    kernel, args = CLEAN_KERNELS[name]
    _assert_sm90_clean(kernel, args, ptxas)


def test_rng_and_cos32_compile_without_float64_arithmetic(ptxas):
    # cos32's CUDA build is float32-only (gpurl.kernels.math32), not libdevice cosf: no float64 at all.
    kernel, args = heading_kernel, (np.uint64(7), np.int32(3), X)
    ptx = compile_ptx_sm90(kernel, args)
    assert float64_instructions(ptx) == []
    assemble_sm90(ptx, ptxas)


def test_float64_promotion_is_reported():
    ptx = compile_ptx_sm90(promote_kernel, (X,))
    found = float64_instructions(ptx, allow_libdevice_trig=True)
    assert any("mul" in line or "fma" in line for line in found), found


def test_float64_scan_ignores_comments_and_directives():
    ptx = "\n".join([
        "// .f64 in a comment",
        ".version 9.0",
        ".reg .f64 %fd<2>;",
        "/* mul.f64 %fd1, %fd0, %fd0; */",
        "add.f32 %f1, %f2, %f3; // not .f64",
        "cvt.f64.f32 %fd1, %f1;",
    ])
    assert float64_instructions(ptx) == ["cvt.f64.f32 %fd1, %f1;"]


def test_python_float_argument_types_as_float64():
    # Launching with a Python float types the argument float64, exactly as the dispatcher would.
    ptx = compile_ptx_sm90(affine_kernel, (X, 3.0))
    assert float64_instructions(ptx) != []


def test_wrong_arity_is_rejected():
    with pytest.raises(TypeError, match="takes 2 args"):
        compile_ptx_sm90(affine_kernel, (X,))


def test_ptxas_errors_carry_its_message(ptxas):
    with pytest.raises(PtxasError, match="sm_90"):
        assemble_sm90(".version 9.0\n.target sm_90\n.address_size 64\nthis is not ptx;\n", ptxas)


def test_triton_kernel_compiles_ahead_of_time_for_sm90():
    triton = pytest.importorskip("triton")
    import triton.language as tl

    @triton.jit
    def add(x, y, out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)

    compiled = compile_triton_sm90(
        add, {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32"}, {"BLOCK": 256}, num_warps=4
    )
    assert ".target sm_90" in compiled.asm["ptx"]
    assert float64_instructions(compiled.asm["ptx"]) == []
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


def test_one_ptxas_run_serves_a_kernels_resources_and_its_machine_code(ptxas, monkeypatch):
    import subprocess

    from gpurl.kernels import aot

    ptx = compile_ptx_sm90(double_kernel, (np.zeros((3, 5), np.float32),))
    runs = []
    real_run = subprocess.run
    monkeypatch.setattr(aot.subprocess, "run", lambda cmd, **kw: runs.append(cmd[0]) or real_run(cmd, **kw))
    aot._assembled.cache_clear()
    report = aot.ptxas_resources(ptx, ptxas)
    cubin = assemble_sm90(ptx, ptxas)
    assert runs == [ptxas]  # the second asked for what the first ran
    assert any(r.entry for r in report.values()) and cubin[:4] == b"\x7fELF"


def _knn_team(e, i, x, y, alive, k, radius, dist_row, cand_idx, cand_dist, out_idx, result):
    row = team_row(e)
    k_nearest_team(x, y, alive, e, i, k, radius, dist_row, cand_idx, cand_dist, out_idx, row)
    for s in team_range(k):
        result[e, i, s] = out_idx[row, s]


def _after(e, i, x, y, alive, k, radius, dist_row, cand_idx, cand_dist, out_idx, result):
    x[e, i] = y[e, i]


def _team_sass(ptxas, cuobjdump, *phases) -> str:
    """sm_90 machine code of a kernel of ``phases`` over a k-nearest probe's arguments (2 envs of 40 agents)."""
    f32, i32 = np.zeros((2, 40), np.float32), np.zeros((2, 40), np.int32)
    scratch = (np.zeros((8, 1), np.float32), np.zeros((8, 33), np.int32), np.zeros((8, 33), np.float32),
               np.zeros((8, 33), np.int32))
    args = (f32, f32, i32, np.int32(3), np.float32(1.0), *scratch, np.zeros((2, 40, 3), np.int32))
    kernel = EnvKernel(f"team_sass_{len(phases)}", list(phases), nargs=len(args))
    return sass_sm90(assemble_sm90(compile_ptx_sm90(kernel, args), ptxas), cuobjdump)


def test_a_team_phase_votes_in_its_warp_with_no_block_barrier_or_atomic(ptxas, cuobjdump):
    """A team is a warp (gpurl.kernels.team): k_nearest_team's counts and gather are warp votes, so an agent's
    search waits at no block barrier and claims its candidates' slots with no atomic. A second phase after it
    adds the one block barrier between phases (the count below can see one)."""
    def opcodes(*phases):
        return [text.split()[1] if text.startswith("@") else text.split()[0]
                for _, text in sass_instructions(_team_sass(ptxas, cuobjdump, *phases))]

    alone = opcodes(per_agent_team(_knn_team))
    assert any(op.startswith("VOTE") for op in alone)
    assert not [op for op in alone if op.startswith(("BAR", "ATOM", "RED"))]
    followed = opcodes(per_agent_team(_knn_team), per_agent(_after))
    assert len([op for op in followed if op.startswith("BAR")]) == 1


def test_a_team_counts_without_wraparound_and_ranks_by_shuffles(ptxas, cuobjdump):
    """k_nearest_team's counting pass loads each chunk's positions with no negative-index wraparound (Numba's
    ``j < 0 ? j + len : j``, whose sign shift SHF.R.S32.HI came with every load while the pass was a range loop
    stepped by team_size()), and its ranking of up to a warp's candidates is a loop of shuffles that reads no
    memory (it read two scratch slots a candidate)."""
    loops = sass_loops(_team_sass(ptxas, cuobjdump, per_agent_team(_knn_team)))
    # the shortest loop that votes and loads is the pass (longer "loops" hold it, or jump back from a vote's
    # divergent path laid out at the end)
    counting = min((loop for loop in loops if loop.loads and any(t.startswith("VOTE") for t in loop.instructions)),
                   key=lambda loop: len(loop.instructions))
    assert not [t for t in counting.instructions if t.startswith("SHF.R.S32.HI")], counting.instructions
    ranking = min((loop for loop in loops if any(t.startswith("SHFL") for t in loop.instructions)),
                  key=lambda loop: len(loop.instructions))
    assert ranking.loads == 0, ranking.instructions
