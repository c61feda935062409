"""The Python source gpurl generates around an env kernel's phases, one function per target: the CPU build's
prange driver (and the functions it calls) and the CUDA kernel. :class:`.program.EnvKernel` compiles it
(``EnvKernel.source`` shows it); the phases themselves are the author's functions, ``phase{p}`` and ``when{p}``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .team import WARP

if TYPE_CHECKING:
    from .program import Phase


def _phase_lines(p: int, phase: Phase, args: str, indent: str, agents_loop: list[str]) -> list[str]:
    """Source lines running phase ``p`` for env ``e``: its guard, then ``agents_loop`` (the target's loop
    over agents, ``{call}`` standing for the phase call) or the per-env call."""
    lines = []
    if phase.when is not None:
        lines.append(f"{indent}if when{p}(e, {args}):")
        indent += "    "
    if phase.kind != "env":
        lines += [indent + line.format(call=f"phase{p}(e, i, {args})") for line in agents_loop]
    else:
        lines.append(f"{indent}phase{p}(e, {args})")
    return lines


def _cpu_sources(name: str, phases: tuple[Phase, ...], nargs: int, fixed_agents: int = 0) -> tuple[dict[str, str], str]:
    """Sources of the env-major CPU build: a prange over envs that runs every phase of an env, one after
    another, in one loop iteration. Returns ({function name: source} of the non-driver functions, driver
    source ``{name}(num_envs, num_agents, envs_per_call, *args)``).

    One env's phases run back to back on one thread, so a phase boundary (the barrier) is just the next
    line and an env's arrays stay in L1 from phase to phase. Functions called from the prange body are
    not inlined into it, because Numba's parfor pass drops the side effects of inline="always" calls made
    there; a call passes every field of every argument array (~150 values for a typical env).

    - ``fixed_agents`` > 0 (a small world, see :data:`FIXED_AGENTS`): the prange runs over chunks of
      ``envs_per_call`` envs, calling ``{name}_envs(e0, e1, ...)`` with every phase inlined and agent loops
      of a literal trip count, which LLVM unrolls: a small env's step is a few hundred instructions, and
      a call per phase would cost as much.
    - otherwise each phase is a function of its own (``{name}_p{p}``), and the prange body calls them in
      order for its env: for a large env (many agents, neighbour searches) that ran faster than inlining
      the phases, or than calling them from a chunk function.

    Either way a run of consecutive rare phases is a function of its own (``{name}_rare{p}``), called only
    where one of their guards holds.

    The prange's index is cast to int64 before any call: Numba types it int64 in the driver and uint64 in the
    parallel body it builds from it, and a call with each would compile every called function twice (half of
    a build's time).

    Every function that takes an env index ``e`` first returns where ``e < 0`` (never: envs count from 0).
    Numba wraps a negative array index around (``a[e]`` is ``a[e + len(a)]`` for e < 0) at every access with a
    signed index; below that test LLVM knows ``e >= 0`` and drops the wraparound from every access of the env.
    """
    env_index_is_valid = ["    if e < 0:", "        return"]
    args = ", ".join(f"a{k}" for k in range(nargs))
    agents_loop = [f"for i in range({fixed_agents or 'num_agents'}):", "    {call}"]
    functions: dict[str, str] = {}
    lines = ([f"def {name}_envs(e0, e1, num_agents, {args}):", "    for e in range(e0, e1):",
              *("    " + line for line in env_index_is_valid)] if fixed_agents
             else [f"def {name}(num_envs, num_agents, envs_per_call, {args}):", "    for env in prange(num_envs):",
                   "        e = int64(env)"])

    def outline(function_name: str, run: list[int]) -> None:
        body = [f"def {function_name}(e, num_agents, {args}):", *env_index_is_valid]
        for q in run:
            body += _phase_lines(q, phases[q], args, "    ", agents_loop)
        functions[function_name] = "\n".join(body) + "\n"

    p = 0
    while p < len(phases):
        if not (phases[p].rare and phases[p].when is not None):
            if fixed_agents:
                lines += _phase_lines(p, phases[p], args, "        ", agents_loop)
            else:
                outline(f"{name}_p{p}", [p])
                lines.append(f"        {name}_p{p}(e, num_agents, {args})")
            p += 1
            continue
        run = [p]
        while run[-1] + 1 < len(phases) and phases[run[-1] + 1].rare and phases[run[-1] + 1].when is not None:
            run.append(run[-1] + 1)
        rare_name = f"{name}_rare{p}"
        outline(rare_name, run)
        unique, seen = [], set()
        for q in run:
            if id(phases[q].when) not in seen:
                seen.add(id(phases[q].when))
                unique.append(f"when{q}(e, {args})")
        lines += [f"        if {' or '.join(unique)}:", f"            {rare_name}(e, num_agents, {args})"]
        p = run[-1] + 1
    if not fixed_agents:
        return functions, "\n".join(lines) + "\n"
    functions[f"{name}_envs"] = "\n".join(lines) + "\n"
    driver = (f"def {name}(num_envs, num_agents, envs_per_call, {args}):\n"
              f"    for chunk in prange((num_envs + envs_per_call - 1) // envs_per_call):\n"
              f"        e0 = int64(chunk) * envs_per_call\n"
              f"        {name}_envs(e0, min(num_envs, e0 + envs_per_call), num_agents, {args})\n")
    return functions, driver


def _cuda_source(name: str, phases: tuple[Phase, ...], nargs: int) -> str:
    """Source of the CUDA kernel ``{name}(num_envs, num_agents, lanes, *args)``: ``lanes`` threads per env
    (:func:`launch_geometry`), as many envs per block as fit whole, threads striding over agents.

    Every thread reaches every barrier, so a thread without an env (past ``num_envs``, or in the block's
    leftover lanes) skips the phases rather than returning. Consecutive per-env phases run on the env's first
    lane one after the other, so no barrier separates them.
    """
    args = ", ".join(f"a{k}" for k in range(nargs))
    lines = [
        f"def {name}(num_envs, num_agents, lanes, {args}):",
        "    t = cuda.threadIdx.x",
        "    envs_per_block = cuda.blockDim.x // lanes",
        "    slot = t // lanes",
        "    e = cuda.blockIdx.x * envs_per_block + slot",
        "    lane = t - slot * lanes",
        "    has_env = slot < envs_per_block and e < num_envs",
    ]
    stride = ["i = lane", "while i < num_agents:", "    {call}", "    i += lanes"]
    # a team phase: a team is a warp of the env's block (the block is the env's, :func:`launch_geometry`); its
    # threads call fn for the agents w, w + W, ... of team w of W together: the same calls in the same order, so
    # they meet at the team functions' warp barriers, while the env's other teams work on other agents
    team = [f"i = lane // {WARP}", "while i < num_agents:", "    {call}", f"    i += lanes // {WARP}"]
    for p, phase in enumerate(phases):
        if p and not (phase.kind == "env" and phases[p - 1].kind == "env"):
            lines.append("    cuda.syncthreads()")
        if phase.kind != "env":
            lines.append("    if has_env:")
            lines += _phase_lines(p, phase, args, "        ", stride if phase.kind == "agent" else team)
        else:
            lines.append("    if has_env and lane == 0:")
            lines += _phase_lines(p, phase, args, "        ", [])
    return "\n".join(lines) + "\n"
