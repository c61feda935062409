"""cos32 / sin32 / sincos32: the CPU build is the correctly rounded NumPy reference bit for bit; the CUDA
override is float32-only (no float64 PTX) and within 2 ulp of float64 cos/sin over its valid range.

The CUDA override is plain Python, so its float32 arithmetic is checked here without a GPU three ways:
run in Python on NumPy float32 scalars (exactly what the CUDA simulator runs), and compiled by Numba
for the CPU without and with FMA contraction (NVVM contracts some mul+add pairs, the CPU build none).
"""
from __future__ import annotations

import re
import types
import warnings

import numba
import numpy as np
import pytest

from gpurl.kernels import math32
from gpurl.kernels.math32 import cos32, cos32_ref, sin32, sin32_ref, sincos32
from gpurl.kernels.program import EnvKernel, per_agent
from gpurl.kernels.targets import DeviceFunction

MAX_ULP = 2.0
VALID = 8192.0  # documented valid range of the CUDA versions: |x| <= VALID

CUDA_PY = {
    "cos": (math32._cos32_cuda, np.cos),
    "sin": (math32._sin32_cuda, np.sin),
}


# ---- points ----------------------------------------------------------------------------------------------


def _near_multiples_of_half_pi(limit: float, width: int) -> np.ndarray:
    """Every float32 within ``width`` ulp of each multiple of pi/2 in [0, limit]: results near 0 and +-1."""
    centers = np.float32(np.arange(0, int(limit / (np.pi / 2)) + 1) * (np.pi / 2)).view(np.int32)
    near = (centers[:, None] + np.arange(-width, width + 1)[None, :]).ravel().astype(np.int32)
    near = near[near >= 0].view(np.float32)
    return near[near <= limit]


def _points() -> np.ndarray:
    """[0, 2pi] (what gpurl's envs pass), [-50, 50], and the hard cases near multiples of pi/2."""
    rng = np.random.default_rng(0)
    near = _near_multiples_of_half_pi(50.0, 64)
    return np.concatenate([
        np.linspace(0, 2 * np.pi, 20_000, dtype=np.float32),
        rng.uniform(-50, 50, 20_000).astype(np.float32),
        near, -near,
        np.float32([0.0, np.pi / 4, np.pi / 2, np.pi, 1.5 * np.pi, 2 * np.pi, 1e-30, 1e-6]),
    ])


def _wide_points() -> np.ndarray:
    """The whole valid range, uniformly and near multiples of pi/2 (for the fast, jitted variants)."""
    near = _near_multiples_of_half_pi(VALID, 8)
    wide = np.random.default_rng(1).uniform(-VALID, VALID, 200_000).astype(np.float32)
    return np.concatenate([_points(), wide, near, -near])


def _ulp_error(got: np.ndarray, x: np.ndarray, exact) -> np.ndarray:
    """|got - exact(x)| in units of the float32 spacing at the correctly rounded result."""
    want = exact(x.astype(np.float64))
    spacing = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / spacing


def _assert_within_ulp(got, x, exact, name):
    err = _ulp_error(got, x, exact)
    worst = int(np.argmax(err))
    assert err[worst] <= MAX_ULP, f"{name}({x[worst]!r}) = {got[worst]!r}: {err[worst]:.3f} ulp"
    # and, in absolute terms, below one ulp of 1.0 everywhere
    assert np.max(np.abs(got.astype(np.float64) - exact(x.astype(np.float64)))) < 1e-7


# ---- jitting the plain-Python CUDA override for the CPU ---------------------------------------------------


def _jit_cuda_source(pyfunc, **jit_options):
    """``pyfunc`` (a CUDA override) compiled by numba.njit; DeviceFunctions it calls too (CUDA sources)."""
    new_globals = dict(pyfunc.__globals__)
    for name in pyfunc.__code__.co_names:
        value = new_globals.get(name)
        if isinstance(value, DeviceFunction):
            source = value._overrides.get("cuda", value.py_func)
            new_globals[name] = _jit_cuda_source(source, **jit_options)
    clone = types.FunctionType(
        pyfunc.__code__, new_globals, pyfunc.__name__, pyfunc.__defaults__, pyfunc.__closure__
    )
    return numba.njit(**jit_options)(clone)


def _elementwise(scalar_fn):
    """An njit loop applying a jitted float32 -> float32 function to every element of a 1-d array."""

    @numba.njit
    def apply(x):
        out = np.empty_like(x)
        for k in range(x.size):
            out[k] = scalar_fn(x[k])
        return out

    return apply


def _in_python(fn, x: np.ndarray) -> np.ndarray:
    return np.array([fn(v) for v in x], dtype=np.float32)


# ---- cpu tier: the CUDA override's arithmetic --------------------------------------------------------------


@pytest.mark.cpu
def test_cuda_overrides_are_registered():
    # (source_for("cuda") would also set up CUDA builds of the helpers it calls: not in the cpu tier.)
    assert cos32._overrides["cuda"] is math32._cos32_cuda
    assert sin32._overrides["cuda"] is math32._sin32_cuda
    assert sincos32._overrides["cuda"] is math32._sincos32_cuda
    assert "cpu" not in cos32._overrides and "cpu" not in sin32._overrides


@pytest.mark.cpu
@pytest.mark.parametrize("name", sorted(CUDA_PY))
def test_cuda_override_in_python_is_within_2_ulp(name):
    # NumPy float32 scalar semantics: exactly what the CUDA simulator computes.
    fn, exact = CUDA_PY[name]
    x = _points()
    got = _in_python(fn, x)
    assert got.dtype == np.float32
    _assert_within_ulp(got, x, exact, name)
    # The same arithmetic compiled by Numba for the CPU (no FMA contraction) gives the same bits.
    np.testing.assert_array_equal(_elementwise(_jit_cuda_source(fn))(x), got)


@pytest.mark.cpu
@pytest.mark.parametrize("contract", [False, True], ids=["no_fma", "fma_contracted"])
@pytest.mark.parametrize("name", sorted(CUDA_PY))
def test_cuda_override_is_within_2_ulp_over_the_valid_range(name, contract):
    fn, exact = CUDA_PY[name]
    options = {"fastmath": {"contract"}} if contract else {}
    x = _wide_points()
    got = _elementwise(_jit_cuda_source(fn, **options))(x)
    _assert_within_ulp(got, x, exact, name)


@pytest.mark.cpu
def test_cuda_sincos_equals_sin_and_cos():
    x = _points()[::7]
    pairs = [math32._sincos32_cuda(v) for v in x]
    np.testing.assert_array_equal(np.float32([p[0] for p in pairs]), _in_python(math32._sin32_cuda, x))
    np.testing.assert_array_equal(np.float32([p[1] for p in pairs]), _in_python(math32._cos32_cuda, x))


@pytest.mark.cpu
def test_cuda_override_symmetry_and_special_values():
    x = _points()
    x = x[x > 0]
    cos_cuda, sin_cuda = math32._cos32_cuda, math32._sin32_cuda
    np.testing.assert_array_equal(_in_python(cos_cuda, -x), _in_python(cos_cuda, x))
    np.testing.assert_array_equal(_in_python(sin_cuda, -x), -_in_python(sin_cuda, x))
    assert cos_cuda(np.float32(0)) == 1 and sin_cuda(np.float32(0)) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the int32 octant of NaN / inf
        for bad in (np.nan, np.inf, -np.inf):
            assert np.isnan(cos_cuda(np.float32(bad))) and np.isnan(sin_cuda(np.float32(bad)))
    jitted = _elementwise(_jit_cuda_source(cos_cuda)), _elementwise(_jit_cuda_source(sin_cuda))
    for fn in jitted:
        assert np.isnan(fn(np.float32([np.nan, np.inf, -np.inf]))).all()


# ---- cpu tier: the CPU build -------------------------------------------------------------------------------


@pytest.mark.cpu
def test_cpu_build_equals_numpy_reference_bit_for_bit():
    x = _wide_points()
    np.testing.assert_array_equal(_elementwise(cos32.build("cpu"))(x), cos32_ref(x))
    np.testing.assert_array_equal(_elementwise(sin32.build("cpu"))(x), sin32_ref(x))
    sincos = sincos32.build("cpu")

    @numba.njit
    def both(x):
        s = np.empty_like(x)
        c = np.empty_like(x)
        for k in range(x.size):
            s[k], c[k] = sincos(x[k])
        return s, c

    s, c = both(x)
    np.testing.assert_array_equal(s, sin32_ref(x))
    np.testing.assert_array_equal(c, cos32_ref(x))


# ---- a kernel calling all three (compile and sim tiers) ----------------------------------------------------


def _trig(e, i, x, c, s, sc):
    a = x[e, i]
    c[e, i] = cos32(a)
    s[e, i] = sin32(a)
    sn, cs = sincos32(a)
    sc[e, i, 0] = sn
    sc[e, i, 1] = cs


trig_kernel = EnvKernel("trig32", [per_agent(_trig)], nargs=4)


def _trig_args(x: np.ndarray) -> tuple:
    return x, np.zeros_like(x), np.zeros_like(x), np.zeros(x.shape + (2,), np.float32)


# Integer instructions on 64-bit operands (the device-function ABI's pointer loads are ld/st, not these).
_INT64_OP = re.compile(r"^\s*(add|sub|mul|mad|and|or|xor|not|shl|shr|cvt|neg|abs|min|max|setp|selp)"
                       r"(\.\w+)*\.(s64|u64|b64)\b", re.M)


@pytest.mark.compile
def test_trig_kernel_compiles_for_sm90_without_float64(ptxas):
    from gpurl.kernels.aot import assemble_sm90, compile_ptx_sm90, float64_instructions

    ptx = compile_ptx_sm90(trig_kernel, _trig_args(np.zeros((2, 3), np.float32)))
    assert ".target sm_90" in ptx
    assert float64_instructions(ptx) == []  # no allow_libdevice_trig
    assert "__nv_" not in ptx  # no libdevice call left
    assert assemble_sm90(ptx, ptxas)[:4] == b"\x7fELF"


@pytest.mark.compile
@pytest.mark.parametrize("fn", [cos32, sin32, sincos32], ids=lambda f: f.__name__)
def test_cuda_device_functions_are_float32_and_int32_only(fn):
    from numba import cuda, float32

    from gpurl.kernels.aot import SM90, float64_instructions, pretend_device

    with pretend_device(SM90):
        ptx, _ = cuda.compile_ptx(fn.source_for("cuda"), (float32,), device=True, cc=SM90)
    assert float64_instructions(ptx) == []
    assert _INT64_OP.findall(ptx) == []


@pytest.mark.sim
def test_simulator_trig_kernel_matches_cpu_build_within_2_ulp():
    x = np.float32([[0.0, 0.5, 1.0, np.pi / 2, 2.0, 3.0],
                    [np.pi, 4.0, 1.5 * np.pi, 5.0, 6.0, 2 * np.pi]])
    on_sim, on_cpu = _trig_args(x), _trig_args(x)
    trig_kernel.launch("cuda", *x.shape, *on_sim)
    trig_kernel.launch("cpu", *x.shape, *on_cpu)
    np.testing.assert_array_equal(on_cpu[1], cos32_ref(x))
    np.testing.assert_array_equal(on_cpu[2], sin32_ref(x))
    for got, exact in [(on_sim[1], np.cos), (on_sim[2], np.sin),
                       (on_sim[3][..., 1], np.cos), (on_sim[3][..., 0], np.sin)]:
        assert got.dtype == np.float32
        assert np.all(_ulp_error(got.ravel(), x.ravel(), exact) <= MAX_ULP)
    np.testing.assert_allclose(on_sim[1], on_cpu[1], rtol=0, atol=1e-5)
    np.testing.assert_allclose(on_sim[2], on_cpu[2], rtol=0, atol=1e-5)


@pytest.mark.cpu
def test_fmod32_cpu_fast_path_equals_fmodf_bit_for_bit():
    from gpurl.kernels.math32 import fmod32

    fmod = fmod32.build("cpu")
    two_pi = np.float32(2 * np.pi)
    rng = np.random.default_rng(7)
    values = np.concatenate([
        (rng.random(20_000) * 60 - 30).astype(np.float32),
        np.array([two_pi, -two_pi, 2 * two_pi, -2 * two_pi, np.nextafter(two_pi, np.float32(0)),
                  np.nextafter(-two_pi, np.float32(0)), 0.0, -0.0, 1e-30, -1e-30], dtype=np.float32),
    ])
    got = np.array([fmod(v, two_pi) for v in values], dtype=np.float32)
    want = np.fmod(values, two_pi)
    np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))
