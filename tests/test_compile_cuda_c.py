"""Compile tier: every CUDA C source compiles to sm_90 PTX with no float64 and assembles with ptxas.

Sources: tag_gridworld.cu (the built-in env's CUDA C build), the loader tests' kernels (gpurl.cuh's RNG
and a shared-memory reduction) and the CUDA C blocks of docs/cuda_c.md. Compilers: NVRTC (CuPy's binding,
what CudaCModule compiles with on a GPU) and nvcc (`nvcc -ptx -arch=sm_90`), with the same options.
Cost: about 3 s in all (NVRTC ~0.3 s, nvcc ~1 s per source).
"""
from __future__ import annotations

import re
import shutil

import pytest

from gpurl.envs.tag_gridworld.cuda_c import KERNEL, SOURCE
from gpurl.kernels.aot import assemble_sm90, float64_instructions
from gpurl.kernels.cuda_c import CudaCCompileError, compile_cuda_c_sm90, kernel_signatures

import cuda_c_kernels

pytestmark = pytest.mark.compile

COMPILERS = ["nvrtc", pytest.param("nvcc", marks=pytest.mark.skipif(shutil.which("nvcc") is None,
                                                                   reason="no nvcc on PATH"))]


def entry_params(ptx: str, name: str) -> list[str]:
    """The .param lines of kernel ``name``'s entry in ``ptx``."""
    match = re.search(rf"\.entry\s+{name}\s*\((.*?)\)", ptx, flags=re.S)
    assert match, f"no .entry {name} in the PTX"
    return [p.strip() for p in match.group(1).split(",") if p.strip()]


@pytest.mark.parametrize("compiler", COMPILERS)
def test_tag_gridworld_cu_compiles_for_sm90_without_float64(compiler, ptxas):
    ptx = compile_cuda_c_sm90(path=SOURCE, compiler=compiler)
    assert ".target sm_90" in ptx
    params = entry_params(ptx, KERNEL)  # extern "C": the unmangled name CudaCModule looks up
    assert len(params) == len(kernel_signatures(SOURCE.read_text())[KERNEL])
    assert float64_instructions(ptx) == []
    assert "bar.sync" in ptx  # the phase barriers
    assert assemble_sm90(ptx, ptxas)[:4] == b"\x7fELF"


@pytest.mark.parametrize("compiler", COMPILERS)
def test_loader_test_kernels_and_doc_examples_compile_for_sm90_without_float64(compiler, ptxas):
    sources = [(cuda_c_kernels.SOURCE, ("rng_draws", "row_sums"))]
    sources += [(text, tuple(kernel_signatures(text))) for text in cuda_c_kernels.doc_cuda_sources()]
    assert sources[1][1] == ("walk_step",)
    for source, kernels in sources:
        ptx = compile_cuda_c_sm90(source, compiler=compiler)
        for name in kernels:
            entry_params(ptx, name)
        assert float64_instructions(ptx) == []
        assert assemble_sm90(ptx, ptxas)[:4] == b"\x7fELF"


def test_float64_in_the_obs_division_is_caught():
    # The check has teeth on this source: a double literal promotes the observation's division.
    source = SOURCE.read_text()
    exact = "row[j] = static_cast<float>(xs[j]) / g.length_f32;"
    assert exact in source
    ptx = compile_cuda_c_sm90(source.replace(exact, "row[j] = xs[j] / 10.0;"), options=[f"-I{SOURCE.parent}"])
    assert any("f64" in line for line in float64_instructions(ptx))


@pytest.mark.parametrize("compiler", COMPILERS)
def test_compile_errors_carry_the_compiler_log(compiler):
    source = '#include "gpurl.cuh"\nextern "C" __global__ void k(int n) { undefined_name(n); }\n'
    with pytest.raises(CudaCCompileError, match="undefined_name"):
        compile_cuda_c_sm90(source, compiler=compiler)
