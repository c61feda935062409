"""One plain-Python source, two compiled targets.

A kernel author writes ordinary Python functions over arrays and marks helpers with
:func:`device`. gpurl compiles each function for a *target*:

- ``"cpu"``: ``numba.njit`` (the driver loop is ``prange`` over envs, see :mod:`.program`);
- ``"cuda"``: ``numba.cuda.jit(device=True)`` (real GPU, Numba's CUDA simulator, or PTX-only compile).

Numba cannot call a CPU ``@njit`` function from a CUDA kernel (the simulator fails too), so a helper is
compiled once per target from the same source: before compiling, the function's globals are copied and
every :class:`DeviceFunction` they name is replaced by *its* build for the same target. Intrinsics whose
best implementation differs per target (e.g. correctly rounded ``cos`` on the CPU, ``cosf`` on the GPU)
are DeviceFunctions with a per-target override, so author code never branches on the backend.

A build may also fix *constants*: module globals (sizes, say) given values for that build only, which
Numba compiles as literals, so loops over a fixed count unroll (see :func:`freeze_constants`).
"""
from __future__ import annotations

import types
from typing import Callable

import numpy as np

from . import counted_loops as _counted

TARGETS = ("cpu", "cuda")


class _CudaModule:
    """Stands for ``numba.cuda`` in a module of CUDA overrides (``from .targets import CUDA as cuda``): a CUDA
    build binds the real module (:func:`rebind_globals`), the simulator's under ``NUMBA_ENABLE_CUDASIM``.
    Importing ``numba.cuda`` when gpurl is imported would fix that choice before a test or a user makes it."""

    def __repr__(self) -> str:
        return "<numba.cuda, bound by a CUDA build>"


CUDA = _CudaModule()


class DeviceFunction:
    """A plain-Python function that gpurl compiles per target.

    Calling the object runs the plain Python (handy in references and debugging).
    ``fn.build(target)`` returns the compiled function for ``"cpu"`` or ``"cuda"`` (cached);
    ``fn.build(target, constants)`` one with those globals fixed, in it and in every helper it calls.
    """

    def __init__(self, pyfunc: Callable, overrides: dict[str, Callable] | None = None, team_only: bool = False):
        self.py_func = pyfunc
        #: Callable only from a team phase (:mod:`.team`): its CUDA build splits work over the env's threads.
        self.team_only = team_only
        #: Targets whose override needs a team of threads; plain Python (one agent at a time) runs ``py_func``.
        self._threaded: set[str] = set()
        self.__name__ = pyfunc.__name__
        self.__doc__ = pyfunc.__doc__
        self.__wrapped__ = pyfunc
        self._overrides = dict(overrides or {})
        self._builds: dict[tuple, Callable] = {}

    def __call__(self, *args):
        return self.py_func(*args)

    def __repr__(self) -> str:
        return f"<gpurl device function {self.py_func.__module__}.{self.__name__}>"

    def override(self, target: str, threaded: bool = False):
        """Decorator: give ``target`` its own plain-Python implementation of this function. ``threaded``: it is
        the work of a team of threads (barriers, thread indices), so plain Python, which runs one agent after
        another (:meth:`plain`), runs ``py_func`` for that target instead."""
        _check_target(target)

        def register(pyfunc: Callable) -> Callable:
            self._overrides[target] = pyfunc
            if threaded:
                self._threaded.add(target)
            for key in [k for k in self._builds if k[0] == target]:
                del self._builds[key]
            return pyfunc

        return register

    def plain(self, target: str) -> Callable:
        """The implementation plain Python runs for ``target`` (:mod:`.plain_python`): its override unless that
        one is ``threaded``."""
        return self.py_func if target in self._threaded else self._overrides.get(target, self.py_func)

    def source_for(self, target: str, constants: tuple = ()) -> Callable:
        """The plain-Python function used for ``target``, globals rebound to that target (and ``constants``,
        a :func:`freeze_constants` tuple); a CUDA build's ``range`` loops counted (:mod:`.counted_loops`)."""
        pyfunc = self._overrides.get(target, self.py_func)
        if target == "cuda":
            pyfunc = _counted.counted_loops(pyfunc)
        return rebind_globals(pyfunc, target, constants)

    def build(self, target: str, constants: tuple = ()) -> Callable:
        """The compiled function for ``target`` with ``constants`` fixed (compiled on the first call, then
        cached per target and constants)."""
        _check_target(target)
        key = (target, constants, target == "cuda" and _counted.ENABLED)  # the flag: bench/kernel_loops.py
        if key not in self._builds:
            self._builds[key] = compile_device(self.source_for(target, constants), target)
        return self._builds[key]


def device(pyfunc: Callable | None = None, team_only: bool = False):
    """Mark a plain-Python helper as a gpurl device function (compiled per target on demand); ``team_only``:
    callable only from a team phase (:mod:`.team`)."""
    if pyfunc is None:
        return lambda fn: DeviceFunction(fn, team_only=team_only)
    return DeviceFunction(pyfunc, team_only=team_only)


def _check_target(target: str) -> None:
    if target not in TARGETS:
        raise ValueError(f"target must be one of {TARGETS}, got {target!r}")


def freeze_constants(constants: dict | None) -> tuple:
    """``{global name: value}`` -> the hashable form builds take: sorted ``(name, value)`` pairs.

    A constant replaces the module global of that name in every function of a build that reads it, so
    the name must be unique to its kernel (``SIMPLE_TAG_AGENTS``, not ``N``). A kernel reads it as
    ``SIZE if SIZE > 0 else arrays.shape[k]`` with the global defaulting to 0: one source serves the build
    with run-time sizes and any number of builds with fixed ones.

    A value is an int, a ``np.float32``, or a non-empty tuple of ints or of ``np.float32`` (a small table:
    ``TABLE[k]`` with ``k`` a literal, e.g. in an unrolled loop, compiles to the number itself).
    """
    frozen = []
    for name, value in sorted((constants or {}).items()):
        if not name.isidentifier() or not _literal_value(value):
            raise TypeError(f"constant {name!r}: expected an identifier and an int, a np.float32 or a tuple of "
                            f"ints or of np.float32, got {value!r}")
        frozen.append((name, value))
    return tuple(frozen)


def _literal_value(value) -> bool:
    """``value`` compiles to a literal of one type: an int (not a bool), a np.float32 (a Python float would
    be float64), or a non-empty tuple of either kind, all of one type."""
    def scalar(v) -> type | None:
        if isinstance(v, int) and not isinstance(v, bool):
            return int
        return np.float32 if isinstance(v, np.float32) else None

    if isinstance(value, tuple):
        types_ = {scalar(v) for v in value}
        return len(types_) == 1 and None not in types_
    return scalar(value) is not None


def rebind_globals(pyfunc: Callable, target: str, constants: tuple = ()) -> Callable:
    """Copy ``pyfunc`` with globals where each DeviceFunction is replaced by its ``target`` build (with the
    same ``constants``) and each global named in ``constants`` by its value."""
    needed = {name for name in pyfunc.__code__.co_names if name in pyfunc.__globals__}
    swapped = {
        name: pyfunc.__globals__[name].build(target, constants)
        for name in needed
        if isinstance(pyfunc.__globals__[name], DeviceFunction)
    }
    swapped.update((name, value) for name, value in constants if name in needed)
    if target == "cuda" and any(pyfunc.__globals__[name] is CUDA for name in needed):
        from numba import cuda

        swapped.update((name, cuda) for name in needed if pyfunc.__globals__[name] is CUDA)
    if not swapped:
        return pyfunc
    new_globals = dict(pyfunc.__globals__)
    new_globals.update(swapped)
    clone = types.FunctionType(
        pyfunc.__code__, new_globals, pyfunc.__name__, pyfunc.__defaults__, pyfunc.__closure__
    )
    clone.__qualname__ = pyfunc.__qualname__
    clone.__module__ = pyfunc.__module__
    return clone


def compile_device(pyfunc: Callable, target: str) -> Callable:
    """Compile an already-rebound plain function as a device function of ``target``."""
    if target == "cpu":
        import numba

        # No fastmath: the CPU build is the exact twin of the reference (no FMA contraction).
        # _nrt=False: kernels never allocate, and Numba's reference counting of every array pulled out
        # of an argument tuple cost ~30 ns per agent per phase (atomic inc/dec), more than the work.
        return numba.njit(inline="always", _nrt=False)(pyfunc)
    from numba import cuda

    return cuda.jit(device=True)(pyfunc)
