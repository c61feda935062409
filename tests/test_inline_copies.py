"""gpurl.kernels.inline_copies: a CPU build's compile inlines with one copy of each callee's IR (one memo for
all its blocks), only while a gpurl build compiles, and compiles the same function: results equal to plain
Python's, with the copy's sharing as in the IR it copies."""
from __future__ import annotations

import copy
import re

import numba
import numpy as np
import pytest
from numba.core import inline_closurecall, ir

from gpurl.kernels import EnvKernel, inline_copies, per_agent
from gpurl.kernels.targets import device

pytestmark = pytest.mark.cpu


def _branchy(x, k):  # several blocks: a loop and branches
    total = np.float32(0.0)
    for j in range(k):
        if x[j] > 0:
            total += x[j]
        elif x[j] < -1:
            total -= np.float32(2.0) * x[j]
        else:
            total += np.float32(1.0)
    return total


_branchy_inlined = numba.njit(inline="always")(_branchy)


def _caller(x, out):
    for r in range(out.shape[0]):
        out[r] = _branchy_inlined(x, r) + _branchy_inlined(x, out.shape[0] - r)


def _scopes_copied(compile_it) -> tuple[int, int]:
    """(scope objects in the inlined callees' copied blocks, blocks copied) over the compile ``compile_it``
    runs, counted at ``copy.deepcopy`` in the inliner's module."""
    blocks, scopes = [], []  # the scopes held here: the inliner later gives the blocks the caller's
    real = inline_closurecall.copy

    class Counting:
        @staticmethod
        def deepcopy(value, memo=None):
            out = real.deepcopy(value, memo)
            if isinstance(out, ir.Block):
                blocks.append(out)
                scopes.append(out.scope)
            return out

    inline_closurecall.copy = Counting
    try:
        compile_it()
    finally:
        inline_closurecall.copy = real
    assert blocks, "the compile inlined nothing"
    return len({id(scope) for scope in scopes}), len(blocks)


def test_the_installed_numba_is_the_one_the_copy_was_made_for():
    # A Numba whose inliner reads differently compiles builds as it does (slower): this test says when to
    # look at inline_copies again.
    assert inline_copies.available(), f"numba {numba.__version__}: InlineWorker.inline_ir is not the expected one"


def test_one_memo_copies_share_the_scope_and_compile_the_same_function():
    x = np.array([0.5, -3.0, -0.5, 2.0, 0.0, -1.5, 4.0], np.float32)
    expected = np.empty(6, np.float32)
    _caller(x, expected)

    signature = (numba.typeof(x), numba.typeof(expected))
    plain = numba.njit(_caller)
    scopes_plain, blocks_plain = _scopes_copied(lambda: plain.compile(signature))
    one = numba.njit(_caller)
    with inline_copies.one_copy_per_inline():
        scopes_one, blocks_one = _scopes_copied(lambda: one.compile(signature))

    assert blocks_one == blocks_plain > 2
    assert scopes_plain == blocks_plain  # Numba: each block copied with a scope of its own
    assert scopes_one < blocks_one  # one memo per callee copy: its blocks keep one scope
    # the same machine code, but for the dispatchers' numbers in the mangled names (..._callerB2v1E...)
    assert re.sub(r"v\d+", "v", one.inspect_asm(signature)) == re.sub(r"v\d+", "v", plain.inspect_asm(signature))
    for fn in (plain, one):
        out = np.empty(6, np.float32)
        fn(x, out)
        assert np.array_equal(out, expected)


def test_the_swap_lasts_only_for_the_block():
    original = inline_closurecall.InlineWorker.__dict__["inline_ir"]
    with inline_copies.one_copy_per_inline():
        assert inline_closurecall.InlineWorker.__dict__["inline_ir"] is not original
        with pytest.raises(RuntimeError, match="inside"):
            with inline_copies.one_copy_per_inline():  # nested: restores to the outer swap, then the original
                raise RuntimeError("inside")
        assert inline_closurecall.InlineWorker.__dict__["inline_ir"] is not original
    assert inline_closurecall.InlineWorker.__dict__["inline_ir"] is original


def test_a_numba_that_reads_differently_is_left_alone(monkeypatch):
    monkeypatch.setattr(inline_copies, "_PER_BLOCK", "no such line\n")
    monkeypatch.setattr(inline_copies, "_one_memo_inline_ir", inline_copies._UNSET)
    original = inline_closurecall.InlineWorker.__dict__["inline_ir"]
    assert not inline_copies.available()
    with inline_copies.one_copy_per_inline():
        assert inline_closurecall.InlineWorker.__dict__["inline_ir"] is original


@device
def _add_branchy(e, i, out, x):
    out[e, i] = _branchy_inlined(x, i + 1)


def test_a_cpu_build_compiles_with_one_copy_per_inline(monkeypatch):
    used = []
    patched = inline_copies._patched_inline_ir()

    def spy(*args, **kwargs):
        used.append(True)
        return patched(*args, **kwargs)

    monkeypatch.setattr(inline_copies, "_one_memo_inline_ir", spy)
    monkeypatch.setenv("GPURL_CACHE_DIR", "off")  # compiled here, not loaded from an earlier run's build
    kernel = EnvKernel("inline_copies_probe", [per_agent(_add_branchy)], nargs=2)
    x = np.array([0.5, -3.0, -0.5, 2.0], np.float32)
    out = np.zeros((2, 3), np.float32)
    kernel.launch("cpu", 2, 3, out, x)
    assert used, "the build's compile did not inline through the one-memo copy"
    expected = np.array([[_branchy(x, i + 1) for i in range(3)]] * 2, np.float32)
    assert np.array_equal(out, expected)
    assert copy is inline_closurecall.copy  # the counting shim of the other tests is gone
