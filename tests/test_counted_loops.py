"""A CUDA build's ``range`` loops as counted while loops (gpurl.kernels.counted_loops): Python semantics kept.

Each case runs the original function and its rewrite on the same inputs, exceptions included; the
reference is Python's own ``for``. The rewrite's machine code is checked in the compile tier
(test_compile_counted_loops.py), its use in every env's CUDA build by the simulator tier's parity tests.
"""
import dis

import numba
import numpy as np
import pytest

from gpurl.kernels.counted_loops import NONNEGATIVE_RANGE, counted_loops
from gpurl.kernels.targets import DeviceFunction

pytestmark = pytest.mark.cpu


def _iterates(fn) -> bool:
    """Whether ``fn``'s own code (not a nested function's) runs a for loop."""
    return any(op.opname == "FOR_ITER" for op in dis.get_instructions(fn))


def _run(fn, *args):
    try:
        return ("returned", fn(*args))
    except Exception as exc:  # noqa: BLE001 - the exception's type is part of what must match
        return ("raised", type(exc).__name__)


def skip_continue_break_else(n, weights):
    total = 0
    for j in range(n):
        if j == 3:
            continue
        for k in range(j, 0, -2):
            total += k * weights[j % len(weights)]
            if total > 400:
                break
        else:
            total += 1
    return total


def reassigned_loop_variable(n):
    seen = []
    for j in range(n):
        seen.append(j)
        j = 100  # a for loop takes the next j from range regardless
        seen.append(j)
    return seen


def loop_variable_after_the_loop(n):
    for j in range(2, n):
        pass
    return j  # unbound when the loop never ran, in both forms


def ends_evaluated_once_in_order(n):
    calls = []

    def end(value, name):
        calls.append(name)
        return value

    count = 0
    for j in range(end(1, "start"), end(n, "stop"), 3):
        n = 0  # rebinding the stop's name inside the body changes nothing
        count += j
    return count, calls


def steps_and_empty_ranges(a, b):
    out = []
    for j in range(a, b, 2):
        out.append(j)
    for j in range(b, a, -3):
        out.append(-j)
    for j in range(a):
        out.append(10 * j)
    return out


def while_else_runs_after_an_empty_loop(n):
    flag = 0
    for _ in range(n):
        flag += 1
        if flag == 5:
            break
    else:
        flag = -flag
    return flag


def nested_def_is_left_alone(n):
    def inner(m):
        return [i for i in range(m)]

    total = 0
    for j in range(n):
        total += len(inner(j))
    return total


CASES = {
    skip_continue_break_else: [(n, [1, 2, 3]) for n in range(-1, 30)] + [(5, [])],
    reassigned_loop_variable: [(n,) for n in range(5)],
    loop_variable_after_the_loop: [(n,) for n in range(5)],
    ends_evaluated_once_in_order: [(n,) for n in range(12)],
    steps_and_empty_ranges: [(a, b) for a in range(-3, 5) for b in range(-3, 9)],
    while_else_runs_after_an_empty_loop: [(n,) for n in range(8)],
    nested_def_is_left_alone: [(n,) for n in range(5)],
}


@pytest.mark.parametrize("fn", list(CASES), ids=lambda fn: fn.__name__)
def test_the_rewrite_behaves_like_the_for_loop(fn):
    rewritten = counted_loops(fn)
    assert rewritten is not fn and not _iterates(rewritten) and _iterates(fn)
    for args in CASES[fn]:
        assert _run(rewritten, *args) == _run(fn, *args), (fn.__name__, args)


def test_only_builtin_range_loops_with_a_literal_step_are_rewritten():
    def not_eligible(pairs, step):
        total = 0
        for a, b in pairs:  # not a range
            total += a * b
        for j in range(0, 10, step):  # the step is not a literal
            total += j
        return total

    assert counted_loops(not_eligible) is not_eligible

    def comprehensions(n):
        return [j for j in range(n)] + [j for j in range(n) for _ in range(1)]

    assert counted_loops(comprehensions) is comprehensions  # not for statements: Numba lowers them on its own


def test_functions_without_source_or_with_a_closure_compile_as_they_are():
    namespace: dict = {}
    exec("def generated(n):\n    t = 0\n    for j in range(n):\n        t += j\n    return t\n", namespace)
    assert counted_loops(namespace["generated"]) is namespace["generated"]
    offset = 3

    def closure(n):
        total = 0
        for j in range(n):
            total += j + offset
        return total

    assert counted_loops(closure) is closure


def test_the_rewrite_keeps_name_defaults_and_line_numbers():
    def with_defaults(n, scale=2):
        total = 0
        for j in range(n):
            total += scale * j
        raise ValueError(total)

    rewritten = counted_loops(with_defaults)
    assert rewritten.__name__ == "with_defaults" and rewritten.__defaults__ == (2,)
    assert rewritten.__code__.co_filename == with_defaults.__code__.co_filename
    assert rewritten.__code__.co_firstlineno == with_defaults.__code__.co_firstlineno


def test_numba_types_the_rewrite_like_the_for_loop():
    # Numba compiles the rewrite for any integer ends and gives the for loop's results and types: unsigned ends
    # count in uint64 (a literal 1 added to a uint64 would make it float64), as range's do (the CPU target stands
    # in for NVVM's front end, which types the same source the same way).
    def sum_over(lo, hi, values):
        total = np.float32(0.0)
        for j in range(lo, hi):
            total += values[j]
        last = lo
        for j in range(hi - lo):
            last = j
        for j in range(hi - 1, lo - 1, -1):
            total -= np.float32(0.5) * values[j]
        return total, last

    values = np.arange(20, dtype=np.float32)
    plain = numba.njit(sum_over)
    counted = numba.njit(counted_loops(sum_over))
    for lo, hi in [(0, 20), (3, 7), (5, 5), (np.uint64(2), np.uint64(9)), (np.int32(1), np.int32(19)),
                   (np.int64(2), np.uint64(8))]:
        assert counted(lo, hi, values) == plain(lo, hi, values)
    for sig in counted.nopython_signatures:
        unsigned = sig.args[0] == numba.uint64 and sig.args[1] == numba.uint64
        assert sig.return_type == numba.types.Tuple((numba.float32, numba.uint64 if unsigned else numba.int64)), sig


def test_only_a_cuda_build_is_rewritten():
    def add_up(n):
        total = 0
        for j in range(n):
            total += j
        return total

    fn = DeviceFunction(add_up)
    assert fn.source_for("cpu") is add_up
    cuda_source = fn.source_for("cuda")
    assert cuda_source is not add_up and not _iterates(cuda_source)
    assert cuda_source(7) == add_up(7) == 21


@numba.njit
def every_third_from_two(n):
    """A helper marked as team_range is: its range starts at 0 or above and steps up."""
    return range(2, n, 3)


setattr(every_third_from_two, NONNEGATIVE_RANGE, True)


def over_a_nonnegative_range(n, values):
    total = values[0] * 0
    for j in every_third_from_two(n):
        if j == 5:
            continue
        total += values[j]
        if j > 12:
            break
    else:
        total += 1
    return total, j


def test_a_marked_helpers_loops_are_counted_and_say_their_index_is_never_negative():
    from gpurl.kernels.team import team_range

    assert getattr(team_range, NONNEGATIVE_RANGE, False)
    rewritten = counted_loops(over_a_nonnegative_range)
    assert not _iterates(rewritten) and _iterates(over_a_nonnegative_range)
    values = np.arange(30, dtype=np.float32)
    for n in range(-2, 25):
        assert _run(rewritten, n, values) == _run(over_a_nonnegative_range, n, values), n
    # Numba types the guard like the loop: uint64 ends still count in uint64 (the guard folds away there)
    plain, counted = numba.njit(over_a_nonnegative_range), numba.njit(rewritten)
    for n in (np.int64(20), np.uint64(20), np.int32(9)):
        assert counted(n, values) == plain(n, values)
    assert [sig.return_type for sig in counted.nopython_signatures] == \
        [sig.return_type for sig in plain.nopython_signatures]
