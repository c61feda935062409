"""Float32 math intrinsics with one meaning on every backend.

``cos32``/``sin32`` (and ``sincos32``) are correctly rounded float32 results on the CPU (evaluated in
float64, then rounded), so the CPU build matches a NumPy reference bit for bit: that is deliberate.

On CUDA they are float32-only code with no float64 instruction at all (libdevice's ``cosf``/``sinf``,
which ``math.cos`` on a float32 lowers to, reduce huge arguments through float64): Cephes
``sinf``/``cosf`` style, i.e. Cody-Waite reduction by pi/4 (a float32 split of pi/4, tightened here to
four parts plus one Fast2Sum correction, see below), then Cephes' float32 minimax polynomials on
[-pi/4, pi/4]. Numba's CUDA simulator runs the same override in Python on NumPy float32 scalars, so
simulator results are no longer bit-identical to the CPU build either (they differ by <= 2 ulp).

Valid range on CUDA: |x| <= 8192 (gpurl's envs pass angles in [0, 2pi]). Measured against float64
``cos``/``sin`` (the override's float32 arithmetic compiled by Numba for the CPU, once without FMA
contraction and once with every mul+add contracted, since NVVM contracts some of them; every float32
within 5000 ulp of each multiple of pi/2 up to |x| = 1000, within 300 ulp up to 16384, plus 20M random
points per range): max error 1.53 ulp for |x| <= 1000, 1.56 ulp for |x| <= 12867, absolute error
<= 7.8e-8 -- including results near the zeros of sin/cos (tests/test_math32.py asserts <= 2 ulp on a
subset). Beyond
|x| ~ 12867 the reduction's products are no longer exact: results near zeros lose all relative accuracy
and the absolute error grows (2.6e-7 at 16384, ~1e-6 at 1e5); beyond |x| ~ 1.7e9 the octant overflows
int32 and the result is meaningless. NaN and +-inf give NaN; ``sin32(-0.0)`` is +0.0 on CUDA.

GPU-vs-CPU (and simulator-vs-CPU) comparisons of these floats therefore use tolerances.
"""
import math

import numpy as np

from .targets import device


@device
def cos32(angle):
    """float32 cosine of a float32 angle (radians): correctly rounded on the CPU, <= 2 ulp on CUDA."""
    return np.float32(math.cos(np.float64(angle)))


@device
def sin32(angle):
    """float32 sine of a float32 angle (radians): correctly rounded on the CPU, <= 2 ulp on CUDA."""
    return np.float32(math.sin(np.float64(angle)))


def cos32_ref(angle: np.ndarray) -> np.ndarray:
    """Reference for :func:`cos32`: float32 array in, correctly rounded float32 out."""
    return np.cos(np.asarray(angle, dtype=np.float64)).astype(np.float32)


def sin32_ref(angle: np.ndarray) -> np.ndarray:
    """Reference for :func:`sin32`: float32 array in, correctly rounded float32 out."""
    return np.sin(np.asarray(angle, dtype=np.float64)).astype(np.float32)


# ---- CUDA: pure float32 sin/cos (Cephes sinf.c / cosf.c) ---------------------------------------------------
# Every constant is a NumPy scalar: a Python float literal would promote float32 math to float64, and a
# Python int literal would promote the int32 octant arithmetic to int64. Numba also types int32 + int32,
# int32 & int32 and int32 >> int32 as int64, so those results are wrapped in np.int32.

_FOUR_OVER_PI = np.float32(1.27323954473516268615)
# pi/4 = _DP1 + _DP2 + _DP3 + _DP4 + 4.2e-20: Cephes' three-part split of pi/4 (0.78515625,
# 2.4187564849853515625e-4, 3.77489497744594108e-8) with its last part split once more, so that _DP1
# (8 significant bits), _DP2 and _DP3 (11 bits each) times an even octant j <= 2^14 (13 significant
# bits; |x| <= 12867) are exact float32 products; only j * _DP4 (~1e-12 * j) rounds. (With Cephes'
# full-width third part, the rounding of j * DP3 (~1e-14 at j = 6) gave 14 ulp at cos(3pi/2) already.)
# x - j * pi/4 is then summed with one significant rounding: the first two subtractions are exact,
# and the rounding error of the third is added back (Fast2Sum) together with -j * _DP4 (two roundings
# instead cost up to 2.5 ulp for |x| > 1000). FMA contraction cannot change the exact products.
_DP1 = np.float32(0.78515625)
_DP2 = np.float32(2.4187564849853515625e-4)
_DP3 = np.float32(3.774766810238361358642578125e-8)
_DP4 = np.float32(1.281672034128544801490079408e-12)
# sin(r) ~ r + r^3 * (_S2 + _S1 r^2 + _S0 r^4) on [-pi/4, pi/4]
_S0 = np.float32(-1.9515295891e-4)
_S1 = np.float32(8.3321608736e-3)
_S2 = np.float32(-1.6666654611e-1)
# cos(r) ~ 1 - r^2/2 + r^4 * (_C2 + _C1 r^2 + _C0 r^4) on [-pi/4, pi/4]
_C0 = np.float32(2.443315711809948e-5)
_C1 = np.float32(-1.388731625493765e-3)
_C2 = np.float32(4.166664568298827e-2)
_HALF = np.float32(0.5)
_ONE = np.float32(1)
_ZERO = np.float32(0)
_I1 = np.int32(1)
_I2 = np.int32(2)
_I3 = np.int32(3)


@device
def _sincos_reduced(x):
    """(s, c, q): s = sin r, c = cos r (polynomials), quadrant q in 0..3, |x| = q * pi/2 + r, |r| <= ~pi/4.

    sin|x| = (s, c, -s, -c)[q] and cos|x| = (c, -s, -c, s)[q].
    """
    ax = abs(np.float32(x))
    j = np.int32(ax * _FOUR_OVER_PI)  # octant (truncated; ax >= 0)
    j = np.int32(j + (j & _I1))  # odd octant -> the next even one (int32 + int32 is int64 in Numba)
    y = np.float32(j)
    t = (ax - y * _DP1) - y * _DP2  # exact
    r = t - y * _DP3
    r = r + (((t - r) - y * _DP3) - y * _DP4)  # + the rounding error of t - y * _DP3 (Fast2Sum)
    z = r * r
    s = ((_S0 * z + _S1) * z + _S2) * z * r + r
    c = ((_C0 * z + _C1) * z + _C2) * z * z - _HALF * z + _ONE
    return s, c, np.int32((j >> _I1) & _I3)


@device
def sincos32(angle):
    """(sin, cos) of a float32 angle; on CUDA one shared range reduction (float32 only)."""
    return sin32(angle), cos32(angle)


@sincos32.override("cuda")
def _sincos32_cuda(angle):
    s, c, q = _sincos_reduced(angle)
    odd = (q & _I1) != 0
    sin_abs = c if odd else s
    cos_val = s if odd else c
    if (q & _I2) != 0:
        sin_abs = -sin_abs
    if ((q ^ (q >> _I1)) & _I1) != 0:  # q is 1 or 2: cos is -s, -c
        cos_val = -cos_val
    return (-sin_abs if angle < _ZERO else sin_abs), cos_val


@cos32.override("cuda")
def _cos32_cuda(angle):
    """float32-only cos, |angle| <= 8192 (<= 1.6 ulp measured): see the module docstring."""
    s, c, q = _sincos_reduced(angle)
    v = s if (q & _I1) != 0 else c
    return -v if ((q ^ (q >> _I1)) & _I1) != 0 else v  # q is 1 or 2: negative


@sin32.override("cuda")
def _sin32_cuda(angle):
    """float32-only sin, |angle| <= 8192 (<= 1.6 ulp measured): see the module docstring."""
    s, c, q = _sincos_reduced(angle)
    v = c if (q & _I1) != 0 else s
    if (q & _I2) != 0:
        v = -v
    return -v if angle < _ZERO else v


@device
def fmod32(a, b):
    """C ``fmodf``: exact remainder with the sign of ``a`` (float32), ``b`` > 0.

    Angles rarely leave (-2b, 2b); there the remainder is ``a`` or ``a -+ b``, both exact (Sterbenz),
    which skips the slow libm call on the CPU's hot path without changing a bit of the result.
    """
    a = np.float32(a)
    b = np.float32(b)
    magnitude = abs(a)
    if magnitude < b:
        return a
    if magnitude < b + b:
        if a > _ZERO32:
            return a - b
        return a + b if a != -b else _NEG_ZERO32  # fmodf(-b, b) is -0.0
    return np.float32(np.fmod(a, b))


@fmod32.override("cuda")
def _fmod32_cuda(a, b):
    return math.fmod(np.float32(a), np.float32(b))


_ZERO32 = np.float32(0.0)
_NEG_ZERO32 = np.float32(-0.0)
