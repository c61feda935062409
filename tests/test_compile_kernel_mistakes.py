"""Compile tier: the CUDA build's kernel mistakes name the author's function, file and line (issue 20).

``check_float64_sm90`` finds float64 in a kernel's sm_90 PTX and names the author's variable or expression
and line, read from the typed code of the phases' device functions (PTX line info names only the kernel
gpurl generates, into which NVVM inlines the author's functions). A plain Python helper and an allocation
get the same errors as on the CPU. The faulty phases are those of tests/kernel_mistakes.py.
"""
import numpy as np
import pytest

from gpurl.kernels import EnvKernel, per_agent
from gpurl.kernels.aot import check_float64_sm90, compile_ptx_sm90, float64_instructions
from gpurl.kernels.errors import KernelAllocationError, KernelFloat64Error, KernelHelperError

import kernel_mistakes as km

pytestmark = pytest.mark.compile

ARGS = (np.zeros((2, 3), np.float32), np.float32(1))
FILE = 'kernel_mistakes.py", line'


def kernel(phase) -> EnvKernel:
    return EnvKernel(f"sm90_{phase.__name__}", [per_agent(phase)], nargs=2)


def test_float64_in_the_ptx_is_traced_to_the_author_variable_and_lines():
    with pytest.raises(KernelFloat64Error) as info:
        check_float64_sm90(kernel(km.nearest), ARGS)
    message = str(info.value)
    assert "kernel 'sm90_nearest' (cuda build) computes in float64, phase 0 of 1, nearest (per agent):" in message
    assert f"{FILE} {km.line_of('int-then-float32')}, in nearest" in message
    assert f"{FILE} {km.line_of('float32-into-int')}, in nearest" in message
    assert "best_d = np.float32(0)" in message


def test_a_float_literal_and_a_python_float_argument_in_the_cuda_build():
    with pytest.raises(KernelFloat64Error, match=r"write np\.float32\(0\.1\)") as info:
        check_float64_sm90(kernel(km.shrink), ARGS)
    assert f"{FILE} {km.line_of('float-literal')}, in shrink" in str(info.value)
    with pytest.raises(KernelFloat64Error) as info:
        check_float64_sm90(kernel(km.scale_by_argument), (ARGS[0], 0.5))
    assert "in its helper scaled" in str(info.value)
    assert f"{FILE} {km.line_of('float64-parameter')}, in scaled" in str(info.value)


def test_clean_kernels_pass_and_float64_outside_the_author_code_names_the_kernel():
    for phase in (km.fine, km.uses_cos32):
        assert float64_instructions(check_float64_sm90(kernel(phase), ARGS)) == []
    ptx = check_float64_sm90(kernel(km.libdevice_cos), ARGS, allow_libdevice_trig=True)
    with pytest.raises(KernelFloat64Error, match=r"kernel 'sm90_libdevice_cos' \(cuda build\): 3 float64 PTX "
                                                 r"instructions, none from a float64 in the phases' own code "
                                                 r"\(libdevice_cos \(per agent\)\)"):
        check_float64_sm90(kernel(km.libdevice_cos), ARGS, ptx=ptx)


def test_a_plain_helper_and_an_allocation_in_the_cuda_build():
    with pytest.raises(KernelHelperError) as info:
        compile_ptx_sm90(kernel(km.chase), ARGS)
    assert f"{FILE} {km.line_of('plain-helper')}, in chase" in str(info.value)
    assert "torus_offset is a plain Python function" in str(info.value)
    with pytest.raises(KernelAllocationError) as info:
        compile_ptx_sm90(kernel(km.scratch_in_phase), ARGS)
    assert "(cuda build)" in str(info.value)
    assert f"{FILE} {km.line_of('np-zeros')}, in scratch_in_phase" in str(info.value)
