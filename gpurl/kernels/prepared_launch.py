"""CUDA launches whose kernel parameters are marshalled once: a step called from Python in microseconds.

numba-cuda marshals every argument of every launch anew: it types them all (to pick the overload), then
flattens each array into its kernel parameters (meminfo, parent, size, itemsize, data, shape, strides) and
packs them. For an env's ~30 arrays and ~15 constants that is about half a millisecond of host time per
step, whatever the batch (docs/benchmarks.md, 2026-11-27, H100), although only the actions (and a trainer's
``out=`` slots) change from step to step: an env's own arrays are allocated once and never move.

:class:`PreparedLaunch` does that work once, after an ordinary launch has compiled, typed and (for author
kernels) bounds-checked the build: it flattens the same arguments through the compiled overload's own
``_prepare_args`` (numba-cuda's parameter layout, not a copy of it), packs them with cuda.core's
``ParamHolder`` (the packer numba-cuda's own launch uses), and keeps that block. A launch then rewrites the
data pointers of the ``varying`` arrays in place and calls ``cuLaunchKernel`` on the caller's stream: no
typing, no flattening, no packing. The driver copies the parameters when the launch is issued (or captured
into a CUDA graph), so rewriting them for the next launch never touches one already issued.

Only the data pointers may vary: a varying array must keep the shape, strides and dtype of the one prepared
(the caller checks; an env's step checks its actions' and ``out=`` buffers' metadata at every call).
"""
from __future__ import annotations

import ctypes
from typing import Callable, Sequence

#: Where an array's data pointer sits among the parameters numba-cuda flattens it into:
#: meminfo, parent, size, itemsize, data, shape..., strides... (checked against the pointer at preparation).
_DATA = 4
_POINTER_SIZE = ctypes.sizeof(ctypes.c_void_p)


class NotPrepared(Exception):
    """This launch cannot be prepared (its launches stay on numba-cuda's dispatch); the message says why."""


def _param_holder():
    """cuda.core's ParamHolder (its module moved out of ``cuda.core.experimental`` in cuda.core 0.4)."""
    try:
        from cuda.core._kernel_arg_handler import ParamHolder
    except ImportError:
        try:
            from cuda.core.experimental._kernel_arg_handler import ParamHolder
        except ImportError as err:
            raise NotPrepared(f"cuda.core's ParamHolder is missing ({err})") from None
    return ParamHolder


class PreparedLaunch:
    """A kernel's launch with its parameter block packed once; ``launch(pointers, stream)`` issues it.

    ``function``: the CUfunction; ``grid``/``block``: blocks and threads per block (1-d);
    ``parameters``: the flattened kernel parameters, as numba-cuda's ``_prepare_args`` gives them;
    ``varying``: indices into ``parameters`` of the data pointers a launch rewrites, in the order
    ``launch`` takes them; ``launch_kernel``: the driver's ``cuLaunchKernel`` (tests pass a stand-in).
    """

    def __init__(self, function, grid: int, block: int, parameters: list, varying: Sequence[int],
                 launch_kernel: Callable):
        self._holder = _param_holder()(parameters)  # owns the packed values and the array of their addresses
        self._slots = []
        for k in varying:
            value_address = ctypes.c_void_p.from_address(self._holder.ptr + k * _POINTER_SIZE).value
            slot = ctypes.c_uint64.from_address(value_address)
            if not isinstance(parameters[k], int) or slot.value != parameters[k]:
                raise NotPrepared(f"parameter {k} did not pack as a 64-bit pointer: {parameters[k]!r}")
            self._slots.append(slot)
        self._function, self._grid, self._block = function, grid, block
        self._launch_kernel = launch_kernel
        self.pointers = tuple(parameters[k] for k in varying)  # the prepared ones (the env's own buffers)

    def launch(self, pointers: Sequence[int], stream: int) -> None:
        """Launch on ``stream`` (a CUstream handle) with the varying arrays at ``pointers`` (device
        addresses, in ``varying``'s order)."""
        for slot, pointer in zip(self._slots, pointers):
            slot.value = pointer
        (err,) = self._launch_kernel(self._function, self._grid, 1, 1, self._block, 1, 1, 0, stream,
                                     self._holder.ptr, 0)
        if _failed(err):
            raise RuntimeError(f"cuLaunchKernel failed: {err!r}")


def _failed(err) -> bool:
    """A driver call's CUresult is not CUDA_SUCCESS (an enum member or a plain int)."""
    return int(getattr(err, "value", err)) != 0


def flatten_arguments(overload, values: tuple, varying: Sequence[tuple]) -> tuple[list, list[int]]:
    """``values`` (a launch's arguments: scalars, device arrays, (named) tuples of them) flattened into kernel
    parameters by ``overload``'s own ``_prepare_args``, and the index of the data pointer of each array at a
    path of ``varying`` (a path: indices into ``values`` and then into its tuples). Raises
    :class:`NotPrepared` where the flattening would copy something to the device (an argument that is not a
    device array) or an array's data pointer is not where numba-cuda 0.30 puts it."""
    parameters: list = []
    written_back: list = []
    starts: dict[tuple, int] = {}

    def flatten(ty, value, path: tuple) -> None:
        if isinstance(value, tuple):
            for k, (t, v) in enumerate(zip(ty, value)):
                flatten(t, v, (*path, k))
            return
        starts[path] = len(parameters)
        overload._prepare_args(ty, value, 0, written_back, parameters)

    for k, (ty, value) in enumerate(zip(overload.argument_types, values)):
        flatten(ty, value, (k,))
    if written_back:
        raise NotPrepared("an argument is not a device array (numba-cuda would copy it at every launch)")
    indices = []
    for path in varying:
        index = starts[path] + _DATA
        if parameters[index] != _leaf(values, path).__cuda_array_interface__["data"][0]:
            raise NotPrepared(f"the data pointer of argument {path} is not its parameter {index}")
        indices.append(index)
    return parameters, indices


def _leaf(values: tuple, path: tuple):
    for k in path:
        values = values[k]
    return values


def prepare(dispatcher, grid: int, block: int, values: tuple, varying: Sequence[tuple]) -> PreparedLaunch:
    """The :class:`PreparedLaunch` of ``dispatcher``'s compiled overload for ``values`` (the arguments of a
    launch that just ran, so the overload exists). Raises :class:`NotPrepared` where it cannot be prepared
    (no such overload, a debug or cooperative build, an argument that is not a device array)."""
    from cuda.bindings import driver

    types = tuple(dispatcher.typeof_pyval(v) for v in values)
    overload = dispatcher.overloads.get(types)
    if overload is None:
        raise NotPrepared("no compiled overload for these arguments")
    if getattr(overload, "debug", False) or getattr(overload, "cooperative", False):
        raise NotPrepared("a debug or cooperative build (its launch does more than cuLaunchKernel)")
    parameters, varying_indices = flatten_arguments(overload, values, varying)
    function = overload._codelibrary.get_cufunc().handle
    if isinstance(function, driver.CUkernel):  # a context-free kernel: its function in this context
        err, function = driver.cuKernelGetFunction(function)
        if _failed(err):
            raise NotPrepared(f"cuKernelGetFunction failed: {err!r}")
    return PreparedLaunch(function, grid, block, parameters, varying_indices, driver.cuLaunchKernel)


__all__ = ["NotPrepared", "PreparedLaunch", "flatten_arguments", "prepare"]
