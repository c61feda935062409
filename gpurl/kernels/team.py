"""Team phases: the env's threads work on one agent at a time, together.

A :func:`~.program.per_agent` phase gives each agent a thread of its own: an agent whose work is a pass over
every other agent (a neighbour search) keeps its thread busy for N steps while the warp waits for its
slowest lane, and an agent out of the game leaves its lane idle. A *team phase*
(:func:`~.program.per_agent_team`) turns this around: ``fn(e, i, *args)`` is called for agent 0, then 1, ...,
and on CUDA every thread of the env's block makes each call (the team). Plain code in ``fn`` runs on every
thread alike, which is correct (every thread computes, reads and writes the same values) and costs what one
thread would; the work is split where ``fn`` says so:

- ``for j in team_range(n)``: the loop's iterations are shared out over the team (thread t takes t,
  t + team size, ...), so they must not depend on one another;
- toolkit functions made for teams split their own work (:func:`~.neighbors.k_nearest_team`: a pass over the
  others takes one barrier-count per block-full of them).

Every thread must reach every call of a team function (no team function inside a ``team_range`` loop or
under a condition that differs between threads). A value written in a ``team_range`` loop is visible to the
other threads after the next barrier (the end of the phase, or a team function's own). Per-env scratch rows
(row ``e``) serve a team phase on every target: the team holds one agent at a time, like the CPU build.

On the CPU (and in plain Python) a team phase is a ``per_agent`` phase and ``team_range(n)`` is ``range(n)``.
A kernel with a team phase gets a block of its own per env (:func:`~.program.launch_geometry`), and a team
function called from another kind of phase is an error when the kernel is made (:func:`team_misuse`).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .targets import CUDA as cuda
from .targets import DeviceFunction, device


@device(team_only=True)
def team_rank():
    """This thread's place in the team, 0 .. team size - 1 (0 on the CPU, whose team is its one thread)."""
    return 0


@team_rank.override("cuda", threaded=True)
def _team_rank_cuda():
    return cuda.threadIdx.x  # the env's block is the team (launch_geometry)


@device(team_only=True)
def team_size():
    """Threads in the team (1 on the CPU)."""
    return 1


@team_size.override("cuda", threaded=True)
def _team_size_cuda():
    return cuda.blockDim.x


@device(team_only=True)
def team_range(n):
    """``range(n)`` shared out over the team: thread t takes t, t + team size, ... (the CPU's one thread: all)."""
    return range(team_rank(), n, team_size())


@device(team_only=True)
def team_count(predicate):
    """How many of the team's threads hold ``predicate``; every thread gets the count (a barrier on CUDA)."""
    return int(predicate)


@team_count.override("cuda", threaded=True)
def _team_count_cuda(predicate):
    return cuda.syncthreads_count(np.int32(1) if predicate else np.int32(0))


@device(team_only=True)
def team_barrier():
    """Every thread of the team waits here for the others; their writes before it are visible after it."""
    return 0


@team_barrier.override("cuda", threaded=True)
def _team_barrier_cuda():
    cuda.syncthreads()
    return 0


@device(team_only=True)
def team_leader():
    """True on one thread of the team, its first."""
    return team_rank() == 0


@device(team_only=True)
def team_claim(counter, row, column):
    """Add one to ``counter[row, column]`` (int32) and return the value before, atomically on CUDA: each thread
    that claims gets a slot of its own, in no fixed order. Set the counter on one thread (:func:`team_leader`),
    then let a barrier pass, before any claim. (A shared-memory counter would be faster, but a
    ``cuda.shared.array`` in a device function that a kernel reaches from two phases fails NVVM's check.)"""
    claimed = counter[row, column]
    counter[row, column] = claimed + 1
    return claimed


@team_claim.override("cuda", threaded=True)
def _team_claim_cuda(counter, row, column):
    return cuda.atomic.add(counter, (row, column), 1)


def team_helpers_reached(fn: Callable, seen: set | None = None) -> list[str]:
    """Names of the team-only device functions ``fn`` calls, directly or through other helpers."""
    seen = set() if seen is None else seen
    if id(fn) in seen or not hasattr(fn, "__code__"):
        return []
    seen.add(id(fn))
    found = []
    for name in fn.__code__.co_names:
        value = fn.__globals__.get(name)
        if isinstance(value, DeviceFunction):
            if value.team_only:
                found.append(value.__name__)
            for impl in (value.py_func, *value._overrides.values()):
                found += team_helpers_reached(impl, seen)
    return found


def team_misuse(kernel_name: str, phases) -> list[str]:
    """One message per phase that is not a team phase yet calls a team-only function (its CUDA build would do a
    share of the work on each thread and call it done, or wait at a barrier the other threads never reach)."""
    problems = []
    for p, phase in enumerate(phases):
        roots = [f for f in (phase.fn, phase.when) if f is not None]
        if phase.kind == "team":
            roots = [phase.when] if phase.when is not None else []  # a guard runs on each thread on its own
        reached = sorted({name for f in roots for impl in (f.py_func, *f._overrides.values())
                          for name in team_helpers_reached(impl)})
        if reached:
            what = "its when guard" if phase.kind == "team" else f"a per_{phase.kind} phase"
            problems.append(f"kernel {kernel_name!r}: phase {p} ({phase.fn.__name__}, {what}) calls "
                            f"{', '.join(reached)}, which only a team phase may call: make the phase with "
                            f"per_agent_team({phase.fn.__name__})")
    return problems
