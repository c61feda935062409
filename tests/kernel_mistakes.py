"""Kernel code with the mistakes a new author makes (issue 20), for tests/test_kernel_mistakes.py and
tests/test_compile_kernel_mistakes.py.

Each faulty line ends in a ``# MISTAKE: <name>`` comment: the tests find its line number with
:func:`line_of` and assert that the error names this file, that line and the function.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from gpurl.kernels import device
from gpurl.kernels.math32 import cos32

PATH = Path(__file__).resolve()


def line_of(name: str) -> int:
    """Line number of the line marked ``# MISTAKE: name`` in this file."""
    marker = f"# MISTAKE: {name}"
    return next(n for n, line in enumerate(PATH.read_text().splitlines(), 1) if line.rstrip().endswith(marker))


def def_line(fn) -> int:
    """Line of ``def`` of ``fn`` in this file."""
    return next(n for n, line in enumerate(PATH.read_text().splitlines(), 1)
                if line.startswith(f"def {fn.__name__}("))


# ---- 1. a helper without @device ---------------------------------------------------------------------


def torus_offset(a, b, size):
    d = a - b
    return d - size if d > size else d


def chase(e, i, x, size):
    x[e, i] = torus_offset(x[e, i], x[e, 0], size)  # MISTAKE: plain-helper


@device
def wrapped_offset(a, b, size):
    return torus_offset(a, b, size)  # MISTAKE: plain-helper-in-helper


def chase_via_device_helper(e, i, x, size):
    x[e, i] = wrapped_offset(x[e, i], x[e, 0], size)


# ---- 2. a phase of the wrong kind (or the wrong nargs) -------------------------------------------------


def step_env(e, x, size):  # written as a per-env phase: fn(e, *args)
    x[e, 0] = size


def step_agent(e, i, x, size):  # written as a per-agent phase: fn(e, i, *args)
    x[e, i] = size


def with_default(e, i, x, size, scale=np.float32(1)):  # a default: callable with e, i and two args
    x[e, i] = size * scale


# ---- 3. accidental float64 -----------------------------------------------------------------------------


def nearest(e, i, x, size):
    best_d = 0  # MISTAKE: int-then-float32
    for j in range(x.shape[1]):
        d = abs(x[e, j] - x[e, i])
        if d > best_d:
            best_d = d  # MISTAKE: float32-into-int
    x[e, i] = best_d


def shrink(e, i, x, size):
    x[e, i] = x[e, i] * 0.1  # MISTAKE: float-literal


def fraction(e, i, x, size):
    n = x.shape[1]
    x[e, i] = i / n  # MISTAKE: int-division


@device
def scaled(v, factor):
    return v * factor  # MISTAKE: float64-parameter


def scale_by_argument(e, i, x, factor):
    x[e, i] = scaled(x[e, i], factor)


def float64_on_purpose(e, i, x, size):
    # float64 data (a float64 array), arithmetic on it with ints and a literal, and an explicit np.float64:
    # none of it is an accident
    acc = np.float64(0)
    for j in range(x.shape[1]):
        acc += x[e, j] * 2 + 0.5
    x[e, i] = acc + np.float64(size)


def uses_cos32(e, i, x, size):
    # cos32's CPU implementation evaluates in float64 on purpose: gpurl's, not the author's
    x[e, i] = cos32(x[e, i]) + np.float32(math.pi) * size


# ---- 4. allocating in a kernel -------------------------------------------------------------------------


def scratch_in_phase(e, i, x, size):
    tmp = np.zeros(3)  # MISTAKE: np-zeros
    x[e, i] = tmp[0] + size


def array_expression(e, i, x, size):
    row = x[e] * size  # MISTAKE: array-expression
    x[e, i] = row[i]


def list_literal(e, i, x, size):
    weights = [size, size]  # MISTAKE: list
    x[e, i] = weights[0]


# ---- correct kernels (nothing to report) --------------------------------------------------------------


def fine(e, i, x, size):
    best = np.float32(0)
    for j in range(x.shape[1]):
        best = max(best, x[e, j])
    x[e, i] = best * size + np.float32(0.5)


def libdevice_cos(e, i, x, size):
    # math.cos of a float32 is libdevice's cosf on CUDA: float32 code, but its huge-argument reduction runs
    # through three float64 instructions (gpurl.kernels.aot's allow_libdevice_trig)
    x[e, i] = math.cos(x[e, i]) * size
