"""Declared arrays of a kernel env: what an env author writes instead of allocating.

An env class declares its per-env arrays by name, dtype and trailing dims::

    state = {"x": field("int32", "agents"), "food_x": field("int32", "num_food"), "timestep": field("int32")}

Every array gets a leading ``[num_envs]`` dim. A trailing dim is an int, ``"agents"`` (the env's agent
count), ``"obs"`` (``env.obs_dim``), a size the env's ``field_sizes()`` names, or the name of an attribute of
the env's params (``"num_food"``).
:class:`gpurl.envs.KernelEnv` allocates them zeroed on ``env.device`` and hands the kernels one NamedTuple of
zero-copy views holding these fields and the toolkit's own (obs, reward, flags, ...).
"""
from __future__ import annotations

import collections
import hashlib
from dataclasses import dataclass
from typing import Any, Callable

_DTYPES = ("bool", "float32", "int32", "int64", "uint8")
#: CUDA builds store :attr:`Field.lanes_interleaved` scratch column by column (False: row-major, as before
#: issue 42; bench/env_vs_ref.py's ``--also-row-major-scratch`` times both side by side).
INTERLEAVE_LANES = True


@dataclass(frozen=True)
class Field:
    """One declared array: ``dtype`` (a name in ``float32 int32 int64 uint8 bool``) and its trailing
    ``dims`` after ``[num_envs]``; ``fill``: its value when allocated."""

    dtype: str
    dims: tuple = ()
    fill: float = 0
    #: ``shape_of(env) -> full shape``, for arrays whose rows are not envs (e.g. per-lane scratch, see
    #: :func:`~.neighbors.knn_scratch`); replaces ``[num_envs, *dims]``.
    shape_of: Callable | None = None
    #: A per-lane scratch array ``[rows, cols]`` (row = :func:`~.scratch.lane`) stored column by column in a CUDA
    #: build: the kernel still indexes ``[row, col]``, but the memory is ``[cols, rows]``, so the lanes of a warp
    #: reading one column read adjacent words (one coalesced access, as CUDA interleaves a thread's local
    #: arrays), where row-major rows ``cols`` words apart take a memory transaction per lane. The CPU build,
    #: one row per env run by one thread, keeps rows contiguous.
    lanes_interleaved: bool = False

    def __post_init__(self):
        if self.dtype not in _DTYPES:
            raise ValueError(f"field dtype must be one of {_DTYPES}, got {self.dtype!r}")
        for dim in self.dims:
            if isinstance(dim, bool) or not isinstance(dim, (int, str)):
                raise TypeError(f"a field dim is an int or a name, got {dim!r}")

    def shape(self, env: Any, sizes: dict[str, int], name: str) -> tuple[int, ...]:
        """``(env.num_envs, *dims)`` with every named dim resolved (``sizes`` first, then ``env.params``),
        or ``shape_of(env)``."""
        if self.shape_of is not None:
            return tuple(int(d) for d in self.shape_of(env))
        params = getattr(env, "params", None)
        out = [env.num_envs]
        for dim in self.dims:
            if isinstance(dim, str):
                if dim in sizes:
                    dim = sizes[dim]
                elif hasattr(params, dim):
                    dim = getattr(params, dim)
                else:
                    raise ValueError(f"field {name!r}: dim {dim!r} is neither one of {sorted(sizes)} nor an "
                                     f"attribute of {type(params).__name__}")
            if isinstance(dim, bool) or not isinstance(dim, int) or dim < 0:
                raise ValueError(f"field {name!r}: dims must be ints >= 0, got {dim!r}")
            out.append(int(dim))
        return tuple(out)

    def allocate(self, shape: tuple[int, ...], device, target: str = "cpu"):
        """A torch tensor of ``shape`` on ``device``, filled with ``fill``; for a ``target="cuda"`` build of a
        :attr:`lanes_interleaved` field, the ``[rows, cols]`` view of a ``[cols, rows]`` tensor."""
        import torch

        dtype = getattr(torch, self.dtype)
        if self.lanes_interleaved and INTERLEAVE_LANES and target == "cuda" and len(shape) == 2:
            return torch.full(shape[::-1], self.fill, dtype=dtype, device=device).t()
        return torch.full(shape, self.fill, dtype=dtype, device=device)


def field(dtype: str, *dims, fill: float = 0) -> Field:
    """Declare a ``[num_envs, *dims]`` array of ``dtype`` (see the module docstring)."""
    return Field(dtype, tuple(dims), fill)


def resolve_size(env: Any, size) -> int:
    """``size`` (an int, or the name of an attribute of ``env.params``) as an int."""
    return int(getattr(env.params, size) if isinstance(size, str) else size)


_struct_types: dict[tuple, type] = {}


def struct_type(type_name: str, names: tuple[str, ...]) -> type:
    """One NamedTuple class per name and field list, shared by every env of a class: Numba compiles a
    kernel once per argument type, and two envs of one class must pass the same type."""
    key = (type_name, names)
    if key not in _struct_types:
        cls = collections.namedtuple(type_name, names)
        # A module attribute of a name fixed by the field list, so that pickle (Numba's on-disk build cache,
        # :mod:`.build_cache`, stores argument types) refers to the class instead of copying it: a copy would
        # be a type of its own, and no cached build would match it in the next process.
        cls.__qualname__ = f"_{type_name}_{hashlib.sha256(repr(names).encode()).hexdigest()[:16]}"
        cls.__module__ = __name__
        globals()[cls.__qualname__] = cls
        _struct_types[key] = cls
    return _struct_types[key]
