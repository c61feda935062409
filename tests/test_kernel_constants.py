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
    for bad in ({"A": 1.5}, {"A": True}, {"not a name": 1}):
        with pytest.raises(TypeError, match="constant"):
            freeze_constants(bad)
