"""Direct CPU launches of an env kernel's build: the compiled overload called without Numba's per-call type
dispatch, an env's own arrays passed as one address table (:mod:`.address_table`)."""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from . import build_cache
from .address_table import address_table, native_address, table_wrapper, wrapper_signature
from .cpu_chunks import _cpu_envs_per_call

if TYPE_CHECKING:
    from .program import EnvKernel


class DirectLaunch:
    """Launches of one CPU build that call its compiled overload directly.

    Numba's dispatcher types every argument at every call; for a named tuple of arrays (an env's state)
    that costs microseconds per launch. ``launcher(key, E, N, *args)`` launches through
    :meth:`EnvKernel.launch` (errors diagnosed as usual) the first time it sees ``key``, then calls that
    overload's entry point for every later launch with the same ``key`` (a failure there gets the same
    diagnosis).

    ``key``: any hashable value the caller guarantees is equal only for arguments of equal Numba types,
    e.g. the action array's dtype and ndim when every other argument is the env's own, fixed-type tuple.
    A key that breaks this promise makes Numba unbox arrays as the wrong type.

    :meth:`pin` names a tuple of arrays that never moves (an env's own): a launch whose first argument is
    that very object passes it as an address table (:mod:`.address_table`), so Numba unboxes one array
    instead of each of the tuple's; the kernel's compiled overload is the same.

    The first launches are bounds-checked (:mod:`.bounds`) until the kernel settles the shapes of their
    arrays; the step loop then runs unchecked, so later launches must keep those shapes (an env's do).
    """

    def __init__(self, kernel: "EnvKernel", constants: tuple = ()):
        self.kernel, self.constants = kernel, constants
        self._entries: dict = {}
        self._pinned, self._table = None, None
        self._table_entries: dict = {}
        self._checking = True  # the kernel's bounds check (.bounds) still wants launches of these shapes

    def pin(self, struct) -> None:
        """Launches whose first argument is ``struct`` go through its address table from now on (the caller
        promises that its arrays are neither freed nor moved while it launches them); None: none do."""
        self._pinned, self._table = struct, None if struct is None else address_table(struct)
        self._table_entries = {}

    def __call__(self, key, num_envs: int, num_agents: int, *args) -> None:
        pinned = self._table is not None and bool(args) and args[0] is self._pinned
        entry = self._table_entries.get(key) if pinned else self._entries.get(key)
        if entry is not None:
            if num_envs:
                if self._checking:
                    self._checking = not self.kernel.bounds("cpu", self.constants, num_envs, num_agents, args)
                launch_args = (self._table, *args[1:]) if pinned else args
                try:
                    entry(num_envs, num_agents, _cpu_envs_per_call(num_envs, num_agents), *launch_args)
                except Exception as err:  # e.g. an index out of bounds under NUMBA_BOUNDSCHECK=1
                    self.kernel._raise_diagnosed(err, "cpu", num_envs, num_agents, args, self.constants)
            return
        self.kernel.launch("cpu", num_envs, num_agents, *args, constants=self.constants)  # its first check too
        dispatcher = self.kernel.build("cpu", self.constants)
        signature = tuple(dispatcher.typeof_pyval(a) for a in (num_envs, num_agents, 1, *args))
        overload = dispatcher.overloads.get(signature)
        if overload is None:  # the launch returned early (no envs) and compiled nothing
            return
        self._entries[key] = overload.entry_point
        if pinned:
            entry = self._table_entry(dispatcher, signature)
            if entry is None:  # the pinned arrays do not qualify: plain launches
                self._table = None
            else:
                self._table_entries[key] = entry

    def _table_entry(self, dispatcher, signature: tuple):
        """The address-table wrapper's entry point, bound to ``dispatcher``'s overload for ``signature``
        (compiled, or loaded from the build cache, without running); None when the pinned tuple's arrays do
        not qualify."""
        key = self.kernel.cpu_build_key(self.constants) if build_cache.cache_dir() is not None else None
        wrapper = table_wrapper(key, self._pinned, signature, f"{self.kernel.name}_cpu_table")
        if wrapper is None:
            return None
        table_signature = wrapper_signature(signature, self._table)
        wrapper.compile(table_signature)
        address = native_address(dispatcher.overloads[signature])
        return functools.partial(wrapper.overloads[table_signature].entry_point, address)
