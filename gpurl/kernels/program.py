"""Env kernels as a list of phases; gpurl writes the launch and the loops for each target.

A phase is a plain-Python function over arrays:

- ``per_agent(fn)``: ``fn(e, i, *args)`` runs for every env ``e`` and agent ``i``;
- ``per_env(fn)``: ``fn(e, *args)`` runs once per env (per-env reductions, flags, counters).

Consecutive phases are separated by a barrier: every write of phase p is visible to phase p+1 in
the same env. The CUDA build gives each env ``lanes`` threads (:func:`launch_geometry`): a world of more
than a warp's agents gets a block of its own (WarpDrive's layout), threads striding over agents, so an env
may hold more agents than a block has threads; smaller worlds are packed, one thread per agent and
several envs per block (one thread per env for a one-agent world), so that a warp's lanes are busy. A
barrier is ``syncthreads`` (every thread of the block reaches it, those without an env too) and a
per-env phase runs on the env's first lane. The CPU build is ``prange`` over chunks of envs running all
phases of one env after another (env-major), so a barrier costs nothing. The author writes no thread
index, launch or backend switch.

``args`` are whatever Numba accepts as kernel arguments: arrays, scalars, and (named) tuples of them.

Errors in author code are reported at the author's file and line (:mod:`.errors`): a phase Numba cannot
type raises :class:`~.errors.KernelTypingError`; an out-of-bounds index raises
:class:`~.errors.KernelIndexError`, found before the compiled launch by the bounds check of a build's first
launches (:mod:`.bounds`, every target), or by re-running a CPU launch that failed under
``NUMBA_BOUNDSCHECK=1``. :meth:`EnvKernel.run_python` runs the phases uncompiled, for debugging with ordinary
Python tracebacks.
"""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from . import build_cache, compile_log
from .bounds import BoundsCheck
from .cpu_chunks import _cpu_envs_per_call, envs_per_call  # noqa: F401 - envs_per_call: part of this module's API
from .cpu_threads import start_numba_keeping_torch_threads
from .errors import check_phase_signatures, index_error, is_author_error, is_index_error, raise_alone, typing_error
from .float64 import watch_cpu_build
from .generated_source import _cpu_sources, _cuda_source
from .inline_copies import fast_cpu_compiles
from .plain_python import _plain_python
from .targets import TARGETS, DeviceFunction
from .team import WARP, team_misuse

if TYPE_CHECKING:
    from .prepared_launch import PreparedLaunch

#: Threads per block: big enough to fill an SM with several env-blocks, small enough that
#: per-thread registers of a phase-heavy kernel do not limit occupancy.
MAX_THREADS_PER_BLOCK = 256
#: Threads per block of packed small worlds (:func:`launch_geometry`): four warps, several envs each.
PACKED_THREADS = 128
#: Pack worlds of at most a warp's agents several envs to a block (False: a block per env, as before issue 42;
#: the tests compare both layouts).
PACK_SMALL_WORLDS = True
#: The build constant that fixes the agent count of a CPU build (``constants={"GPURL_AGENTS": n, ...}``): its
#: agent loops get a literal trip count, which LLVM unrolls, keeping a small env's values in registers
#: across agents. A launch with another agent count is an error.
FIXED_AGENTS = "GPURL_AGENTS"


#: Numba options of the functions a CPU build's driver calls (one per phase group). Reference counting is off:
#: kernels never allocate, and counting every array taken out of the argument tuple cost more than the work
#: itself. They are called only from the driver, which links their code in, so they get no wrappers for calls
#: from Python or C: LLVM then has less to optimize and emit for each (bench/build_time.py), and the driver's
#: machine code is the same (tests/test_kernel_source.py).
CALLEE_OPTIONS = {"_nrt": False, "no_cpython_wrapper": True, "no_cfunc_wrapper": True}


@dataclass(frozen=True)
class Phase:
    """One step of a kernel: ``fn`` run per agent (``kind="agent"``; ``"team"``: by a team of the env's threads
    together, :mod:`.team`) or per env (``"env"``), only in the
    envs where ``when(e, *args)`` is true (every env when ``when`` is None); make it with
    :func:`per_agent` / :func:`per_agent_team` / :func:`per_env`."""

    kind: str  # "agent" | "team" | "env"
    fn: DeviceFunction
    when: DeviceFunction | None = None
    #: ``when`` is rarely true (e.g. an env restarting): the CPU build runs the phase out of line, which keeps
    #: the common path's loop small.
    rare: bool = False


def _device_function(fn) -> DeviceFunction | None:
    return fn if fn is None or isinstance(fn, DeviceFunction) else DeviceFunction(fn)


def per_agent(fn, when=None, rare=False) -> Phase:
    """A phase that runs ``fn(e, i, *args)`` for every agent ``i`` of every env ``e`` (where
    ``when(e, *args)``; ``rare``: see :class:`Phase`)."""
    return Phase("agent", _device_function(fn), _device_function(when), rare)


def per_agent_team(fn, when=None, rare=False) -> Phase:
    """A team phase (:mod:`.team`): ``fn(e, i, *args)`` for every agent ``i`` of every env ``e``, each call made
    by all the threads of a team (a warp of the env's block on CUDA), a team's agents one after another;
    ``team_range`` loops and team functions (:func:`~.neighbors.k_nearest_team`) share out the work. On the CPU
    it is :func:`per_agent`."""
    return Phase("team", _device_function(fn), _device_function(when), rare)


def per_env(fn, when=None, rare=False) -> Phase:
    """A phase that runs ``fn(e, *args)`` once per env ``e`` (where ``when(e, *args)``; ``rare``: see
    :class:`Phase`)."""
    return Phase("env", _device_function(fn), _device_function(when), rare)


def _exec(source: str, fname: str, namespace: dict):
    exec(compile(source, f"<gpurl {fname}>", "exec"), namespace)
    return namespace[fname]


class EnvKernel:
    """A compiled-on-demand env kernel: ``kernel.launch(target, E, N, *args)``.

    One build per target and argument types (Numba specialises on types, not on sizes), so changing
    num_envs, num_agents or any run-time size never recompiles.
    """

    def __init__(self, name: str, phases: list[Phase], nargs: int, launch_bounds: tuple[int, ...] | None = None):
        if not phases:
            raise ValueError(f"kernel {name!r} needs at least one phase")
        if launch_bounds is not None and (not 1 <= len(launch_bounds) <= 2 or launch_bounds[0] < MAX_THREADS_PER_BLOCK
                                          or any(int(b) != b or b < 1 for b in launch_bounds)):
            raise ValueError(f"kernel {name!r}: launch_bounds is (max threads per block >= {MAX_THREADS_PER_BLOCK}, "
                             f"[min blocks per SM]) of positive ints (a launch may take {MAX_THREADS_PER_BLOCK} "
                             f"threads), got {launch_bounds!r}")
        bad = [p for p in phases if not isinstance(p, Phase)]
        if bad:
            raise TypeError(f"kernel {name!r}: phases must come from per_agent()/per_env(), got {bad}")
        self.name = name
        self.phases = tuple(phases)
        self.nargs = nargs
        #: numba-cuda's ``launch_bounds`` for the CUDA build (None: none): what ptxas may assume of a launch, e.g.
        #: ``(256, 2)``: blocks of at most 256 threads, 2 of them resident per SM, so at most 128 registers a thread.
        self.launch_bounds = None if launch_bounds is None else tuple(int(b) for b in launch_bounds)
        check_phase_signatures(name, self.phases, nargs)
        misuse = team_misuse(name, self.phases)
        if misuse:
            raise ValueError("\n".join(misuse))
        #: A team phase needs the env's threads in one block of their own (:func:`launch_geometry`).
        self.has_team_phase = any(phase.kind == "team" for phase in self.phases)
        self._builds: dict[tuple, Callable] = {}
        self._lock = threading.Lock()
        self.bounds = BoundsCheck(self)  # the first launches of each build and shapes: see .bounds

    def _cpu_build_sources(self, constants: tuple) -> tuple[dict[str, str], str]:
        """:func:`_cpu_sources` of this kernel's CPU build with ``constants``."""
        return _cpu_sources(f"{self.name}_cpu", self.phases, self.nargs, dict(constants).get(FIXED_AGENTS, 0))

    def source(self, target: str, constants: tuple = ()) -> str:
        """The Python source gpurl generates for ``target``'s build with ``constants``, the functions Numba then
        compiles around the phases (``phase{p}``, ``when{p}``: the author's functions): on the CPU the per-env
        (or per-chunk) functions and the prange driver ``{name}_cpu``, on CUDA the kernel ``{name}_cuda``."""
        if target not in TARGETS:
            raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
        fname = f"{self.name}_{target}"
        if target == "cuda":
            return _cuda_source(fname, self.phases, self.nargs)
        functions, driver_src = self._cpu_build_sources(constants)
        return "\n\n".join([*functions.values(), driver_src])

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
            namespace.update({f"when{p}": ph.when.build(target, constants) for p, ph in enumerate(self.phases)
                              if ph.when is not None})
            return _exec(_cuda_source(fname, self.phases, self.nargs), fname, namespace)
        import numba

        namespace.update({f"when{p}": ph.when.build(target, constants) for p, ph in enumerate(self.phases)
                          if ph.when is not None})
        namespace["prange"] = numba.prange
        namespace["int64"] = numba.int64
        namespace["__name__"] = __name__  # an importable module: a build loaded from disk rebuilds its globals from it
        functions, driver_src = self._cpu_build_sources(constants)
        for function_name, source in functions.items():  # rare phases first: the chunk function calls them
            namespace[function_name] = numba.njit(**CALLEE_OPTIONS)(_exec(source, function_name, namespace))
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
                    # before the cache's turn-taking wraps compile: a process waiting for another's build
                    # then waits outside Numba's compiler lock, which the one-copy inlining takes
                    fast_cpu_compiles(self._builds[key])
                    where = build_cache.cache_dir()
                    if where is not None:
                        build_cache.enable(self._builds[key], self.cpu_build_key(constants), where)
                    watch_cpu_build(self, self._builds[key])  # float64 check at each compile
                else:
                    from numba import cuda

                    from .interop import simulator_enabled

                    if simulator_enabled():
                        from . import sim_warp

                        sim_warp.install()  # the warp votes team phases use
                    # the simulator's jit takes no launch bounds (it has no registers to bound)
                    bounds = {} if self.launch_bounds is None or simulator_enabled() else {
                        "launch_bounds": self.launch_bounds}
                    self._builds[key] = cuda.jit(driver, **bounds)
            return self._builds[key]

    def cpu_build_key(self, constants: tuple = ()) -> str:
        """The on-disk cache's name for the CPU build with ``constants`` (:mod:`.build_cache`): the generated
        sources, the phases and all they reach, and the toolkit's own recipe (this module and targets)."""
        fname = f"{self.name}_cpu"
        functions, driver_src = self._cpu_build_sources(constants)
        roots = [f for phase in self.phases for f in (phase.fn, phase.when) if f is not None]
        return build_cache.build_key({**functions, fname: driver_src}, roots, constants)

    def launch(self, target: str, num_envs: int, num_agents: int, *args, stream=None, constants=()) -> None:
        """Run the kernel over ``num_envs`` envs of ``num_agents`` agents (asynchronous on CUDA).

        ``constants``: globals fixed for this build, as :func:`~.targets.freeze_constants` gives them
        (freeze once, outside the step loop). The first launches of a build and shapes are bounds-checked
        first (:mod:`.bounds`).
        """
        if len(args) != self.nargs:
            raise TypeError(f"kernel {self.name!r} takes {self.nargs} args, got {len(args)}")
        fixed = dict(constants).get(FIXED_AGENTS, num_agents)
        if fixed != num_agents:
            raise ValueError(f"kernel {self.name!r}: this build runs {fixed} agents per env, launched with {num_agents}")
        compiled = self.build(target, constants)
        if num_envs == 0:
            return
        self.bounds(target, constants, num_envs, num_agents, args, stream)  # raises before anything is written
        try:  # Numba compiles at the first call of each signature: typing errors surface here
            if target == "cpu":
                start_numba_keeping_torch_threads()  # its first parallel launch would reset torch's threads
                values = (num_envs, num_agents, _cpu_envs_per_call(num_envs, num_agents), *args)
                with self._announced(compiled, target, values):
                    compiled(*values)
                return
            blocks, threads, lanes = self.geometry(num_envs, num_agents)
            launcher = compiled[blocks, threads] if stream is None else compiled[blocks, threads, stream]
            values = (num_envs, num_agents, lanes, *args)
            with self._announced(compiled, target, values):
                launcher(*values)
        except Exception as err:
            self._raise_diagnosed(err, target, num_envs, num_agents, args, constants)

    def geometry(self, num_envs: int, num_agents: int) -> tuple[int, int, int]:
        """``(blocks, threads per block, lanes per env)`` of this kernel's CUDA launch (:func:`launch_geometry`)."""
        return launch_geometry(num_envs, num_agents, team=self.has_team_phase)

    def _announced(self, compiled, target: str, values: tuple):
        """:func:`.compile_log.compiling` around a launch of ``values`` that compiles (or loads from the build
        cache) a new overload of ``compiled``, when someone listens; a null context otherwise."""
        overloads = getattr(compiled, "overloads", None)  # None: the simulator's kernels, which never compile
        if not compile_log.active() or overloads is None:
            return contextlib.nullcontext()
        if tuple(compiled.typeof_pyval(v) for v in values) in overloads:
            return contextlib.nullcontext()
        hits = getattr(compiled, "_cache_hits", None)  # Numba's per-signature count of builds loaded from disk
        before = sum(hits.values()) if hits is not None else 0
        where = build_cache.cache_dir() if target == "cpu" else None
        note = f"Numba; cached in {where}" if where is not None else "Numba"
        return compile_log.compiling(f"kernel {self.name} for {target}", note,
                                     loaded=lambda: hits is not None and sum(hits.values()) > before)

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
        if found is None and is_author_error(err):  # gpurl's own, raised inside Numba's compile (float64 check)
            found = err
        if found is None:
            raise err
        raise_alone(found, err)

    def direct_launch(self, constants: tuple = ()) -> "DirectLaunch":
        """CPU launches of the build with ``constants`` that skip Numba's per-call type dispatch (see
        :class:`DirectLaunch`): for a step loop whose arguments keep their types."""
        from .direct_launch import DirectLaunch  # it launches through this module's EnvKernel

        return DirectLaunch(self, constants)

    def prepare_launch(self, num_envs: int, num_agents: int, *args, constants: tuple = (),
                       varying: tuple = ()) -> "PreparedLaunch | None":
        """The CUDA launch with ``args`` as a :class:`~.prepared_launch.PreparedLaunch` (its parameters
        marshalled once): call it after a :meth:`launch` with these very arguments has run, so the build is
        compiled and its bounds check settled (None until then). Raises
        :class:`~.prepared_launch.NotPrepared` where it cannot be prepared. ``varying``: paths into ``args`` (``(2,)``: the third argument; ``(0, 5)``: field 5 of the first) of
        the arrays whose data pointers later launches pass."""
        if not self.bounds.settled("cuda", constants, num_envs, num_agents, args):
            return None
        from .prepared_launch import prepare

        blocks, threads, lanes = self.geometry(num_envs, num_agents)
        return prepare(self.build("cuda", constants), blocks, threads, (num_envs, num_agents, lanes, *args),
                       [(3 + path[0], *path[1:]) for path in varying])

    def run_python(self, num_envs: int, num_agents: int, *args, constants: tuple = (), envs=None,
                   ran: set | None = None, target: str = "cpu") -> None:
        """Run the phases as plain, uncompiled Python over host (NumPy) arrays, env after env in the CPU
        build's order: a debugging aid (about a thousand agent-steps per second).

        An error is an ordinary Python exception raised at the author's line, e.g. NumPy's IndexError
        for an index the compiled CPU build would silently read past; the exception carries
        ``gpurl_phase = (phase, env, agent or None)``. Helpers run their implementation for ``target`` (the
        CPU's by default; ``"cuda"`` for arrays laid out for the CUDA build, e.g. scratch with one row per
        lane, :func:`~.scratch.lane`). Arithmetic follows Python/NumPy scalar rules, not Numba's typing (no
        int64 promotion of int32 math): use it to find errors, not to reproduce results bit for bit. ``constants`` as for :meth:`launch`; ``envs``:
        the env indices to run (default: all); ``ran``: a set that gets the index of every phase that ran.
        """
        import numpy as np

        if len(args) != self.nargs:
            raise TypeError(f"kernel {self.name!r} takes {self.nargs} args, got {len(args)}")
        cache: dict = {}
        plain = lambda f: None if f is None else _plain_python(f.py_func, cache, constants, target)  # noqa: E731
        phases = [(phase.kind, plain(phase.fn), plain(phase.when)) for phase in self.phases]
        p = e = i = None
        try:
            with np.errstate(over="ignore"):  # counter-based hashing wraps uint64 on purpose
                for e in range(num_envs) if envs is None else envs:
                    for p, (kind, fn, when) in enumerate(phases):
                        i = None
                        if when is not None and not when(e, *args):
                            continue
                        if ran is not None:
                            ran.add(p)
                        if kind != "env":  # a team phase too: plain Python runs one agent after another
                            for i in range(num_agents):
                                fn(e, i, *args)
                        else:
                            fn(e, *args)
        except Exception as err:
            err.gpurl_phase = (p, e, i)
            raise


def block_size(num_agents: int) -> int:
    """Threads per env-block of a world with a block of its own: whole warps, at most MAX_THREADS_PER_BLOCK
    (threads stride over agents)."""
    warps = max(1, -(-num_agents // WARP))
    return min(MAX_THREADS_PER_BLOCK, warps * WARP)


def launch_geometry(num_envs: int, num_agents: int, team: bool = False) -> tuple[int, int, int]:
    """``(blocks, threads per block, lanes per env)`` of a CUDA launch over ``num_envs`` envs.

    A world of more than a warp's agents (or any world with :data:`PACK_SMALL_WORLDS` off, or a kernel with a
    team phase, ``team``: its teams are the env's warps) gets a block of :func:`block_size` threads per env. A
    smaller one gets one lane per agent (one per env for a one-agent world), and a block holds
    ``PACKED_THREADS // lanes`` envs (fewer when there are fewer envs, in whole warps): simple_tag's 4 agents
    keep 32 of a warp's 32 lanes busy, where a block per env kept 4.
    """
    if num_agents > WARP or not PACK_SMALL_WORLDS or team:
        threads = block_size(num_agents)
        return max(1, num_envs), threads, threads
    lanes = max(1, num_agents)
    envs_per_block = min(PACKED_THREADS // lanes, max(1, num_envs))
    threads = -(-envs_per_block * lanes // WARP) * WARP
    return max(1, -(-num_envs // envs_per_block)), threads, lanes
