"""CUDA builds: ``for j in range(...)`` compiled as a counted ``while`` loop.

Numba lowers ``range`` through an iterator (a remaining count beside the value), from which LLVM cannot
tell that ``j`` stays in ``[start, stop)``. Every ``a[j]`` in the loop then keeps Numba's wraparound for a
negative index (``j < 0 ? j + len : j``, in 64 bits), which also stops LLVM from turning the address into
a pointer that steps: on sm_90 a pass over an env's agents costs about three times the instructions of the
same loop written ``while j < n`` (docs/benchmarks.md, 2026-11-30; tests/test_compile_counted_loops.py).

So before a CUDA build, each device function's source is rewritten (Python semantics kept exactly)::

    for j in range(start, stop, step):          _counted_range0 = range(start, stop, step)
        body                             ->     _counted_next0 = _counted_range0.start
    else:                                       _counted_stop0 = _counted_range0.stop
        tail                                    _counted_step0 = _counted_range0.step
                                                while _counted_next0 < _counted_stop0:   # '>' for step < 0
                                                    j = _counted_next0
                                                    _counted_next0 += _counted_step0
                                                    body
                                                else:
                                                    tail

The count moves on before the body, so ``continue`` needs no rewriting, an assignment to ``j`` in the body
does not change the next ``j`` (as in a ``for``), ``break`` skips the ``else`` as before, and ``j`` after the
loop is the last value it took. The ``range`` call itself is kept: it evaluates and checks its arguments as
before, and its ends and step have the type Numba gives the range, so a loop over unsigned ends still counts
in uint64 (an idiom of gpurl's scenarios: no wraparound; a literal ``1`` added to a uint64 would be float64).
Only loops over the builtin ``range`` whose step is a literal non-zero int (or absent) are rewritten: the step's
sign picks the comparison. So are loops over a helper marked :data:`NONNEGATIVE_RANGE` (:func:`~.team.team_range`:
``range(team_rank(), n, team_size())``, which starts at 0 or above and steps up): their test is also
``_counted_next0 >= 0``, always true, from which the compiler knows the index is never negative and drops the
wraparound. The CPU build is not rewritten (its speed is measured as it is), and the CUDA
simulator runs the rewritten source, so the simulator tier checks the rewrite against the CPU build.

A function whose source cannot be read (defined in a REPL or generated: the toolkit's own generated kernel
loops with ``while`` already) or that closes over variables is compiled as it is.
"""
from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
import types
from typing import Callable

#: Off: every build compiles ``range`` as Numba lowers it (bench/kernel_loops.py compares the two).
ENABLED = True
_PREFIX = "_counted_"


def _literal_step(node: ast.expr | None) -> int | None:
    """The int value of a literal step (``2``, ``-1``); ``1`` when absent; None when not a literal."""
    if node is None:
        return 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _literal_step(node.operand)
        return None if value is None else -value
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


#: The attribute that marks a helper as returning a range that starts at 0 or above and steps up
#: (:func:`~.team.team_range`): its loops are counted too, and say that their index is never negative.
NONNEGATIVE_RANGE = "counted_nonnegative_range"


class _RangeLoops(ast.NodeTransformer):
    """Rewrites each eligible ``for NAME in range(...)`` or ``for NAME in HELPER(...)`` (``HELPER`` marked
    :data:`NONNEGATIVE_RANGE`; see the module docstring); counts them."""

    def __init__(self, names: dict):
        self.names = names  # the function's globals
        self.range_is_builtin = names.get("range", builtins.range) is builtins.range
        self.rewritten = 0

    def _eligible(self, node: ast.For) -> tuple[int, bool] | None:
        """(the step's sign, whether the index is known never negative), or None: not rewritten."""
        call = node.iter
        if not (isinstance(node.target, ast.Name) and isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and not call.keywords and not any(isinstance(a, ast.Starred) for a in call.args)):
            return None
        if getattr(self.names.get(call.func.id), NONNEGATIVE_RANGE, False):
            return 1, True
        if not (self.range_is_builtin and call.func.id == "range" and 1 <= len(call.args) <= 3):
            return None
        step = _literal_step(call.args[2] if len(call.args) == 3 else None)
        return (step, False) if step else None

    def visit_FunctionDef(self, node):  # a nested def is compiled on its own terms: leave it
        return node

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_For(self, node: ast.For):
        self.generic_visit(node)
        eligible = self._eligible(node)
        if eligible is None:
            return node
        step, nonnegative = eligible
        n = self.rewritten
        self.rewritten += 1
        the_range, nxt, stop, step_of = (f"{_PREFIX}{what}{n}" for what in ("range", "next", "stop", "step"))

        def load(name):
            return ast.Name(name, ast.Load())

        def store(name, value):
            return ast.Assign(targets=[ast.Name(name, ast.Store())], value=value)

        def part(name):
            return ast.Attribute(value=load(the_range), attr=name, ctx=ast.Load())

        test = ast.Compare(load(nxt), [ast.Lt() if step > 0 else ast.Gt()], [load(stop)])
        if nonnegative:  # always true, and it tells the compiler: no negative-index wraparound at the loads
            test = ast.BoolOp(ast.And(), [ast.Compare(load(nxt), [ast.GtE()], [ast.Constant(0)]), test])
        advance = ast.AugAssign(target=ast.Name(nxt, ast.Store()), op=ast.Add(), value=load(step_of))
        loop = ast.While(test=test, body=[store(node.target.id, load(nxt)), advance, *node.body], orelse=node.orelse)
        out = [store(the_range, node.iter), store(nxt, part("start")), store(stop, part("stop")),
               store(step_of, part("step")), loop]
        for new in out:
            ast.copy_location(new, node)
        return out


def counted_loops(pyfunc: Callable) -> Callable:
    """``pyfunc`` with its ``range`` loops rewritten as counted while loops (the module docstring), sharing
    its globals, defaults and name; ``pyfunc`` itself where there is nothing to rewrite or no source."""
    if not ENABLED or pyfunc.__closure__:
        return pyfunc
    try:
        lines, first_line = inspect.getsourcelines(pyfunc)
        filename = inspect.getsourcefile(pyfunc) or pyfunc.__code__.co_filename
    except (OSError, TypeError):
        return pyfunc
    tree = ast.parse(textwrap.dedent("".join(lines)))
    definition = tree.body[0] if tree.body else None
    if not isinstance(definition, ast.FunctionDef) or definition.name != pyfunc.__name__:
        return pyfunc
    # Compiled for its code alone: decorators and annotations are not evaluated again.
    definition.decorator_list = []
    definition.returns = None
    for arg in ast.walk(definition.args):
        if isinstance(arg, ast.arg):
            arg.annotation = None
    rewriter = _RangeLoops(pyfunc.__globals__)
    rewriter.generic_visit(definition)
    if not rewriter.rewritten:
        return pyfunc
    ast.fix_missing_locations(tree)
    ast.increment_lineno(tree, first_line - 1)
    namespace: dict = {}
    exec(compile(tree, filename, "exec"), pyfunc.__globals__, namespace)  # noqa: S102 - the function's own source
    code = namespace[pyfunc.__name__].__code__
    rewritten = types.FunctionType(code, pyfunc.__globals__, pyfunc.__name__, pyfunc.__defaults__)
    rewritten.__qualname__ = pyfunc.__qualname__
    rewritten.__module__ = pyfunc.__module__
    rewritten.__doc__ = pyfunc.__doc__
    rewritten.__wrapped__ = pyfunc
    return rewritten
