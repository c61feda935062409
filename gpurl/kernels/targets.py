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
"""
from __future__ import annotations

import types
from typing import Callable

TARGETS = ("cpu", "cuda")


class DeviceFunction:
    """A plain-Python function that gpurl compiles per target.

    Calling the object runs the plain Python (handy in references and debugging).
    ``fn.build(target)`` returns the compiled function for ``"cpu"`` or ``"cuda"`` (cached).
    """

    def __init__(self, pyfunc: Callable, overrides: dict[str, Callable] | None = None):
        self.py_func = pyfunc
        self.__name__ = pyfunc.__name__
        self.__doc__ = pyfunc.__doc__
        self.__wrapped__ = pyfunc
        self._overrides = dict(overrides or {})
        self._builds: dict[str, Callable] = {}

    def __call__(self, *args):
        return self.py_func(*args)

    def __repr__(self) -> str:
        return f"<gpurl device function {self.py_func.__module__}.{self.__name__}>"

    def override(self, target: str):
        """Decorator: give ``target`` its own plain-Python implementation of this function."""
        _check_target(target)

        def register(pyfunc: Callable) -> Callable:
            self._overrides[target] = pyfunc
            self._builds.pop(target, None)
            return pyfunc

        return register

    def source_for(self, target: str) -> Callable:
        """The plain-Python function used for ``target``, globals rebound to that target."""
        return rebind_globals(self._overrides.get(target, self.py_func), target)

    def build(self, target: str) -> Callable:
        """The compiled function for ``target`` (compiled on the first call, then cached)."""
        _check_target(target)
        if target not in self._builds:
            self._builds[target] = compile_device(self.source_for(target), target)
        return self._builds[target]


def device(pyfunc: Callable | None = None):
    """Mark a plain-Python helper as a gpurl device function (compiled per target on demand)."""
    if pyfunc is None:
        return device
    return DeviceFunction(pyfunc)


def _check_target(target: str) -> None:
    if target not in TARGETS:
        raise ValueError(f"target must be one of {TARGETS}, got {target!r}")


def rebind_globals(pyfunc: Callable, target: str) -> Callable:
    """Copy ``pyfunc`` with globals where each DeviceFunction is replaced by its ``target`` build."""
    needed = {name for name in pyfunc.__code__.co_names if name in pyfunc.__globals__}
    swapped = {
        name: pyfunc.__globals__[name].build(target)
        for name in needed
        if isinstance(pyfunc.__globals__[name], DeviceFunction)
    }
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
