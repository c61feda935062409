"""A CPU build's inlining copies each callee once, not once per block: a quarter less time to compile.

The CPU build inlines every device function (``inline="always"``, :func:`~.targets.compile_device`) at the
level of Numba's IR, and Numba's inliner copies the callee's IR before it splices it in
(``InlineWorker.inline_ir``). It deep-copies the blocks one at a time, each with a memo of its own, and every
block refers to the function's scope, which holds all of its variables: so each block copies the whole
scope again, and a callee of B blocks and V variables costs B x V copies where V would do. With the phases
and helpers inlined a few hundred times per build, that was a third of a build's compile time (numba 0.68;
numba/numba#8989 reports the same).

:func:`one_copy_per_inline` runs a compile with ``inline_ir`` copying the blocks with one memo: the copy
keeps the callee's sharing as it is (one scope, each variable one object, as in the IR copied), which is
what the per-block copies rebuild anyway (the inliner then gives all the callee's blocks the caller's
scope). The kernel that comes out is the same; :func:`fast_cpu_compiles` makes a CPU build's dispatcher
compile this way. Other Numba compiles in the process are untouched: the method is swapped only while a
gpurl build compiles, under Numba's global compiler lock (no other compile runs then). With a Numba whose
``inline_ir`` reads differently, nothing is swapped and builds compile as Numba does (:func:`available`).
"""
from __future__ import annotations

import contextlib
import inspect
import textwrap
from typing import Callable, Iterator

#: ``inline_ir``'s per-block copy in numba 0.68, and what replaces it.
_PER_BLOCK = ("            for block_label, block in the_ir.blocks.items():\n"
              "                new_block = copy.deepcopy(the_ir.blocks[block_label])\n")
_ONE_MEMO = ("            memo = {}\n"
             "            for block_label, block in the_ir.blocks.items():\n"
             "                new_block = copy.deepcopy(the_ir.blocks[block_label], memo)\n")

_UNSET = object()
_one_memo_inline_ir = _UNSET  # built at the first use: None where Numba's source is not the one expected


def _patched_inline_ir() -> Callable | None:
    """``InlineWorker.inline_ir`` with the one-memo copy, compiled from the installed Numba's own source in
    its module's namespace; None when that source does not hold the per-block copy exactly once."""
    global _one_memo_inline_ir
    if _one_memo_inline_ir is _UNSET:
        from numba.core import inline_closurecall

        try:  # indented as in its class
            lines, first_line = inspect.getsourcelines(inline_closurecall.InlineWorker.inline_ir)
            source = "".join(lines)
        except (OSError, TypeError):  # no source on disk (a frozen install)
            source, first_line = "", 1
        if source.count(_PER_BLOCK) != 1:
            _one_memo_inline_ir = None
        else:
            namespace: dict = {}
            # the lines before the added one keep their numbers in a traceback
            padded = "\n" * (first_line - 1) + textwrap.dedent(source.replace(_PER_BLOCK, _ONE_MEMO))
            code = compile(padded, inspect.getsourcefile(inline_closurecall), "exec")
            exec(code, inline_closurecall.__dict__, namespace)
            _one_memo_inline_ir = namespace["inline_ir"]
    return _one_memo_inline_ir


def available() -> bool:
    """The installed Numba's inliner can be made to copy once (its ``inline_ir`` is the one this expects)."""
    return _patched_inline_ir() is not None


@contextlib.contextmanager
def one_copy_per_inline() -> Iterator[None]:
    """Compiles inside the block inline with one copy per callee (a null context where not :func:`available`)."""
    patched = _patched_inline_ir()
    if patched is None:
        yield
        return
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.inline_closurecall import InlineWorker

    with global_compiler_lock:  # reentrant; while held no other thread compiles with the swapped method
        original = InlineWorker.__dict__["inline_ir"]
        InlineWorker.inline_ir = patched
        try:
            yield
        finally:
            InlineWorker.inline_ir = original


def fast_cpu_compiles(dispatcher) -> None:
    """Make every compile of ``dispatcher`` (a CPU build's, at its first launch of new argument types) inline
    with one copy per callee: wraps its ``compile`` (a Numba internal that ``_compile_for_args`` calls;
    checked with numba 0.68). A dispatcher without one is left as it is."""
    compile_signature = getattr(dispatcher, "compile", None)
    if compile_signature is None:
        return

    def compile_with_one_copy(sig):
        with one_copy_per_inline():
            return compile_signature(sig)

    dispatcher.compile = compile_with_one_copy


__all__ = ["available", "fast_cpu_compiles", "one_copy_per_inline"]
