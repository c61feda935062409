"""The mistakes a new kernel author makes get errors that name the author's function, file and line (issue 20).

1. a helper without ``@device`` (Numba said ``NameError: name 'torus_offset' is not defined``);
2. a per-env function passed to ``per_agent`` (Numba said ``Cannot bind ... too many positional arguments``):
   caught when the kernel is made, before anything compiles;
3. accidental float64 in the CPU build (Numba compiles and runs it without a word);
4. allocating in a kernel (Numba said ``NRT required but not enabled``).

The faulty phases live in tests/kernel_mistakes.py, each faulty line marked ``# MISTAKE: <name>``. Every
kernel here is tiny; the float64 cases compile a CPU build each (about a second).
"""
import numpy as np
import pytest

from gpurl.kernels import EnvKernel, KernelTypingError, device, per_agent, per_env
from gpurl.kernels import float64 as float64_check
from gpurl.kernels.errors import (KernelAllocationError, KernelFloat64Error, KernelHelperError,
                                  KernelSignatureError, phase_signature_problems)

import kernel_mistakes as km

pytestmark = pytest.mark.cpu

FILE = 'kernel_mistakes.py", line'


def x32():
    return np.arange(6, dtype=np.float32).reshape(2, 3)


def launch_error(phases, *args, error=KernelTypingError, name=None) -> str:
    kernel = EnvKernel(name or phases[0].fn.__name__, phases, nargs=len(args))
    with pytest.raises(error) as info:
        kernel.launch("cpu", 2, 3, *args)
    assert isinstance(info.value, KernelTypingError)
    return str(info.value)


def at(fn, mistake: str) -> str:
    """The traceback-style location of the line marked ``mistake`` in ``fn``."""
    return f'{FILE} {km.line_of(mistake)}, in {fn.__name__}'


# ---- 1. a helper without @device ---------------------------------------------------------------------


def test_a_plain_python_helper_is_named_with_its_call_and_its_definition():
    message = launch_error([per_agent(km.chase)], x32(), np.float32(3), error=KernelHelperError)
    assert "phase 0 of 1, chase (per agent)" in message
    assert at(km.chase, "plain-helper") in message
    assert f"torus_offset is a plain Python function (defined at {km.PATH}:{km.def_line(km.torus_offset)})" in message
    assert "@gpurl.kernels.device" in message
    assert "NameError" not in message and "<gpurl" not in message


def test_a_plain_function_called_from_a_device_helper_names_the_helper_and_its_phase():
    message = launch_error([per_agent(km.step_agent), per_agent(km.chase_via_device_helper)], x32(), np.float32(3),
                           error=KernelHelperError)
    assert "phase 1 of 2, chase_via_device_helper (per agent), in its helper wrapped_offset" in message
    assert at(km.wrapped_offset, "plain-helper-in-helper") in message


def test_a_registered_or_device_function_is_not_a_plain_helper():
    from gpurl.kernels.errors import plain_function_calls

    assert plain_function_calls((per_agent(km.chase_via_device_helper),)) != []  # through the helper
    assert plain_function_calls((per_agent(km.fine), per_agent(km.uses_cos32))) == []


# ---- 2. phase signatures -------------------------------------------------------------------------------


def test_a_per_env_function_given_to_per_agent_fails_when_the_kernel_is_made():
    with pytest.raises(KernelSignatureError) as info:
        EnvKernel("wrong_kind", [per_agent(km.step_agent), per_agent(km.step_env)], nargs=2)
    message = str(info.value)
    assert "kernel 'wrong_kind': phase 1 of 2, per_agent(step_env)" in message
    assert "called as step_env(e, i, a0, a1) (4 arguments)" in message
    assert f'{FILE} {km.def_line(km.step_env)}, in step_env' in message
    assert "def step_env(e, x, size):" in message
    assert "takes 3 (e, x, size): it looks like a per_env phase" in message and "per_env(step_env)" in message


def test_a_per_agent_function_given_to_per_env_and_a_wrong_nargs_are_named():
    with pytest.raises(KernelSignatureError, match=r"looks like a per_agent phase, fn\(e, i, \*args\): make it with "
                                                   r"per_agent\(step_agent\)"):
        EnvKernel("wrong_kind", [per_env(km.step_agent)], nargs=2)
    with pytest.raises(KernelSignatureError, match=r"is EnvKernel\(\.\.\., nargs=3\) right"):
        EnvKernel("wrong_nargs", [per_agent(km.step_agent)], nargs=3)


def test_defaults_and_matching_kinds_are_accepted():
    phases = (per_agent(km.step_agent), per_env(km.step_env), per_agent(km.with_default))
    assert phase_signature_problems(phases, 2) == []
    x = x32()
    EnvKernel("mixed", list(phases), nargs=2).launch("cpu", 2, 3, x, np.float32(4))
    assert (x == 4).all()


def test_a_signature_broken_after_the_kernel_was_made_is_diagnosed_at_typing_time():
    phase = device(lambda e, i, x, size: None)  # replaced below by a CPU implementation of the wrong kind
    kernel = EnvKernel("late_override", [per_agent(phase)], nargs=2)
    phase.override("cpu")(km.step_env)
    with pytest.raises(KernelSignatureError, match=r"takes 3 \(e, x, size\): it looks like a per_env phase"):
        kernel.launch("cpu", 2, 3, x32(), np.float32(1))


# ---- 3. accidental float64 -----------------------------------------------------------------------------


def test_an_int_variable_later_given_a_float32_names_the_variable_and_both_lines():
    message = launch_error([per_agent(km.nearest)], x32(), np.float32(1), error=KernelFloat64Error)
    assert "kernel 'nearest' (cpu build) computes in float64, phase 0 of 1, nearest (per agent):" in message
    assert at(km.nearest, "int-then-float32") in message and at(km.nearest, "float32-into-int") in message
    assert (f"best_d is float64: it is assigned an int (line {km.line_of('int-then-float32')}) and a float32 "
            f"(line {km.line_of('float32-into-int')})") in message
    assert "best_d = np.float32(0)" in message


@pytest.mark.parametrize("phase, mistake, says", [
    (km.shrink, "float-literal", "a Python float (0.1) is a float64 constant: write np.float32(0.1)"),
    (km.fraction, "int-division", "/ of two integers is float64"),
])
def test_float64_expressions_name_their_line_and_the_fix(phase, mistake, says):
    message = launch_error([per_agent(phase)], x32(), np.float32(1), error=KernelFloat64Error)
    assert at(phase, mistake) in message
    assert says in message


def test_a_python_float_argument_is_named_in_the_helper_that_mixes_it_with_float32():
    message = launch_error([per_agent(km.scale_by_argument)], x32(), 0.5, error=KernelFloat64Error)
    assert "phase 0 of 1, scale_by_argument (per agent), in its helper scaled" in message
    assert at(km.scaled, "float64-parameter") in message
    assert "float32 * float64 is float64" in message and "factor is float64" in message


def test_the_failed_build_is_not_kept_and_a_float32_launch_of_the_same_kernel_runs():
    kernel = EnvKernel("scale", [per_agent(km.scale_by_argument)], nargs=2)
    for _ in range(2):  # the float64 compilation was dropped: the second launch is checked again
        with pytest.raises(KernelFloat64Error):
            kernel.launch("cpu", 2, 3, x32(), 0.5)
    x = x32()
    kernel.launch("cpu", 2, 3, x, np.float32(0.5))
    np.testing.assert_array_equal(x, x32() * np.float32(0.5))


def test_float64_data_explicit_float64_and_gpurl_own_float64_are_not_reported():
    x64 = np.arange(6, dtype=np.float64).reshape(2, 3)
    EnvKernel("on_purpose", [per_agent(km.float64_on_purpose)], nargs=2).launch("cpu", 2, 3, x64, np.float64(1))
    EnvKernel("cos32", [per_agent(km.uses_cos32)], nargs=2).launch("cpu", 2, 3, x32(), np.float32(1))
    EnvKernel("fine", [per_agent(km.fine)], nargs=2).launch("cpu", 2, 3, x32(), np.float32(2))


def test_the_float64_check_reads_the_author_code_once_per_build_and_types(monkeypatch):
    # Compiled here, not loaded from the on-disk cache (a loaded build was checked when it was compiled).
    monkeypatch.setenv("GPURL_CACHE_DIR", "off")
    calls = []
    original = float64_check.float64_findings
    monkeypatch.setattr(float64_check, "float64_findings", lambda *a: calls.append(original(*a)) or calls[-1])
    kernel = EnvKernel("fine_once", [per_agent(km.fine), per_agent(km.uses_cos32)], nargs=2)
    for _ in range(3):
        kernel.launch("cpu", 2, 3, x32(), np.float32(2))
    direct = kernel.direct_launch()
    for _ in range(3):
        direct("k", 2, 3, x32(), np.float32(2))
    assert calls == [[]]  # one compilation, checked once; later launches run nothing of the check
    # ... and the check saw the author's statements (inlined into gpurl's generated loop): not vacuous
    cres = next(iter(kernel.build("cpu").overloads.values()))
    seen = float64_check._typed_functions([cres])
    functions = float64_check._functions(kernel.phases)
    owners = {fn.__name__ for a in seen for s in float64_check._Function(a, functions).statements
              if (fn := (float64_check._owner(functions, s.loc.filename, s.loc.line) or (None,))[0]) is not None}
    assert {"fine", "uses_cos32"} <= owners


# ---- 4. allocating in a kernel -------------------------------------------------------------------------


@pytest.mark.parametrize("phase, mistake", [
    (km.scratch_in_phase, "np-zeros"),
    (km.array_expression, "array-expression"),
    (km.list_literal, "list"),
])
def test_allocation_names_the_line_and_suggests_a_scratch_field(phase, mistake):
    message = launch_error([per_agent(phase)], x32(), np.float32(1), error=KernelAllocationError)
    assert f"phase 0 of 1, {phase.__name__} (per agent):" in message
    assert at(phase, mistake) in message
    assert "kernels cannot allocate" in message and "scratch field" in message
    assert "NRT required" not in message


# ---- how the error is raised -----------------------------------------------------------------------------


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("phase, error", [(km.chase, KernelHelperError), (km.nearest, KernelFloat64Error)],
                         ids=["helper", "float64"])
def test_the_author_error_is_raised_alone_unless_debugging(phase, error, debug, monkeypatch):
    """gpurl's message without Numba's chain behind it (tens of lines of its internals); GPURL_DEBUG=1, which
    the message names, chains it again. The float64 error is raised inside Numba's compile: its frames go too."""
    import traceback

    monkeypatch.setenv("GPURL_DEBUG", "1" if debug else "0")
    kernel = EnvKernel(f"{phase.__name__}_{debug}", [per_agent(phase)], nargs=2)
    with pytest.raises(error) as info:
        kernel.launch("cpu", 2, 3, x32(), np.float32(3))
    err = info.value
    shown = "".join(traceback.format_exception(err))
    if debug:
        assert err.__cause__ is not None or "numba" in shown.lower()
        assert "GPURL_DEBUG" not in shown
    else:
        assert err.__cause__ is None and err.__suppress_context__
        assert "GPURL_DEBUG=1 shows it" in shown and "numba/core" not in shown
        assert shown.count("File ") <= 8, shown  # the caller's frames down to gpurl's raise, no Numba internals
