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
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

from .targets import TARGETS, DeviceFunction

#: Threads per block: big enough to fill an SM with several env-blocks, small enough that
#: per-thread registers of a phase-heavy kernel do not limit occupancy.
MAX_THREADS_PER_BLOCK = 256
WARP = 32


@dataclass(frozen=True)
class Phase:
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
        self._builds: dict[str, Callable] = {}
        self._lock = threading.Lock()

    def driver_python(self, target: str) -> Callable:
        """The generated plain-Python driver for ``target`` (phases bound to their target builds)."""
        if target not in TARGETS:
            raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
        namespace: dict = {f"phase{p}": ph.fn.build(target) for p, ph in enumerate(self.phases)}
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

    def build(self, target: str) -> Callable:
        with self._lock:
            if target not in self._builds:
                driver = self.driver_python(target)
                if target == "cpu":
                    import numba

                    self._builds[target] = numba.njit(parallel=True)(driver)
                else:
                    from numba import cuda

                    self._builds[target] = cuda.jit(driver)
            return self._builds[target]

    def launch(self, target: str, num_envs: int, num_agents: int, *args, stream=None) -> None:
        """Run the kernel over ``num_envs`` envs of ``num_agents`` agents (asynchronous on CUDA)."""
        if len(args) != self.nargs:
            raise TypeError(f"kernel {self.name!r} takes {self.nargs} args, got {len(args)}")
        compiled = self.build(target)
        if num_envs == 0:
            return
        if target == "cpu":
            compiled(num_envs, num_agents, *args)
            return
        threads = block_size(num_agents)
        launcher = compiled[num_envs, threads] if stream is None else compiled[num_envs, threads, stream]
        launcher(num_envs, num_agents, *args)


def block_size(num_agents: int) -> int:
    """Threads per env-block: whole warps, at most MAX_THREADS_PER_BLOCK (threads stride over agents)."""
    warps = max(1, -(-num_agents // WARP))
    return min(MAX_THREADS_PER_BLOCK, warps * WARP)
