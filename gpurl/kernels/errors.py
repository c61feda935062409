"""Errors in an env author's kernel code, reported at the author's file and line.

Numba reports a phase that does not type through the kernel gpurl generates around it (``<gpurl
name_cpu>``, ``name_cpu_envs``), and the compiled CPU build does not check indices unless
``NUMBA_BOUNDSCHECK=1`` (and then says only "index is out of bounds"). :class:`~.program.EnvKernel`
turns both into errors that name the phase, the function and line in the author's source, the
essential part of Numba's message, and the arrays used on that line with their dtypes and shapes:

- :class:`KernelTypingError` (a ``TypeError``): Numba could not compile the kernel (a wrong rank or
  field, an untyped name, a torch tensor passed where a kernel view belongs);
- :class:`KernelIndexError` (an ``IndexError``): a phase indexed out of bounds; found when the first
  launches of a build run as plain Python (:meth:`~.program.EnvKernel.run_python`) on copies of their
  arrays (:mod:`.bounds`), or by re-running a launch that failed Numba's ``NUMBA_BOUNDSCHECK=1`` check.

Nothing here runs unless a launch has already failed (or the bounds check found an index out of bounds),
except :func:`check_phase_signatures` (once, when an :class:`~.program.EnvKernel` is made) and the float64
check of :mod:`.float64` (once per CPU build and argument types, when Numba compiles it).

### When a kernel does not compile

Four mistakes get an error of their own, each a :class:`KernelTypingError` whose message names the
kernel, the phase and the author's function with ``File "...", line N`` and the line's source:

- :class:`KernelHelperError`: kernel code calls a plain Python function (Numba said only ``NameError:
  name 'torus_offset' is not defined``): ``torus_offset is a plain Python function (defined at
  my_env.py:12) called from kernel code, which can only call functions decorated with
  @gpurl.kernels.device``, at the line that calls it.
- :class:`KernelSignatureError`, raised by ``EnvKernel(...)`` before anything compiles: a phase's
  parameters do not fit its kind. ``per_agent(fn)`` calls ``fn(e, i, *args)``, ``per_env(fn)`` and a
  ``when`` guard call ``fn(e, *args)``, with ``nargs`` args. The message shows the ``def`` line and what
  the function looks like: ``takes 4 (e, s, c, actions): it looks like a per_env phase, fn(e, *args):
  make it with per_env(step_env), or give it the agent index as second parameter``.
- :class:`KernelFloat64Error`: the build computes in float64 where float32 was meant. Numba compiles
  and runs that without a word, so the CPU build reads its typed code once, when it is compiled at the
  first launch (:mod:`.float64`), and the compile tier's :func:`~.aot.check_float64_sm90` does the same
  for PTX with ``.f64``. gpurl's own float64 (the CPU ``cos32``), float64 data and explicit
  ``np.float64(...)`` are not reported. For example:

      kernel 'step' (cpu build) computes in float64, phase 1 of 3, chase (per agent):
        File "my_env.py", line 41, in chase
          best_d = 0
        File "my_env.py", line 45, in chase
          best_d = d
        best_d is float64: it is assigned an int (line 41) and a float32 (line 45); Numba gives a
        variable one type, here the float64 that holds them all
        fix: initialise it as a float32: best_d = np.float32(0)

  Other cases: ``x * 0.1`` (``fix: a Python float (0.1) is a float64 constant: write
  np.float32(0.1)``), ``i / n`` of two ints, a Python float passed to the launch (``scale is float64``).
- :class:`KernelAllocationError`: a line allocates (``np.zeros(3)``, ``x.copy()``, an array expression
  such as ``x[e] * 2``, a list); Numba said ``NRT required but not enabled``. The message names the line,
  says why (the CPU build runs without Numba's memory runtime, and a GPU thread cannot allocate
  either) and what to do: a scratch field in the env's arrays (or :func:`~.scratch.lane` rows),
  allocated once, or scalars and tuples.
"""
from __future__ import annotations

import dis
import linecache
import os
import re
import traceback
import types
from typing import Callable

from .locate import (_declared_size, _def_line, _essential, _functions, _is_toolkit, _last_line, _locations, _owner,
                     _phase_reaching, _where)


class KernelTypingError(TypeError):
    """Numba could not compile a kernel; the message points at the author's phase and line."""


class KernelIndexError(IndexError):
    """A phase indexed an array out of bounds; the message names the phase, env, agent and line."""


class KernelHelperError(KernelTypingError):
    """A phase or helper calls a plain Python function; it must be decorated with ``@device``."""


class KernelSignatureError(KernelTypingError):
    """A phase's parameters do not match its kind (``per_agent``: ``e, i, *args``; ``per_env``: ``e,
    *args``) and the kernel's ``nargs``."""


class KernelFloat64Error(KernelTypingError):
    """Kernel code computes in float64 where float32 was meant; names the variable or expression and line."""


class KernelAllocationError(KernelTypingError):
    """Kernel code allocates (a new array or list); kernels work in preallocated arrays only."""


#: Set to 1 to see the Numba error behind a kernel author's error (hidden by default: gpurl's message says
#: what to fix; Numba's chain runs to 50-90 lines of its internals).
DEBUG_SWITCH = "GPURL_DEBUG"


def raise_alone(found: BaseException, cause: BaseException) -> None:
    """Raise ``found`` (gpurl's diagnosis of the author's mistake behind ``cause``, or ``cause`` itself when it
    is already gpurl's) without Numba's chain and frames, unless ``GPURL_DEBUG=1``; its message then names
    the switch."""
    if os.environ.get(DEBUG_SWITCH, "0") == "1":
        if found is cause:
            raise found
        raise found from cause
    found.add_note(f"(Numba's own error behind this is hidden: {DEBUG_SWITCH}=1 shows it)")
    raise found.with_traceback(None) from None


def raised_here(err: BaseException) -> BaseException:
    """``err``, a kernel author's error caught by a public call (``env.reset``, ``env.step``), to raise again from
    there: its traceback then starts at the caller's line, not at the frames of gpurl's launch machinery
    (kept with ``GPURL_DEBUG=1``)."""
    return err if os.environ.get(DEBUG_SWITCH, "0") == "1" else err.with_traceback(None)


def is_author_error(err: BaseException) -> bool:
    """``err`` is one of gpurl's kernel-author errors (raised, e.g., from inside Numba's compile)."""
    return isinstance(err, (KernelTypingError, KernelIndexError))


# ---- phase signatures (checked when a kernel is made) -----------------------------------------------------

_CALLS = {"agent": ("per_agent", "(e, i, *args)", 2), "team": ("per_agent_team", "(e, i, *args)", 2),
          "env": ("per_env", "(e, *args)", 1)}


def _accepts(fn: Callable, count: int) -> bool:
    """Whether ``fn`` can be called with ``count`` positional arguments (True when it cannot be told)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return True
    required = code.co_argcount - len(getattr(fn, "__defaults__", None) or ())
    kw_required = set(code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount])
    kw_required -= set(getattr(fn, "__kwdefaults__", None) or {})
    return not kw_required and required <= count and (count <= code.co_argcount or bool(code.co_flags & 0x04))


def _looks_like(fn: Callable, role: str, nargs: int) -> str:
    """What ``fn``'s parameter count suggests it was written as."""
    n = fn.__code__.co_argcount
    name = fn.__name__
    agent_index = n > 1 and fn.__code__.co_varnames[1] in ("i", "agent")  # (e, i, ...): written per agent
    if role == "agent" and n == nargs + 1 and not agent_index:
        return (f"it looks like a per_env phase, fn(e, *args): make it with per_env({name}), or give it the "
                f"agent index as second parameter, {name}(e, i, ...)")
    if role == "env" and n == nargs + 2:
        return f"it looks like a per_agent phase, fn(e, i, *args): make it with per_agent({name})"
    if role == "when" and n == nargs + 2:
        return "a guard decides for a whole env: drop the agent index, when(e, *args)"
    lead = {"agent": 2, "env": 1, "when": 1}[role]
    indices = "env and agent indices" if lead == 2 else "env index"
    return (f"the kernel passes nargs={nargs} arguments after the {indices}, and {name} takes {n - lead}: "
            f"is EnvKernel(..., nargs={nargs}) right, or is a parameter missing?")


def phase_signature_problems(phases, nargs: int) -> list[str]:
    """One message per phase function (or ``when`` guard) whose parameters cannot take the arguments the
    generated kernel passes it: ``per_agent``: ``fn(e, i, *args)``, ``per_env`` and guards ``fn(e, *args)``,
    with ``len(args) == nargs``."""
    problems = []
    for p, phase in enumerate(phases):
        maker, call, lead = _CALLS[phase.kind]
        impls = (phase.fn.py_func, *phase.fn._overrides.values())
        role = "env" if phase.kind == "env" else "agent"  # a team phase is called as a per_agent one
        checks = [(impl, role, lead, f"a {maker} phase") for impl in impls]
        when = getattr(phase, "when", None)
        if when is not None:
            checks += [(impl, "when", 1, "its when guard") for impl in (when.py_func, *when._overrides.values())]
        for fn, role, lead, what in checks:
            if _accepts(fn, nargs + lead):
                continue
            code = fn.__code__
            line = _def_line(fn)
            params = ", ".join(code.co_varnames[:code.co_argcount])
            shown = "(e, i, " if lead == 2 else "(e, "
            call_args = shown + ", ".join(f"a{k}" for k in range(nargs)) + ")" if nargs else shown.rstrip(", ") + ")"
            source = linecache.getline(code.co_filename, line).strip()
            guard = f", when={fn.__name__}" if role == "when" else ""
            kind = f"{maker}({phase.fn.__name__}{guard})"
            problems.append("\n".join([
                f"phase {p} of {len(phases)}, {kind}: {what} is called as {fn.__name__}{call_args} "
                f"({nargs + lead} arguments), but",
                f'  File "{code.co_filename}", line {line}, in {fn.__name__}',
            ] + ([f"    {source}"] if source else []) + [
                f"  takes {code.co_argcount} ({params}): {_looks_like(fn, role, nargs)}",
            ]))
    return problems


def check_phase_signatures(name: str, phases, nargs: int) -> None:
    """Raise :class:`KernelSignatureError` when a phase of kernel ``name`` cannot take the arguments its
    kind and ``nargs`` give it (see :func:`phase_signature_problems`); called by ``EnvKernel(...)``."""
    problems = phase_signature_problems(phases, nargs)
    if problems:
        raise KernelSignatureError(f"kernel {name!r}: " + "\n".join(problems))


# ---- a plain Python function called from kernel code -----------------------------------------------------


def _typable(value) -> bool:
    """Whether Numba can call ``value`` from compiled code (a jitted or registered function, a builtin)."""
    if not isinstance(value, types.FunctionType):
        return True  # builtins, NumPy functions, Numba dispatchers, classes: Numba says for itself
    try:
        from numba.core.registry import cpu_target

        cpu_target.typing_context.resolve_value_type(value)  # e.g. numba.extending.register_jitable
        return True
    except Exception:  # noqa: BLE001 - untypable: Numba raises TypingError or ValueError
        return False


def plain_function_calls(phases) -> list[tuple[Callable, int, str, Callable]]:
    """(author function, line, name, plain function) for every global plain Python function (not a
    :func:`~.targets.device` function) that a phase, guard or helper loads; a kernel cannot call one."""
    found = []
    for fn, _ in _functions(phases):
        seen = set()
        instructions = list(dis.get_instructions(fn.__code__))
        for k, ins in enumerate(instructions):
            if ins.opname != "LOAD_GLOBAL":
                continue
            name, value = ins.argval, fn.__globals__.get(ins.argval)
            if isinstance(value, types.ModuleType) and k + 1 < len(instructions) \
                    and instructions[k + 1].opname in ("LOAD_ATTR", "LOAD_METHOD"):
                attr = instructions[k + 1].argval
                name, value = f"{name}.{attr}", getattr(value, attr, None)
            if name in seen or not isinstance(value, types.FunctionType) or _typable(value):
                continue
            seen.add(name)
            line = ins.positions.lineno if getattr(ins, "positions", None) and ins.positions.lineno else _def_line(fn)
            found.append((fn, line, name, value))
    return found


def _plain_function_error(kernel, target: str, args: tuple, calls) -> KernelHelperError:
    lines = []
    for fn, line, name, value in calls:
        phase = next((p for f, p in _functions(kernel.phases) if f is fn and p is not None), None)
        phase = _phase_reaching(kernel.phases, fn) if phase is None else phase
        header, body, _ = _where(kernel, fn, phase, line, args)
        code = value.__code__
        where = f"{code.co_filename}:{_def_line(value)}"
        lines += [f"kernel {kernel.name!r} ({target} build) does not compile" + (f", {header}:" if header else ":")]
        lines += body
        lines += [f"  {name} is a plain Python function (defined at {where}) called from kernel code, which can "
                  f"only call functions decorated with @gpurl.kernels.device:",
                  f"  put @device (from gpurl.kernels import device) above def {value.__name__}(...)"]
    return KernelHelperError("\n".join(lines))


# ---- allocation -------------------------------------------------------------------------------------------

_ALLOCATES = ("NRT required but not enabled", "Only accept returning of array passed into the function")
_ALLOCATING_CALLS = re.compile(r"\b(?:np|numpy)\.(?:zeros|ones|empty|full|array|arange|linspace|\w+_like)\s*\(|"
                               r"\.(?:copy|astype|reshape|flatten|ravel)\s*\(|(?:=|return)\s*\[")


def _allocation_lines(kernel) -> list[tuple[Callable, int | None, int]]:
    """(function, phase, line) of source lines of the author's functions that look like they allocate:
    the fallback when Numba's message holds no author location (numba-cuda's messages hold none)."""
    found = []
    for fn, phase in _functions(kernel.phases):
        if _is_toolkit(fn):
            continue
        code = fn.__code__
        for line in range(_def_line(fn) + 1, _last_line(code) + 1):
            text = linecache.getline(code.co_filename, line).split("#", 1)[0].strip()
            if text and _ALLOCATING_CALLS.search(text):
                found.append((fn, phase, line))
    return found


_ALLOCATION_HINT = ("this line allocates memory (a new array or list), and kernels cannot allocate: the CPU build "
                    "runs without Numba's memory runtime, and a GPU thread cannot allocate either.\n"
                    "  Preallocate instead: declare a scratch field in the env class (scratch = {\"tmp\": "
                    "gpurl.envs.field(\"float32\", \"agents\", 3)}) and write into s.tmp[e, i], or keep the "
                    "values in scalars or a tuple")


# ---- the reports -------------------------------------------------------------------------------------------


def _untypable_arguments(args: tuple) -> list[str]:
    import numba

    bad = []
    for k, arg in enumerate(args):
        leaves = [(f"argument {k} ({type(arg).__name__}).{f}", getattr(arg, f)) for f in arg._fields] \
            if hasattr(arg, "_fields") else [(f"argument {k}", arg)]
        for label, value in leaves:
            try:
                numba.typeof(value)
            except (TypeError, ValueError):
                hint = (": pass gpurl.kernels.interop.kernel_view(tensor, target), a zero-copy view"
                        if type(value).__module__.startswith("torch") else "")
                bad.append(f"{label} is a {type(value).__module__}.{type(value).__name__}, which Numba cannot "
                           f"take as a kernel argument{hint}")
    return bad


def _cpu_typing_message(kernel, args: tuple, constants: tuple = ()) -> str:
    """Numba's message when the CPU build of ``kernel`` is typed with ``args``' types ("" if it types)."""
    import numba
    from numba.core.errors import NumbaError

    try:
        driver = kernel.driver_python("cpu", constants)
        sizes = driver.__code__.co_argcount - len(args)  # num_envs, num_agents and the build's other ints
        sig = (numba.types.int64,) * sizes + tuple(numba.typeof(a) for a in args)
        numba.njit(driver).compile(sig)  # not parallel: prange is a range here
    except NumbaError as err:
        return str(err)
    except Exception:  # noqa: BLE001 - only a hint: the CUDA error is reported either way
        return ""
    return ""


def typing_error(kernel, target: str, args: tuple, err: Exception, constants: tuple = ()) -> KernelTypingError | None:
    """A :class:`KernelTypingError` for Numba's ``err`` (a launch of the build with ``constants``), or None
    when ``err`` is not a Numba error."""
    try:
        from numba.core.errors import NumbaError
    except ImportError:  # pragma: no cover - numba is a dependency
        return None
    if not isinstance(err, NumbaError):
        return None
    message = str(err)
    lines = [f"kernel {kernel.name!r} ({target} build) does not compile"]
    bad_args = _untypable_arguments(args)
    if bad_args:
        return KernelTypingError("\n".join([lines[0] + ":"] + [f"  {b}" for b in bad_args]))
    problems = phase_signature_problems(kernel.phases, kernel.nargs)  # e.g. an override added later
    if problems:
        return KernelSignatureError("\n".join([lines[0] + ":"] + problems))
    calls = plain_function_calls(kernel.phases)
    if calls:
        return _plain_function_error(kernel, target, args, calls)
    allocates = any(text in message for text in _ALLOCATES)
    functions = _functions(kernel.phases)
    located = [(hit, line) for path, line in _locations(message) if (hit := _owner(functions, path, line))]
    if not located and target == "cuda":  # numba-cuda's messages carry no location: the CPU typing has it
        cpu_message = _cpu_typing_message(kernel, args, constants)
        located = [(hit, line) for path, line in _locations(cpu_message) if (hit := _owner(functions, path, line))]
        message = f"{message}\n{cpu_message}"
        allocates = allocates or any(text in cpu_message for text in _ALLOCATES)
    if not located and allocates:
        located = [((fn, phase), line) for fn, phase, line in _allocation_lines(kernel)]
    error, essential = (KernelAllocationError, _ALLOCATION_HINT) if allocates else (KernelTypingError, None)
    if not located:
        return error(f"{lines[0]}: {essential or _essential(message)}")
    (fn, phase), line = located[0]
    if phase is None:  # a helper: name the phase that calls it
        phase = next((p for (f, p), _ in located if p is not None), None)
        if phase is None:
            phase = _phase_reaching(kernel.phases, fn)
    header, body, notes = _where(kernel, fn, phase, line, args)
    lines[0] = lines[0].rstrip(":") + (f", {header}:" if header else ":")
    return error("\n".join(lines + body + [f"  {essential or _essential(message)}"] + ([notes] if notes else [])))


def _copy_args(args: tuple) -> tuple:
    def copy(value):
        if hasattr(value, "_fields"):
            return type(value)(*(copy(v) for v in value))
        return value.copy() if hasattr(value, "copy") and hasattr(value, "shape") else value

    return tuple(copy(a) for a in args)


def is_index_error(err: BaseException) -> bool:
    """The compiled CPU build's bounds-check failure (an IndexError, or Numba's SystemError around it)."""
    return isinstance(err, IndexError) or (isinstance(err, SystemError) and isinstance(err.__cause__, IndexError))


def index_error(kernel, num_envs: int, num_agents: int, args: tuple,
                constants: tuple = ()) -> KernelIndexError | None:
    """Re-run a launch that failed a bounds check as plain Python on copies of ``args`` (with the build's
    ``constants``); a :class:`KernelIndexError` at the author's line, or None when the plain run does
    not fail."""
    copies = _copy_args(args)
    try:
        kernel.run_python(num_envs, num_agents, *copies, constants=constants)
    except Exception as found:  # noqa: BLE001 - whatever the plain run raises is the diagnosis
        return index_report(kernel, "cpu", found, copies, "(located by re-running the launch as plain Python on "
                                                          "copies of its arrays: EnvKernel.run_python)")
    return None


def index_report(kernel, target: str, found: BaseException, args: tuple, how: str) -> KernelIndexError:
    """The :class:`KernelIndexError` for ``found``, raised by :meth:`~.program.EnvKernel.run_python` over
    ``args`` (the arrays it ran on): the phase, env and agent, the author's line (and the helper's callers),
    the index with the array and the declared size of the axis it runs along, ``how`` it was found."""
    phase, e, i = getattr(found, "gpurl_phase", (None, None, None))
    tb = list(traceback.walk_tb(found.__traceback__))
    frames = [(frame, line) for frame, line in tb if os.path.dirname(frame.f_code.co_filename) != os.path.dirname(__file__)]
    functions = _functions(kernel.phases)
    owned = [(frame, line, hit) for frame, line in frames
             if (hit := _owner(functions, frame.f_code.co_filename, line))]
    agent = "" if i is None else f", agent {i}"
    lines = [f"kernel {kernel.name!r} ({target} build): {type(found).__name__} in env {e}{agent}"]
    body, notes = [], ""
    if owned:
        frame, line, (fn, _) = owned[-1]
        header, body, notes = _where(kernel, fn, phase, line, args)
        lines[0] += f", {header}" if header else ""
        callers = [f'  File "{f.f_code.co_filename}", line {n}, in {f.f_code.co_name}\n'
                   f'    {linecache.getline(f.f_code.co_filename, n).strip()}' for f, n, _ in owned[:-1]]
        body = callers + body
        size_note = _declared_size(str(found), [f for f, _, _ in owned], linecache.getline(
            frame.f_code.co_filename, line))
        notes = "\n".join(n for n in (size_note, notes) if n)
    lines[0] += ":"
    lines += body + [f"  {type(found).__name__}: {found}"] + ([notes] if notes else [])
    lines.append(how)
    return KernelIndexError("\n".join(lines))
