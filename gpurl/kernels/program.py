"""Env kernels as a list of phases; gpurl writes the launch and the loops for each target.

A phase is a plain-Python function over arrays:

- ``per_agent(fn)``: ``fn(e, i, *args)`` runs for every env ``e`` and agent ``i``;
- ``per_env(fn)``: ``fn(e, *args)`` runs once per env (per-env reductions, flags, counters).

Consecutive phases are separated by a barrier: every write of phase p is visible to phase p+1 in
the same env. The CUDA build runs one block per env (WarpDrive's layout); each thread strides over
agents, so an env may hold more agents than a block has threads; a barrier is ``syncthreads`` and a
per-env phase runs on thread 0. The CPU build is ``prange`` over envs running the phases one after
another inside each env's iteration, so a barrier costs nothing. The author writes no thread index, launch or backend switch.

``args`` are whatever Numba accepts as kernel arguments: arrays, scalars, and (named) tuples of them.

Errors in author code are reported at the author's file and line (:mod:`.errors`): a phase Numba cannot
type raises :class:`~.errors.KernelTypingError`; an out-of-bounds index in the CPU build (checked when
``NUMBA_BOUNDSCHECK=1``) raises :class:`~.errors.KernelIndexError`. :meth:`EnvKernel.run_python` runs
the phases uncompiled, for debugging with ordinary Python tracebacks.
"""
from __future__ import annotations

import threading
import types
from dataclasses import dataclass
from typing import Callable

from .errors import index_error, is_index_error, typing_error
from .targets import TARGETS, DeviceFunction

#: Threads per block: big enough to fill an SM with several env-blocks, small enough that
#: per-thread registers of a phase-heavy kernel do not limit occupancy.
MAX_THREADS_PER_BLOCK = 256
WARP = 32


@dataclass(frozen=True)
class Phase:
    """One step of a kernel: ``fn`` run per agent (``kind="agent"``) or per env (``"env"``); make it
    with :func:`per_agent` / :func:`per_env`."""

    kind: str  # "agent" | "env"
    fn: DeviceFunction


def per_agent(fn) -> Phase:
    """A phase that runs ``fn(e, i, *args)`` for every agent ``i`` of every env ``e``."""
    return Phase("agent", fn if isinstance(fn, DeviceFunction) else DeviceFunction(fn))


def per_env(fn) -> Phase:
    """A phase that runs ``fn(e, *args)`` once per env ``e``."""
    return Phase("env", fn if isinstance(fn, DeviceFunction) else DeviceFunction(fn))


def _cpu_sources(name: str, phases: tuple[Phase, ...], nargs: int) -> tuple[list[str], str]:
    """Sources of one CPU function per phase (``{name}_p{p}``: the phase over one env's agents) and
    of the prange driver ``{name}`` that calls them in order for each env."""
    args = ", ".join(f"a{k}" for k in range(nargs))
    bodies = []
    for p, phase in enumerate(phases):
        if phase.kind == "agent":
            call = f"    for i in range(num_agents):\n        phase{p}(e, i, {args})"
        else:
            call = f"    phase{p}(e, {args})"
        bodies.append(f"def {name}_p{p}(e, num_agents, {args}):\n{call}\n")
    calls = "\n".join(f"        {name}_p{p}(e, num_agents, {args})" for p in range(len(phases)))
    driver = f"def {name}(num_envs, num_agents, {args}):\n    for e in prange(num_envs):\n{calls}\n"
    return bodies, driver


def _cuda_source(name: str, phases: tuple[Phase, ...], nargs: int) -> str:
    """Source of the CUDA kernel ``{name}``: one block per env, threads stride over agents."""
    args = ", ".join(f"a{k}" for k in range(nargs))
    lines = [
        f"def {name}(num_envs, num_agents, {args}):",
        "    e = cuda.blockIdx.x",
        "    if e >= num_envs:",
        "        return",  # the whole block leaves together: no barrier is skipped by half a block
        "    t = cuda.threadIdx.x",
    ]
    for p, phase in enumerate(phases):
        if p:
            lines.append("    cuda.syncthreads()")
        if phase.kind == "agent":
            lines += [
                "    i = t",
                "    while i < num_agents:",
                f"        phase{p}(e, i, {args})",
                "        i += cuda.blockDim.x",
            ]
        else:
            lines += ["    if t == 0:", f"        phase{p}(e, {args})"]
    return "\n".join(lines) + "\n"


def _exec(source: str, fname: str, namespace: dict):
    exec(compile(source, f"<gpurl {fname}>", "exec"), namespace)
    return namespace[fname]


class EnvKernel:
    """A compiled-on-demand env kernel: ``kernel.launch(target, E, N, *args)``.

    One build per target and argument types (Numba specialises on types, not on sizes), so changing
    num_envs, num_agents or any run-time size never recompiles.
    """

    def __init__(self, name: str, phases: list[Phase], nargs: int):
        if not phases:
            raise ValueError(f"kernel {name!r} needs at least one phase")
        bad = [p for p in phases if not isinstance(p, Phase)]
        if bad:
            raise TypeError(f"kernel {name!r}: phases must come from per_agent()/per_env(), got {bad}")
        self.name = name
        self.phases = tuple(phases)
        self.nargs = nargs
        self._builds: dict[tuple, Callable] = {}
        self._lock = threading.Lock()

    def driver_python(self, target: str, constants: tuple = ()) -> Callable:
        """The generated plain-Python driver for ``target`` (phases bound to their target builds with
        ``constants``, a :func:`~.targets.freeze_constants` tuple)."""
        if target not in TARGETS:
            raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
        namespace: dict = {f"phase{p}": ph.fn.build(target, constants) for p, ph in enumerate(self.phases)}
        fname = f"{self.name}_{target}"
        if target == "cuda":
            from numba import cuda

            namespace["cuda"] = cuda
            return _exec(_cuda_source(fname, self.phases, self.nargs), fname, namespace)
        import numba

        # Each phase's loop over agents is its own function with the phase inlined into it (a call per
        # agent would pass ~200 exploded array fields). Reference counting is off (_nrt=False): kernels
        # never allocate, and counting every array taken out of the argument tuple cost more than the
        # work itself. The prange driver calls the loops per env; they are not inlined into it because
        # Numba's parfor pass drops the side effects of inline="always" calls made in a prange body.
        bodies, driver_src = _cpu_sources(fname, self.phases, self.nargs)
        for p, body_src in enumerate(bodies):
            namespace[f"{fname}_p{p}"] = numba.njit(_nrt=False)(_exec(body_src, f"{fname}_p{p}", namespace))
        namespace["prange"] = numba.prange
        return _exec(driver_src, fname, namespace)

    def build(self, target: str, constants: tuple = ()) -> Callable:
        """The dispatcher of ``target``'s build with ``constants`` fixed (cached; Numba compiles it at the
        first launch). Every distinct ``constants`` is a build of its own, compiled once."""
        with self._lock:
            key = (target, constants)
            if key not in self._builds:
                driver = self.driver_python(target, constants)
                if target == "cpu":
                    import numba

                    self._builds[key] = numba.njit(parallel=True)(driver)
                else:
                    from numba import cuda

                    self._builds[key] = cuda.jit(driver)
            return self._builds[key]

    def launch(self, target: str, num_envs: int, num_agents: int, *args, stream=None, constants=()) -> None:
        """Run the kernel over ``num_envs`` envs of ``num_agents`` agents (asynchronous on CUDA).

        ``constants``: globals fixed for this build, as :func:`~.targets.freeze_constants` gives them
        (freeze once, outside the step loop).
        """
        if len(args) != self.nargs:
            raise TypeError(f"kernel {self.name!r} takes {self.nargs} args, got {len(args)}")
        compiled = self.build(target, constants)
        if num_envs == 0:
            return
        try:  # Numba compiles at the first call of each signature: typing errors surface here
            if target == "cpu":
                compiled(num_envs, num_agents, *args)
                return
            threads = block_size(num_agents)
            launcher = compiled[num_envs, threads] if stream is None else compiled[num_envs, threads, stream]
            launcher(num_envs, num_agents, *args)
        except Exception as err:
            self._raise_diagnosed(err, target, num_envs, num_agents, args, constants)

    def _raise_diagnosed(self, err: Exception, target: str, num_envs: int, num_agents: int, args: tuple,
                         constants: tuple):
        """Raise the author-facing error for a failed launch (typing error, out-of-bounds index) from
        ``err``, or ``err`` itself when there is none."""
        try:
            found = typing_error(self, target, args, err, constants)
            if found is None and target == "cpu" and is_index_error(err):
                found = index_error(self, num_envs, num_agents, args, constants)
        except Exception:  # noqa: BLE001 - a failed diagnosis must not hide the error itself
            found = None
        if found is None:
            raise err
        raise found from err

    def direct_launch(self, constants: tuple = ()) -> "DirectLaunch":
        """CPU launches of the build with ``constants`` that skip Numba's per-call type dispatch (see
        :class:`DirectLaunch`): for a step loop whose arguments keep their types."""
        return DirectLaunch(self, constants)

    def run_python(self, num_envs: int, num_agents: int, *args, constants: tuple = ()) -> None:
        """Run the phases as plain, uncompiled Python over host (NumPy) arrays, env after env in the CPU
        build's order: a debugging aid (about a thousand agent-steps per second).

        An error is an ordinary Python exception raised at the author's line, e.g. NumPy's IndexError
        for an index the compiled CPU build would silently read past; the exception carries
        ``gpurl_phase = (phase, env, agent or None)``. Helpers run their CPU implementation. Arithmetic
        follows Python/NumPy scalar rules, not Numba's typing (no int64 promotion of int32 math): use it
        to find errors, not to reproduce results bit for bit. ``constants`` as for :meth:`launch`.
        """
        import numpy as np

        if len(args) != self.nargs:
            raise TypeError(f"kernel {self.name!r} takes {self.nargs} args, got {len(args)}")
        cache: dict = {}
        phases = [(phase.kind, _plain_python(phase.fn.py_func, cache, constants)) for phase in self.phases]
        p = e = i = None
        try:
            with np.errstate(over="ignore"):  # counter-based hashing wraps uint64 on purpose
                for e in range(num_envs):
                    for p, (kind, fn) in enumerate(phases):
                        i = None
                        if kind == "agent":
                            for i in range(num_agents):
                                fn(e, i, *args)
                        else:
                            fn(e, *args)
        except Exception as err:
            err.gpurl_phase = (p, e, i)
            raise


def _plain_python(pyfunc: Callable, cache: dict, constants: tuple = ()) -> Callable:
    """``pyfunc`` with every DeviceFunction it names replaced by its plain CPU implementation (recursively)
    and every global named in ``constants`` by its value, so that :meth:`EnvKernel.run_python` runs what
    the CPU build compiles. Code objects are shared, so tracebacks point at the author's source."""
    if id(pyfunc) in cache:
        return cache[id(pyfunc)]
    cache[id(pyfunc)] = pyfunc  # a self-referencing helper stops here
    g = pyfunc.__globals__
    names = [n for n in pyfunc.__code__.co_names if isinstance(g.get(n), DeviceFunction)]
    fixed = {n: v for n, v in constants if n in pyfunc.__code__.co_names and n in g}
    if not names and not fixed:
        return pyfunc
    plain_globals = dict(g)
    plain_globals.update(fixed)
    for name in names:
        helper = plain_globals[name]
        plain_globals[name] = _plain_python(helper._overrides.get("cpu", helper.py_func), cache, constants)
    clone = types.FunctionType(pyfunc.__code__, plain_globals, pyfunc.__name__, pyfunc.__defaults__,
                               pyfunc.__closure__)
    cache[id(pyfunc)] = clone
    return clone


def block_size(num_agents: int) -> int:
    """Threads per env-block: whole warps, at most MAX_THREADS_PER_BLOCK (threads stride over agents)."""
    warps = max(1, -(-num_agents // WARP))
    return min(MAX_THREADS_PER_BLOCK, warps * WARP)


class DirectLaunch:
    """Launches of one CPU build that call its compiled overload directly.

    Numba's dispatcher types every argument at every call; for a named tuple of arrays (an env's state)
    that costs microseconds per launch, a few percent of a 4096-env simple_tag step. ``launcher(key, E, N, *args)`` launches through
    :meth:`EnvKernel.launch` (errors diagnosed as usual) the first time it sees ``key``, then calls that
    overload's entry point for every later launch with the same ``key`` (a failure there gets the same
    diagnosis).

    ``key``: any hashable value the caller guarantees is equal only for arguments of equal Numba types,
    e.g. the action array's dtype and ndim when every other argument is the env's own, fixed-type tuple.
    A key that breaks this promise makes Numba unbox arrays as the wrong type.
    """

    def __init__(self, kernel: EnvKernel, constants: tuple = ()):
        self.kernel, self.constants = kernel, constants
        self._entries: dict = {}

    def __call__(self, key, num_envs: int, num_agents: int, *args) -> None:
        entry = self._entries.get(key)
        if entry is not None:
            if num_envs:
                try:
                    entry(num_envs, num_agents, *args)
                except Exception as err:  # e.g. an index out of bounds under NUMBA_BOUNDSCHECK=1
                    self.kernel._raise_diagnosed(err, "cpu", num_envs, num_agents, args, self.constants)
            return
        self.kernel.launch("cpu", num_envs, num_agents, *args, constants=self.constants)
        dispatcher = self.kernel.build("cpu", self.constants)
        signature = tuple(dispatcher.typeof_pyval(a) for a in (num_envs, num_agents, *args))
        overload = dispatcher.overloads.get(signature)
        if overload is not None:  # None: the launch returned early (no envs) and compiled nothing
            self._entries[key] = overload.entry_point
