"""Counter-based random numbers keyed by (seed, global env id, agent, counter, stream).

No RNG state is stored: a draw is a pure hash of its key (SplitMix64's finaliser applied three times),
so it is identical on every backend, independent of launch geometry, of how envs are split across
devices, and of the order in which threads run. ``counter`` is whatever the caller counts (step,
episode); ``stream`` separates independent draws made under the same key (x, y, direction, ...).

All arithmetic is unsigned 64-bit with ``np.uint64`` constants (a Python int literal would turn the
product into a signed int64 in Numba).
"""
import numpy as np

from .targets import device

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S32 = np.uint64(32)
_S40 = np.uint64(40)
_MASK32 = np.uint64(0xFFFFFFFF)
_TWO_POW_M24 = np.float32(1.0 / (1 << 24))


@device
def mix64(z):
    """SplitMix64 finaliser: a bijective avalanche of one uint64."""
    z = (z ^ (z >> _S30)) * _MUL1
    z = (z ^ (z >> _S27)) * _MUL2
    return z ^ (z >> _S31)


@device
def random_u32(seed, env, agent, counter, stream):
    """uint32 draw for the key. ``seed`` is a uint64; the rest are non-negative ints < 2**32."""
    h = mix64(np.uint64(seed) + _GOLDEN)
    h = mix64(h ^ ((np.uint64(env) & _MASK32) << _S32 | (np.uint64(agent) & _MASK32)))
    h = mix64(h ^ ((np.uint64(counter) & _MASK32) << _S32 | (np.uint64(stream) & _MASK32)))
    return np.uint32(h >> _S32)


@device
def random_uniform(seed, env, agent, counter, stream):
    """float32 uniform on [0, 1) with 24 random bits (exactly representable, no rounding up to 1)."""
    h = random_u32(seed, env, agent, counter, stream)
    return np.float32(np.uint64(h) >> np.uint64(8)) * _TWO_POW_M24


@device
def random_below(seed, env, agent, counter, stream, n):
    """Integer in [0, n) for small n (multiply-shift; bias below 2**-24 for n < 256)."""
    h = random_u32(seed, env, agent, counter, stream)
    return np.int32((np.uint64(h) * np.uint64(n)) >> _S32)


# ---- references (vectorised NumPy, independent of the compiled code) -------------------------------

def _mix64_ref(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> 30)) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> 27)) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> 31)


def random_u32_ref(seed, env, agent, counter, stream) -> np.ndarray:
    """Broadcasting NumPy twin of :func:`random_u32` (uint32 array)."""
    u = lambda v: np.asarray(v).astype(np.uint64)  # noqa: E731  (wraps negatives like the kernels)
    with np.errstate(over="ignore"):
        h = _mix64_ref(u(seed) + np.uint64(0x9E3779B97F4A7C15))
        h = _mix64_ref(h ^ ((u(env) & np.uint64(0xFFFFFFFF)) << np.uint64(32) | (u(agent) & np.uint64(0xFFFFFFFF))))
        h = _mix64_ref(h ^ ((u(counter) & np.uint64(0xFFFFFFFF)) << np.uint64(32) | (u(stream) & np.uint64(0xFFFFFFFF))))
    return (h >> np.uint64(32)).astype(np.uint32)


def random_uniform_ref(seed, env, agent, counter, stream) -> np.ndarray:
    """Broadcasting NumPy twin of :func:`random_uniform` (float32 array)."""
    h = random_u32_ref(seed, env, agent, counter, stream)
    return (h >> np.uint32(8)).astype(np.float32) * np.float32(1.0 / (1 << 24))


def random_below_ref(seed, env, agent, counter, stream, n) -> np.ndarray:
    """Broadcasting NumPy twin of :func:`random_below` (int32 array)."""
    h = random_u32_ref(seed, env, agent, counter, stream).astype(np.uint64)
    return ((h * np.uint64(n)) >> np.uint64(32)).astype(np.int32)
