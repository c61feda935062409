"""Team phases: a team of threads works on one agent at a time, together.

A :func:`~.program.per_agent` phase gives each agent a thread of its own: an agent whose work is a pass over
every other agent (a neighbour search) keeps its thread busy for N steps while the warp waits for its
slowest lane, and an agent out of the game leaves its lane idle. A *team phase*
(:func:`~.program.per_agent_team`) turns this around: on CUDA a team is a warp of the env's block, and
``fn(e, i, *args)`` is called by all 32 threads of a team together, for the agents ``w, w + W, ...`` of team
``w`` of the env's ``W`` (:func:`team_row`): the teams of a block work on different agents at once, and a
team's barrier and counts are a warp's (no block-wide barrier on an agent's way). Plain code in ``fn`` runs
on every thread of the team alike, which is correct (every thread computes, reads and writes the same values)
and costs what one thread would; the work is split where ``fn`` says so:

- ``for j in team_range(n)``: the loop's iterations are shared out over the team (thread t takes t,
  t + team size, ...), so they must not depend on one another;
- toolkit functions made for teams split their own work (:func:`~.neighbors.k_nearest_team`: a pass over the
  others takes one warp vote per 32 of them);
- the team's threads exchange values without memory: :func:`team_count` and :func:`team_tally` (a vote),
  :func:`team_shuffle` (one thread's value, handed to every thread).

Every thread of a team must reach every call of a team function (no team function inside a ``team_range``
loop or under a condition that differs between its threads). A value written in a ``team_range`` loop is
visible to the team's other threads after the next barrier (the end of the phase, or a team function's own).
Scratch that a team writes takes a row per team, :func:`team_row` (``team_rows`` of them): two teams of an
env work at the same time. A team writes its own agent's outputs, and reads what earlier phases wrote.

On the CPU (and in plain Python) a team phase is a ``per_agent`` phase, ``team_range(n)`` is ``range(n)``
and ``team_row(e)`` is ``e``. A kernel with a team phase gets a block of its own per env
(:func:`~.program.launch_geometry`), and a team function called from another kind of phase is an error when
the kernel is made (:func:`team_misuse`). Numba's CUDA simulator lacks the warp votes and shuffles;
:mod:`.sim_warp` gives it them.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .counted_loops import NONNEGATIVE_RANGE
from .targets import CUDA as cuda
from .targets import DeviceFunction, device

#: Threads in a warp: a team on CUDA (the one definition; program and generated_source take it from here).
WARP = 32
#: A warp vote of every lane: a team is a whole warp, and every lane of it reaches each team function.
_ALL_LANES = np.uint32(0xFFFFFFFF)


@device(team_only=True)
def team_rank():
    """This thread's place in the team, 0 .. team size - 1 (0 on the CPU, whose team is its one thread)."""
    return 0


@team_rank.override("cuda", threaded=True)
def _team_rank_cuda():
    return cuda.laneid  # a team is a warp


@device(team_only=True)
def team_size():
    """Threads in the team (a warp's on CUDA, 1 on the CPU)."""
    return 1


@team_size.override("cuda", threaded=True)
def _team_size_cuda():
    # not a literal: NVVM would unroll each team pass, and tag_continuous's kernel would spill at its launch bounds
    return cuda.warpsize


@device(team_only=True)
def team_range(n):
    """``range(n)`` shared out over the team: thread t takes t, t + team size, ... (the CPU's one thread: all)."""
    return range(team_rank(), n, team_size())


# from 0 or above, stepping up: a CUDA build counts its loops and knows their index is never negative
setattr(team_range, NONNEGATIVE_RANGE, True)


@device(team_only=True)
def team_count(predicate):
    """How many of the team's threads hold ``predicate``; every thread gets the count (a warp vote on CUDA)."""
    return int(predicate)


@team_count.override("cuda", threaded=True)
def _team_count_cuda(predicate):
    return cuda.popc(cuda.ballot_sync(_ALL_LANES, predicate))


@device(team_only=True)
def team_tally(predicate):
    """``(before, count)``: how many threads of the team ranked below this one hold ``predicate``, and how many
    in all; every thread gets both (one warp vote on CUDA). The threads that hold it can each write to slot
    ``filled + before`` of a list, in rank order, and all add ``count`` to ``filled``: no atomics, and the
    same order on every target. (The CPU's team of one: ``(0, int(predicate))``.)"""
    return 0, int(predicate)


@team_tally.override("cuda", threaded=True)
def _team_tally_cuda(predicate):
    votes = cuda.ballot_sync(_ALL_LANES, predicate)
    return cuda.popc(votes & cuda.lanemask_lt()), cuda.popc(votes)


@device(team_only=True)
def team_shuffle(value, rank):
    """``value`` as thread ``rank`` of the team holds it (a warp shuffle on CUDA: no memory, no barrier); every
    thread of the team calls it together, each naming the thread it reads. (The CPU's team of one: ``rank`` is 0,
    its own ``value``.)"""
    return value


@team_shuffle.override("cuda", threaded=True)
def _team_shuffle_cuda(value, rank):
    return cuda.shfl_sync(_ALL_LANES, value, rank)


@device(team_only=True)
def team_barrier():
    """Every thread of the team waits here for the others; their writes before it are visible after it."""
    return 0


@team_barrier.override("cuda", threaded=True)
def _team_barrier_cuda():
    cuda.syncwarp(_ALL_LANES)
    return 0


@device(team_only=True)
def team_leader():
    """True on one thread of the team, its first."""
    return team_rank() == 0


@device(team_only=True)
def team_row(e):
    """Env ``e``'s scratch row of this team: ``e`` on the CPU (its team is one thread, one agent at a time), and
    ``e * W + w`` on CUDA for team ``w`` of the env's ``W`` (:func:`team_rows`)."""
    return e


@team_row.override("cuda", threaded=True)
def _team_row_cuda(e):
    teams = cuda.blockDim.x // WARP  # the env's block (launch_geometry): W teams
    return e * teams + cuda.threadIdx.x // WARP


def team_rows(target: str, num_envs: int, num_agents: int) -> int:
    """Rows of per-team scratch (:func:`team_row`) for ``num_envs`` envs of ``num_agents`` agents on ``target``."""
    if target == "cpu":
        return num_envs
    from .program import block_size  # program imports this module (team_misuse)

    return num_envs * (block_size(num_agents) // WARP)


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
