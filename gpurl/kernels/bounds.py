"""Every index of an env kernel stays inside its arrays: the first launches of each build are checked.

Compiled kernels do not check indices: the CPU build only under ``NUMBA_BOUNDSCHECK=1``, the CUDA build
never. A phase that indexes past a declared size (an obs row two features too short, an agent index
``num_agents``, a state field written at index ``size``) silently overwrites the next row, or memory
past the array: on a GPU, another buffer of the device.

So the first launches of every build, for each set of array shapes, run first as plain Python
(:meth:`~.program.EnvKernel.run_python`, where NumPy checks every index, reads and writes) on host copies
of the launch's arrays, for the first and the last env, each helper in its implementation for the launch's
target (a CUDA launch's per-lane scratch has a row per agent, :func:`~.scratch.lane`); only then does the
compiled launch run. An index outside its array raises :class:`~.errors.KernelIndexError` before anything
was written, naming the phase, the function, file and line, the index, the array and the declared size of
the axis the index runs along::

    kernel 'foraging' (cpu build): IndexError in env 0, agent 0, phase 8 of 11, observe (per agent):
      File "my_env.py", line 83, in observe
        row[2 * num_food] = np.float32(best_dx) / c.size_f32
      IndexError: index 6 is out of bounds for axis 0 with size 6
      row is a view of s.obs, which is float32 ndarray of shape [4, 3, 6] (3-d): index 6 on its axis 2,
      whose declared size is 6

The compiled kernels stay as they are (no guard in the steady-state CUDA or CPU code). Launches of one
build with the same shapes are checked until every phase function has run in a checked launch (a reset
runs the start phases, a step the step phases), at most :data:`CHECKED_LAUNCHES` of them; then the
shapes are *settled* and later launches cost one lookup of their shapes (in
:meth:`~.program.EnvKernel.launch`; none in a :class:`~.direct_launch.DirectLaunch` step loop). A settled check
is recorded in the build cache (:mod:`.build_cache`), named by the build's key and the shapes, so that
later processes skip it. A CUDA launch copies its arrays to the host for the check (one synchronisation,
in the first launches only) and skips the check while torch captures a CUDA graph.

Only author kernels are checked: a kernel with a phase (or a phase's condition) defined outside the gpurl
package. The built-in envs' kernels are held step by step to their original implementations by the tests,
and on a GPU by the gpu tier's memcheck; checking them again would cost every user a plain-Python run at
first launch, tens of seconds for the largest (a thousand agents).

What it cannot catch: an index that goes out of bounds only later (after the checked launches: at an
episode's end, in a rare state, with other data), only in an env other than the first and the last, or
only through Numba's arithmetic (an int32 that wraps where Python's int does not); a negative index
wraps around inside its array in NumPy and in both builds (``a[-1]`` is the last element), so it is not
out of bounds. A plain run that fails with anything but an out-of-bounds IndexError (Python and Numba
typing differ) leaves that launch to the compiled build (whose typing errors say more) and is not recorded.
"""
from __future__ import annotations

import hashlib
import re
import threading
import warnings
from dataclasses import dataclass, field

from . import build_cache
from .errors import index_report

#: Launches of one build and one set of shapes checked at most (a reset and two steps, typically).
CHECKED_LAUNCHES = 3
_OUT_OF_BOUNDS = re.compile(r"index -?\d+ is out of bounds for axis \d+ with size \d+")
#: The build cache's folder of settled checks (an empty file per build and shapes).
RECORDS = "bounds-checked"


@dataclass
class _Progress:
    settled: bool = False
    launches: int = 0
    ran: set = field(default_factory=set)  # ids of the phase functions that ran whole in a checked launch
    inconclusive: bool = False  # a plain run failed with something else than an index out of bounds


def _shapes(values: tuple) -> tuple:
    """The shapes of the arrays in ``values`` (a launch's arguments: arrays, scalars, (named) tuples of them):
    every launch computes them (a few microseconds for an env's ~50 arrays and constants)."""
    return tuple([_shapes(v) if isinstance(v, tuple) else getattr(v, "shape", None) for v in values])


def _host_copy(value, stream):
    if isinstance(value, tuple):
        copies = [_host_copy(v, stream) for v in value]
        return type(value)(*copies) if hasattr(value, "_fields") else tuple(copies)
    if hasattr(value, "copy_to_host"):  # a Numba device array
        return value.copy_to_host(stream=stream or 0)
    return value.copy() if hasattr(value, "copy") and hasattr(value, "shape") else value


def _capturing(target: str) -> bool:
    """A CUDA graph is being captured on torch's current stream (no copy to the host may run)."""
    from .interop import simulator_enabled

    if target != "cuda" or simulator_enabled():
        return False
    import torch

    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def authored_outside_gpurl(kernel) -> bool:
    """Some phase of ``kernel``, or a phase's condition, is defined outside the gpurl package (gpurl's generated
    phases are created in its modules' namespaces, so they name those modules)."""
    functions = [getattr(f, "py_func", f) for phase in kernel.phases for f in (phase.fn, phase.when) if f is not None]
    return any(not (f.__module__ or "").startswith("gpurl.") for f in functions)


class BoundsCheck:
    """The bounds checks of one :class:`~.program.EnvKernel`'s launches (see the module docstring)."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.checks = authored_outside_gpurl(kernel)  # else every launch is settled at once
        self._phase_functions = {id(phase.fn) for phase in kernel.phases}
        self._progress: dict[tuple, _Progress] = {}
        self._build_keys: dict[tuple, str] = {}
        self._lock = threading.Lock()

    def __call__(self, target: str, constants: tuple, num_envs: int, num_agents: int, args: tuple,
                 stream=None) -> bool:
        """Check this launch if its shapes are not settled; True when they are (no later launch with them
        needs a check). Raises :class:`~.errors.KernelIndexError` for an index out of bounds."""
        if not self.checks:
            return True
        key = (constants, target, num_envs, num_agents, _shapes(args))  # a target's own helpers: own check
        progress = self._progress.get(key)
        if progress is not None and progress.settled:
            return True
        return self._check(key, target, num_envs, num_agents, args, stream)

    def settled(self, target: str, constants: tuple, num_envs: int, num_agents: int, args: tuple) -> bool:
        """No later launch with these shapes needs a check (this one is not checked here)."""
        if not self.checks:
            return True
        progress = self._progress.get((constants, target, num_envs, num_agents, _shapes(args)))
        return progress is not None and progress.settled

    def _check(self, key: tuple, target: str, num_envs: int, num_agents: int, args: tuple, stream) -> bool:
        with self._lock:
            progress = self._progress.get(key)
            if progress is None:
                progress = self._progress[key] = _Progress(settled=self._recorded(key))
            if progress.settled:
                return True
            if _capturing(target):
                return False
            ran, conclusive = self._run(target, key[0], num_envs, num_agents, args, stream)
            progress.launches += 1
            progress.ran |= {id(self.kernel.phases[p].fn) for p in ran}
            progress.inconclusive |= not conclusive
            if progress.ran >= self._phase_functions or progress.launches >= CHECKED_LAUNCHES:
                progress.settled = True
                if not progress.inconclusive:
                    self._record(key)
            return progress.settled

    def _run(self, target: str, constants: tuple, num_envs: int, num_agents: int, args: tuple,
             stream) -> tuple[set, bool]:
        """Run the launch as plain Python for its first and last env on host copies of ``args``: (indices of
        the phases that ran whole, whether the run was conclusive). Raises for an index out of bounds."""
        import numpy as np

        copies = _host_copy(args, stream)
        if stream is not None:
            stream.synchronize()  # host-ok: the first launches of a build and shapes only, before any graph
        envs = sorted({0, num_envs - 1})
        ran: set = set()
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.kernel.run_python(num_envs, num_agents, *copies, constants=constants, envs=envs, ran=ran,
                                       target=target)
        except IndexError as found:
            if not _OUT_OF_BOUNDS.search(str(found)):  # e.g. too many indices: a typing error to compile
                return ran - {getattr(found, "gpurl_phase", (None,))[0]}, False
            shown = " and ".join(str(e) for e in envs)
            raise index_report(self.kernel, target, found, copies, (
                f"(found before the compiled launch ran: the first launches of a build run as plain Python, "
                f"NumPy checking every index, on copies of their arrays for env{'s' * (len(envs) > 1)} "
                f"{shown}; gpurl.kernels.bounds)")) from None
        except Exception as found:  # noqa: BLE001 - Python's semantics, not the kernel's: the compiled launch's
            return ran - {getattr(found, "gpurl_phase", (None,))[0]}, False
        return ran, True

    # ---- settled checks in the build cache ----------------------------------------------------------------

    def _record_path(self, key: tuple):
        where = build_cache.cache_dir()
        if where is None:
            return None
        constants = key[0]
        if constants not in self._build_keys:
            self._build_keys[constants] = self.kernel.cpu_build_key(constants)
        name = hashlib.sha256(f"{self._build_keys[constants]} {key[1:]!r}".encode()).hexdigest()
        return where / RECORDS / name

    def _recorded(self, key: tuple) -> bool:
        try:
            path = self._record_path(key)
            return path is not None and path.exists()
        except Exception:  # noqa: BLE001 - no record: the check runs
            return False

    def _record(self, key: tuple) -> None:
        try:
            path = self._record_path(key)
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()
        except Exception:  # noqa: BLE001 - unrecorded: the next process checks again
            pass
