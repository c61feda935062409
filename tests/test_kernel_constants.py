"""Build constants (``EnvKernel.launch(..., constants=freeze_constants({...}))``): a module global fixed for
one build, seen by every function of that build, including nested device functions, and by
``EnvKernel.run_python`` given the same constants (the bounds-check diagnosis of a failed launch re-runs
it so); other builds keep the global's own value."""
from __future__ import annotations

import numpy as np
import pytest

from gpurl.kernels import freeze_constants

from toolkit_kernels import width_kernel, width_ref

pytestmark = pytest.mark.cpu


def test_constant_reaches_nested_helpers_and_each_value_is_its_own_build():
    out = np.zeros((3, 4), np.float32)
    width_kernel.launch("cpu", 3, 4, out)
    np.testing.assert_array_equal(out, width_ref(3, 4, 4))  # run-time width: out.shape[1]
    for width in (7, 2):
        width_kernel.launch("cpu", 3, 4, out, constants=freeze_constants({"TOOLKIT_FIXED_WIDTH": width}))
        np.testing.assert_array_equal(out, width_ref(3, 4, width))
    width_kernel.launch("cpu", 3, 4, out)  # the shared build is unchanged
    np.testing.assert_array_equal(out, width_ref(3, 4, 4))
    assert {key[1] for key in width_kernel._builds if key[0] == "cpu"} == {
        (), (("TOOLKIT_FIXED_WIDTH", 7),), (("TOOLKIT_FIXED_WIDTH", 2),)}


def test_run_python_sees_the_same_constants_as_the_build():
    out = np.zeros((2, 3), np.float32)
    width_kernel.run_python(2, 3, out, constants=freeze_constants({"TOOLKIT_FIXED_WIDTH": 9}))
    np.testing.assert_array_equal(out, width_ref(2, 3, 9))
    width_kernel.run_python(2, 3, out)
    np.testing.assert_array_equal(out, width_ref(2, 3, 3))


def test_freeze_constants_sorts_and_rejects_what_cannot_be_a_literal():
    assert freeze_constants({"B": 2, "A": 1}) == (("A", 1), ("B", 2))
    assert freeze_constants(None) == ()
    for bad in ({"A": 1.5}, {"A": True}, {"not a name": 1}, {"A": ()}, {"A": (1, np.float32(2))}, {"A": (1.5,)},
                {"A": (True,)}, {"A": np.float64(1)}):
        with pytest.raises(TypeError, match="constant"):
            freeze_constants(bad)
    tables = {"T": (np.float32(0.5), np.float32(2)), "U": (3, 4), "V": np.float32(1)}
    assert freeze_constants(tables) == tuple(sorted(tables.items()))


def test_direct_launch_types_once_per_key_then_calls_the_compiled_overload(monkeypatch):
    """``EnvKernel.direct_launch``: the first launch of a key goes through ``launch`` (compiling it), later
    ones call that overload's entry point without Numba's dispatcher; each key is its own overload."""
    launcher = width_kernel.direct_launch()
    out = np.zeros((3, 4), np.float32)
    launcher("float32", 3, 4, out)
    np.testing.assert_array_equal(out, width_ref(3, 4, 4))
    # The dispatcher is gone: a later launch of the same key can only run through the cached entry point.
    monkeypatch.setitem(width_kernel._builds, ("cpu", ()), None)
    other = np.zeros((5, 2), np.float32)
    launcher("float32", 5, 2, other)  # same types, other sizes
    np.testing.assert_array_equal(other, width_ref(5, 2, 2))
    launcher("float32", 0, 2, np.full((1, 2), -1, np.float32))  # no envs: nothing runs
    monkeypatch.undo()
    wide = np.zeros((2, 3), np.float64)
    launcher("float64", 2, 3, wide)
    np.testing.assert_array_equal(wide, width_ref(2, 3, 3))
    assert set(launcher._entries) == {"float32", "float64"}


def test_direct_launch_runs_the_build_of_its_constants():
    out = np.zeros((2, 3), np.float32)
    width_kernel.direct_launch(freeze_constants({"TOOLKIT_FIXED_WIDTH": 7}))("k", 2, 3, out)
    np.testing.assert_array_equal(out, width_ref(2, 3, 7))
