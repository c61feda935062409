"""CPU launches that pass an env's arrays as one table of addresses and shapes.

Numba unboxes every array of a launch's arguments at every call (about 70 ns each here): an env's named
tuple of some thirty arrays costs ~2 us per step, a tenth of a 4096-env ``simple`` step. An env's own arrays
never move (allocated once, rewritten in place), so their addresses and shapes can be written once into an
int64 table ``[K, 1 + MAX_DIMS]`` (address, then the shape). A small generated wrapper takes the table and
rebuilds the same named tuple inside compiled code (``numba.carray`` over each address: the very array type
the unboxed argument has), then calls the kernel's build: the kernel is the same compiled overload, and a
launch unboxes one array instead of thirty.

Only C-contiguous arrays qualify (a view's shape alone does not describe a strided one): :func:`address_table`
returns None for any other tuple, and the launch takes the ordinary path.
"""
from __future__ import annotations

import hashlib

import numpy as np

from . import build_cache

#: Dimensions a table row holds (the shapes of env arrays: [E], [E, N], [E, N, F], [E, N, N, F]).
MAX_DIMS = 4


def address_table(struct) -> np.ndarray | None:
    """int64 [len(struct), 1 + MAX_DIMS]: each field's data address and shape (0-padded); None unless every
    field is a writeable C-contiguous numpy array of 1 to MAX_DIMS dimensions."""
    rows = np.zeros((len(struct), 1 + MAX_DIMS), dtype=np.int64)
    for k, a in enumerate(struct):
        if (not isinstance(a, np.ndarray) or not 1 <= a.ndim <= MAX_DIMS or not a.flags.c_contiguous
                or not a.flags.writeable):
            return None
        rows[k, 0] = a.ctypes.data
        rows[k, 1:1 + a.ndim] = a.shape
    return rows


def _pointer_intrinsic():
    from numba import types
    from numba.core.extending import intrinsic

    @intrinsic
    def pointer(typingctx, address, like):
        """``address`` (int64) as a pointer to ``like``'s numbers (``like``: a Numba number class)."""
        ptr = types.CPointer(like.instance_type)

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], context.get_value_type(ptr))

        return ptr(types.int64, like), codegen

    return pointer


_POINTER = None


def wrapper_source(name: str, struct_cls: type, array_types, nargs: int) -> str:
    """``{name}(num_envs, num_agents, envs_per_call, table, a1, ...)``: the struct of ``array_types`` (Numba
    array types, field order) rebuilt from ``table``, then ``inner(num_envs, num_agents, envs_per_call, a0, a1,
    ...)``."""
    rest = "".join(f", a{k}" for k in range(1, nargs))
    fields = []
    for k, t in enumerate(array_types):
        shape = ", ".join(f"table[{k}, {1 + d}]" for d in range(t.ndim))
        fields.append(f"        carray(pointer(table[{k}, 0], {t.dtype.name}), ({shape}{',' if t.ndim == 1 else ''})),")
    return (f"def {name}(num_envs, num_agents, envs_per_call, table{rest}):\n"
            f"    a0 = Struct(\n" + "\n".join(fields) + "\n    )\n"
            f"    inner(num_envs, num_agents, envs_per_call, a0{rest})\n")


def table_wrapper(inner, inner_key: str | None, struct, nargs: int, name: str):
    """The compiled wrapper (a Numba dispatcher) that launches ``inner`` (the kernel's CPU build) with ``struct``
    given as its :func:`address_table`; None when ``struct``'s array types are not all C-contiguous."""
    import numba
    from numba import types

    global _POINTER
    struct_type = numba.typeof(struct)
    array_types = list(struct_type.types)
    if not all(isinstance(t, types.Array) and t.layout == "C" and t.mutable and 1 <= t.ndim <= MAX_DIMS
               for t in array_types):
        return None
    if _POINTER is None:
        _POINTER = _pointer_intrinsic()
    source = wrapper_source(name, type(struct), array_types, nargs)
    namespace = {"Struct": type(struct), "carray": numba.carray, "pointer": _POINTER, "inner": inner,
                 "__name__": __name__}
    namespace.update({t.dtype.name: t.dtype for t in array_types})
    exec(compile(source, f"<gpurl {name}>", "exec"), namespace)
    wrapper = numba.njit(namespace[name])  # with NRT: carray makes its (unowned) arrays through it
    where = build_cache.cache_dir()
    if where is not None and inner_key is not None:
        key = hashlib.sha256(f"{inner_key}\0{source}\0{type(struct).__qualname__}".encode()).hexdigest()
        build_cache.enable(wrapper, key, where)
    return wrapper


__all__ = ["MAX_DIMS", "address_table", "table_wrapper", "wrapper_source"]
