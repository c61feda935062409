"""CPU launches that pass an env's arrays as one table of addresses and shapes.

Numba unboxes every array of a launch's arguments at every call (about 70 ns each here): an env's named
tuple of some thirty arrays costs ~2 us per step, a tenth of a 4096-env ``simple`` step. An env's own arrays
never move (allocated once, rewritten in place), so their addresses and shapes can be written once into an
int64 table ``[K, 1 + MAX_DIMS]`` (address, then the shape). A small generated wrapper takes the table and
rebuilds the same named tuple inside compiled code (``numba.carray`` over each address: the very array type
the unboxed argument has), then calls the kernel's compiled overload through its address: a launch unboxes
one array instead of thirty and runs the very machine code a plain launch runs.

The wrapper calls the overload's native entry (Numba's calling convention, given the address at each call)
rather than the dispatcher: a call to a dispatcher would link the whole build into the wrapper, and LLVM would
optimize it and emit its machine code a second time. The wrapper checks, when it compiles, that the types it
passes are the overload's.

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


def _call_intrinsic(expected: tuple):
    """``call(address, args)``: call the Numba-compiled function at ``address`` (its native entry, returning
    None) with the tuple ``args``, whose Numba types must be ``expected`` (a typing error otherwise: the callee
    would read arguments of other types); an exception it raises propagates to the caller."""
    from numba import types
    from numba.core import cgutils
    from numba.core.errors import TypingError
    from numba.core.extending import intrinsic

    @intrinsic
    def call(typingctx, address, args):
        if tuple(args.types) != expected:
            raise TypingError(f"the table wrapper passes {tuple(args.types)}, the kernel's overload takes {expected}")

        def codegen(context, builder, signature, llargs):
            argtys = list(expected)
            function = context.call_conv.get_function_type(types.none, argtys)
            callee = builder.inttoptr(llargs[0], function.as_pointer())
            values = cgutils.unpack_tuple(builder, llargs[1], len(argtys))
            status, _ = context.call_conv.call_function(builder, callee, types.none, argtys, values)
            with cgutils.if_unlikely(builder, status.is_error):
                context.call_conv.return_status_propagate(builder, status)
            return context.get_dummy_value()

        return types.none(types.int64, args), codegen

    return call


def wrapper_source(name: str, struct_cls: type, array_types, nargs: int) -> str:
    """``{name}(address, num_envs, num_agents, envs_per_call, table, a1, ...)``: the struct of ``array_types``
    (Numba array types, field order) rebuilt from ``table``, then ``call(address, (num_envs, num_agents,
    envs_per_call, a0, a1, ...))``: the kernel's overload at ``address``."""
    rest = "".join(f", a{k}" for k in range(1, nargs))
    fields = []
    for k, t in enumerate(array_types):
        shape = ", ".join(f"table[{k}, {1 + d}]" for d in range(t.ndim))
        fields.append(f"        carray(pointer(table[{k}, 0], {t.dtype.name}), ({shape}{',' if t.ndim == 1 else ''})),")
    return (f"def {name}(address, num_envs, num_agents, envs_per_call, table{rest}):\n"
            f"    a0 = Struct(\n" + "\n".join(fields) + "\n    )\n"
            f"    call(address, (num_envs, num_agents, envs_per_call, a0{rest}))\n")


def table_wrapper(inner_key: str | None, struct, signature: tuple, name: str):
    """The compiled wrapper (a Numba dispatcher) that launches the kernel overload of ``signature`` (the Numba
    types of ``(num_envs, num_agents, envs_per_call, struct, a1, ...)``) with ``struct`` given as its
    :func:`address_table`: call it with the overload's native address first (:func:`native_address`). None
    when ``struct``'s array types are not all C-contiguous."""
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
    source = wrapper_source(name, type(struct), array_types, len(signature) - 3)
    namespace = {"Struct": type(struct), "carray": numba.carray, "pointer": _POINTER,
                 "call": _call_intrinsic(tuple(signature)), "__name__": __name__}
    namespace.update({t.dtype.name: t.dtype for t in array_types})
    exec(compile(source, f"<gpurl {name}>", "exec"), namespace)
    wrapper = numba.njit(namespace[name])  # with NRT: carray makes its (unowned) arrays through it
    where = build_cache.cache_dir()
    if where is not None and inner_key is not None:
        key = hashlib.sha256(f"{inner_key}\0{source}\0{type(struct).__qualname__}\0{signature}".encode()).hexdigest()
        build_cache.enable(wrapper, key, where)
    return wrapper


def wrapper_signature(signature: tuple, table: np.ndarray) -> tuple:
    """The Numba types a table wrapper compiles for: the overload's native address (int64), then the kernel
    overload's ``signature`` with the struct replaced by ``table``'s type."""
    import numba

    return (numba.types.int64, *signature[:3], numba.typeof(table), *signature[4:])


def native_address(overload) -> int:
    """The address of a compiled overload's native entry (Numba's calling convention), which a table wrapper
    calls; the overload's dispatcher must outlive every call."""
    address = overload.library.get_pointer_to_function(overload.fndesc.llvm_func_name)
    if not address:
        raise RuntimeError(f"no native entry {overload.fndesc.llvm_func_name!r} in the compiled overload")
    return address


__all__ = ["MAX_DIMS", "address_table", "native_address", "table_wrapper", "wrapper_signature", "wrapper_source"]
