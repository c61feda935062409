"""CPU tier: the CUDA C loader (gpurl.kernels.cuda_c) without a GPU.

- A launch without a usable CUDA device fails with a clear CudaCUnavailableError (CuPy imports without a
  GPU, but its first CUDA call would fail with a misleading driver error); importing gpurl imports no CuPy.
- Kernel parameter lists are parsed from the source, and every argument is checked against them, naming
  the kernel and the argument. The checks are the same code for CudaCModule and HostCudaCModule, so they
  are exercised here through the host build (the same CUDA C compiled with g++, run on CPU tensors).
- The host build runs gpurl.cuh's RNG bit for bit like gpurl.kernels.rng, and emulates threads, barriers,
  shared memory and atomics (a per-row reduction with several threads per block).
- docs/cuda_c.md's walk.cu example does what its NumPy reference does.

Cost: two g++ builds (~1.5 s each), one subprocess importing gpurl (~3 s).
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from gpurl.kernels.cuda_c import CParam, CudaCModule, CudaCUnavailableError, kernel_signatures, parse_params
from gpurl.kernels.cuda_c_host import HostBuildError, HostCudaCModule, find_cxx

from cuda_c_kernels import (SEEDS, SOURCE, assert_rng_matches_reference, doc_cuda_sources, rng_keys, run_rng,
                            run_walk_against_reference)

pytestmark = pytest.mark.cpu


@pytest.fixture(scope="module")
def cxx():
    """The host build's C++ compiler; skips the test when there is none."""
    path = find_cxx()
    if path is None:
        pytest.skip("no C++ compiler for the host build (install g++ or set CXX)")
    return path


@pytest.fixture(scope="module")
def host(cxx):
    return HostCudaCModule(SOURCE)


def row_sums_args(count=True, **changes):
    """Arguments of row_sums over 5 x 37 ints, by parameter name, with ``changes`` applied."""
    values = torch.arange(5 * 37, dtype=torch.int32).reshape(5, 37) - 50
    args = dict(rows=5, cols=37, scale=3, values=values, sums=torch.zeros(5, dtype=torch.int64),
                count=torch.zeros(1, dtype=torch.int32) if count else None)
    return {**args, **changes}


def test_importing_gpurl_and_the_loader_imports_no_cupy():
    code = ("import sys, gpurl, gpurl.kernels.cuda_c, gpurl.kernels.cuda_c_host, gpurl.envs.tag_gridworld.cuda_c; "
            "assert 'cupy' not in sys.modules and 'cupy_backends' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_launch_without_a_gpu_raises_a_clear_error(monkeypatch):
    cupy = pytest.importorskip("cupy")
    monkeypatch.setattr(cupy.cuda, "is_available", lambda: False)  # what a machine without a GPU reports
    module = CudaCModule(SOURCE)
    with pytest.raises(CudaCUnavailableError, match=r"CUDA GPU and driver.*cupy\.cuda\.is_available\(\) is False"):
        module.launch("row_sums", 1, 32, tuple(row_sums_args().values()))


def test_launch_on_this_machine_without_a_gpu_raises_the_same_error():
    cupy = pytest.importorskip("cupy")
    if cupy.cuda.is_available():
        pytest.skip("this machine has a GPU that CuPy can use")
    with pytest.raises(CudaCUnavailableError, match=r"cupy\.cuda\.is_available\(\) is False.*HostCudaCModule"):
        CudaCModule(SOURCE).launch("row_sums", 1, 32, tuple(row_sums_args().values()))


def test_cuda_c_env_needs_a_cuda_device():
    import gpurl

    with pytest.raises(ValueError, match="kernel_source='cuda_c'.*needs a CUDA device.*device='cpu'"):
        gpurl.make("tag_gridworld", num_envs=2, device="cpu", kernel_source="cuda_c")
    with pytest.raises(ValueError, match="kernel_source must be 'numba' or 'cuda_c'"):
        gpurl.make("tag_gridworld", num_envs=2, device="cpu", kernel_source="cuda")


def test_parameter_lists_are_parsed_from_the_source():
    source = """
    // __global__ void commented_out(int a)
    template <typename T> __global__ void templated(T* x) {}
    extern "C" __global__ void __launch_bounds__(256) k(const float* __restrict__ x, unsigned int n,
        long long offset, unsigned long long seed, bool flag, double w[], const void* any, uint8_t* bytes) {}
    struct S { int a; };
    extern "C" __global__ void untypable(S s, int** pp) {}
    """
    sigs = kernel_signatures(source)
    assert set(sigs) == {"k", "untypable"} and sigs["untypable"] is None
    assert sigs["k"] == [CParam("x", "float32", True), CParam("n", "uint32", False), CParam("offset", "int64", False),
                         CParam("seed", "uint64", False), CParam("flag", "bool", False), CParam("w", "float64", True),
                         CParam("any", "void", True), CParam("bytes", "uint8", True)]
    assert parse_params("void") == []
    with pytest.raises(ValueError, match="unknown C type 'Foo'"):
        parse_params("Foo x")


@pytest.mark.parametrize("seed", SEEDS)
def test_host_build_draws_the_rng_of_gpurl_kernels_rng(host, seed):
    keys = rng_keys()
    for below_n in (1, 7, 2**24 + 1):
        assert_rng_matches_reference(run_rng(host, seed, keys, below_n, "cpu"), seed, keys, below_n)


@pytest.mark.parametrize("block", [1, 4, 32])
def test_host_build_emulates_threads_barriers_shared_memory_and_atomics(host, block):
    args = row_sums_args()
    host.launch("row_sums", 5, block, tuple(args.values()))
    expected = (args["values"].to(torch.int64) * 3).sum(dim=1)
    torch.testing.assert_close(args["sums"], expected, rtol=0, atol=0)
    assert int(args["count"]) == 5 * block  # every emulated thread ran once
    host.launch("row_sums", 5, block, tuple(row_sums_args(count=False).values()))  # None: a null pointer
    assert host.build_log == ""  # the source compiles without warnings on the host too


@pytest.mark.parametrize("change, error, message", [
    (dict(values=torch.zeros(5, 37, dtype=torch.int64)), TypeError,
     r"row_sums argument 3 \(values\) must be a torch.int32 tensor, got torch.int64"),
    (dict(values=torch.zeros(37, 5, dtype=torch.int32).t()), ValueError,
     r"argument 3 \(values\) must be contiguous"),
    (dict(sums=torch.zeros(5, dtype=torch.int64, device="meta")), ValueError,
     r"argument 4 \(sums\) must be a cpu tensor, got one on meta"),
    (dict(sums=np.zeros(5, np.int64)), TypeError, r"argument 4 \(sums\) must be a torch.Tensor .*got ndarray"),
    (dict(rows=2**31), ValueError, r"argument 0 \(rows\) = 2147483648 does not fit int32"),
    (dict(scale=1.5), TypeError, r"argument 2 \(scale\) must be an integer \(int32\), got float"),
    (dict(cols=torch.tensor(3)), TypeError, r"argument 1 \(cols\) is a scalar int32 parameter, got a tensor"),
])
def test_arguments_are_checked_against_the_parameter_list(host, change, error, message):
    args = row_sums_args(**change)
    with pytest.raises(error, match=message):
        host.launch("row_sums", 5, 4, tuple(args.values()))


def test_argument_count_launch_shape_and_kernel_name_are_checked(host):
    args = tuple(row_sums_args().values())
    with pytest.raises(TypeError, match=r"row_sums takes 6 arguments \(rows, cols, scale, values, sums, count\), "
                                        r"got 5"):
        host.launch("row_sums", 5, 4, args[:5])
    with pytest.raises(ValueError, match="block must hold 1..1024 threads"):
        host.launch("row_sums", 5, 2048, args)
    with pytest.raises(ValueError, match="not in this host build"):
        host.launch("no_such_kernel", 5, 4, args)
    host.launch("row_sums", 0, 4, args)  # an empty grid launches nothing


def test_bool_tensors_pass_for_unsigned_char_pointers(cxx):
    source = ('extern "C" __global__ void flip(int n, unsigned char* flags) '
              '{ for (int i = 0; i < n; ++i) flags[i] = !flags[i]; }')
    flags = torch.tensor([True, False, True])
    HostCudaCModule(source).launch("flip", 1, 1, (3, flags))
    assert flags.tolist() == [False, True, False]


def test_host_build_error_carries_the_compiler_output(cxx):
    with pytest.raises(HostBuildError, match="no_such_function"):
        HostCudaCModule('extern "C" __global__ void k(int n) { no_such_function(n); }').build()


@pytest.mark.parametrize("block", [1, 4])
def test_docs_walk_example_equals_its_numpy_reference_on_the_host(cxx, block):
    walk = HostCudaCModule(doc_cuda_sources()[0])
    assert walk.kernels == ("walk_step",) and walk.build() and walk.build_log == ""
    assert run_walk_against_reference(walk, "cpu", block) >= 20  # agents reached home and jumped away
