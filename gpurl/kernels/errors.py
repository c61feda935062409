"""Errors in an env author's kernel code, reported at the author's file and line.

Numba reports a phase that does not type through the kernel gpurl generates around it (``<gpurl
name_cpu>``, ``name_cpu_p2``), and the compiled CPU build does not check indices unless
``NUMBA_BOUNDSCHECK=1`` (and then says only "index is out of bounds"). :class:`~.program.EnvKernel`
turns both into errors that name the phase, the function and line in the author's source, the
essential part of Numba's message, and the arrays used on that line with their dtypes and shapes:

- :class:`KernelTypingError` (a ``TypeError``): Numba could not compile the kernel (a wrong rank or
  field, an untyped name, a torch tensor passed where a kernel view belongs);
- :class:`KernelIndexError` (an ``IndexError``): a phase indexed out of bounds; found by re-running the
  launch as plain Python (:meth:`~.program.EnvKernel.run_python`) on copies of its arrays.

Nothing here runs unless a launch has already failed.
"""
from __future__ import annotations

import linecache
import os
import re
import traceback
from typing import Callable

from .targets import DeviceFunction


class KernelTypingError(TypeError):
    """Numba could not compile a kernel; the message points at the author's phase and line."""


class KernelIndexError(IndexError):
    """A phase indexed an array out of bounds; the message names the phase, env, agent and line."""


# ---- which author function a location belongs to -------------------------------------------------------


def _functions(phases) -> list[tuple[Callable, int | None]]:
    """(plain-Python function, phase index or None for a helper) of every phase and every helper they
    reach through their globals, phases first."""
    found: list[tuple[Callable, int | None]] = []
    seen: set[int] = set()

    def add(fn: Callable, phase: int | None) -> None:
        if id(fn) in seen or not hasattr(fn, "__code__"):
            return
        seen.add(id(fn))
        found.append((fn, phase))
        for name in fn.__code__.co_names:
            value = fn.__globals__.get(name)
            if isinstance(value, DeviceFunction):
                for impl in (value.py_func, *value._overrides.values()):
                    add(impl, None)

    for p, phase in enumerate(phases):
        add(phase.fn.py_func, p)
    return found


def _last_line(code) -> int:
    return max((line for _, _, line in code.co_lines() if line is not None), default=code.co_firstlineno)


def _owner(functions, path: str, line: int):
    """The (function, phase) whose source holds ``path:line``; Numba shortens paths, so match suffixes."""
    for fn, phase in functions:
        code = fn.__code__
        same_file = code.co_filename == path or code.co_filename.endswith(os.sep + path.lstrip(os.sep))
        if same_file and code.co_firstlineno <= line <= _last_line(code):
            return fn, phase
    return None


_LOCATIONS = re.compile(r'File "([^"<]+)", line (\d+)|\bat ([^\s<(][^()]*?) \((\d+)\)')


def _locations(message: str) -> list[tuple[str, int]]:
    out = []
    for m in _LOCATIONS.finditer(message):
        path, line = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        out.append((path, int(line)))
    return out


# ---- what the message should say --------------------------------------------------------------------------


def _essential(message: str) -> str:
    """The line of a Numba message that says what is wrong."""
    lines = [line.strip() for line in message.splitlines()]
    for k, line in enumerate(lines):
        if line.startswith("Rejected as the implementation raised a specific error") and k + 1 < len(lines):
            return lines[k + 1]
    for k, line in enumerate(lines):
        if line.startswith("No implementation of function"):
            signature = next((x[4:] for x in lines[k + 1:] if x.startswith(">>> ")), "")
            return f"no implementation of {signature}" if signature else line
    skip = ("Failed in ", "During:", "File ", "^")
    return next((line for line in lines if line and not line.startswith(skip)), lines[0] if lines else "")


def _describe(value) -> str:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        shape = list(getattr(value, "shape"))
        return f"{value.dtype} {type(value).__name__} of shape {shape} ({len(shape)}-d)"
    return f"{type(value).__name__} {value!r}"


def _names_on_line(line: str, names: dict) -> list[str]:
    """``name.field = <description>`` for the kernel arguments used on a source line."""
    notes, done = [], set()
    for m in re.finditer(r"\b([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?", line):
        name, field = m.group(1), m.group(2)
        if name not in names or (name, field) in done:
            continue
        done.add((name, field))
        value = names[name]
        if field is None:
            if hasattr(value, "shape"):
                notes.append(f"{name} is {_describe(value)}")
        elif hasattr(value, "_fields"):
            if field in value._fields:
                notes.append(f"{name}.{field} is {_describe(getattr(value, field))}")
            else:
                notes.append(f"{name} ({type(value).__name__}) has no field {field!r}; its fields: "
                             f"{', '.join(value._fields)}")
    return notes


def _argument_names(fn: Callable, phase_fn: Callable, phase_kind: str, args: tuple) -> dict:
    """Parameter name -> launch argument, from the phase's signature; a helper's parameters count when
    they carry the phase's names (``s``, ``c``, ...)."""
    code = phase_fn.__code__
    params = code.co_varnames[:code.co_argcount][2 if phase_kind == "agent" else 1:]
    names = dict(zip(params, args))
    if fn is not phase_fn:
        own = set(fn.__code__.co_varnames[:fn.__code__.co_argcount])
        names = {k: v for k, v in names.items() if k in own}
    return names


def _where(kernel, fn: Callable, phase: int | None, line: int, args: tuple) -> tuple[str, list[str], str]:
    """(which phase, traceback-style lines of ``fn`` at ``line``, the kernel arrays used on that line)."""
    header, notes = "", []
    source = linecache.getline(fn.__code__.co_filename, line).strip()
    if phase is not None:
        ph = kernel.phases[phase]
        helper = f", in its helper {fn.__name__}" if fn is not ph.fn.py_func else ""
        header = f"phase {phase} of {len(kernel.phases)}, {ph.fn.__name__} (per {ph.kind}){helper}"
        notes = _names_on_line(source, _argument_names(fn, ph.fn.py_func, ph.kind, args))
    body = [f'  File "{fn.__code__.co_filename}", line {line}, in {fn.__name__}'] + ([f"    {source}"] if source else [])
    return header, body, ("  on this line: " + "; ".join(notes)) if notes else ""


# ---- the two reports ---------------------------------------------------------------------------------------


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
        sig = (numba.types.int64, numba.types.int64) + tuple(numba.typeof(a) for a in args)
        numba.njit(kernel.driver_python("cpu", constants)).compile(sig)  # not parallel: prange is a range here
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
    functions = _functions(kernel.phases)
    located = [(hit, line) for path, line in _locations(message) if (hit := _owner(functions, path, line))]
    if not located and target == "cuda":  # numba-cuda's messages carry no location: the CPU typing has it
        cpu_message = _cpu_typing_message(kernel, args, constants)
        located = [(hit, line) for path, line in _locations(cpu_message) if (hit := _owner(functions, path, line))]
        message = f"{message}\n{cpu_message}"
    if not located:
        return KernelTypingError(f"{lines[0]}: {_essential(message)}")
    (fn, phase), line = located[0]
    if phase is None:  # a helper: name the phase that calls it
        phase = next((p for (f, p), _ in located if p is not None), None)
        if phase is None:
            m = re.search(r"_(?:cpu|cuda)_p(\d+)\b", message)
            phase = int(m.group(1)) if m else None
    header, body, notes = _where(kernel, fn, phase, line, args)
    lines[0] = lines[0].rstrip(":") + (f", {header}:" if header else ":")
    return KernelTypingError("\n".join(lines + body + [f"  {_essential(message)}"] + ([notes] if notes else [])))


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
    try:
        kernel.run_python(num_envs, num_agents, *_copy_args(args), constants=constants)
    except Exception as found:  # noqa: BLE001 - whatever the plain run raises is the diagnosis
        phase, e, i = getattr(found, "gpurl_phase", (None, None, None))
        frames = [f for f in traceback.extract_tb(found.__traceback__)
                  if os.path.dirname(f.filename) != os.path.dirname(__file__)]
        functions = _functions(kernel.phases)
        owned = [(f, _owner(functions, f.filename, f.lineno)) for f in frames]
        owned = [(f, hit) for f, hit in owned if hit]
        agent = "" if i is None else f", agent {i}"
        lines = [f"kernel {kernel.name!r} (cpu build): {type(found).__name__} in env {e}{agent}"]
        body, notes = [], ""
        if owned:
            frame, (fn, _) = owned[-1]
            header, body, notes = _where(kernel, fn, phase, frame.lineno, args)
            lines[0] += f", {header}" if header else ""
            callers = [f'  File "{f.filename}", line {f.lineno}, in {f.name}\n    {(f.line or "").strip()}'
                       for f, _ in owned[:-1]]  # a phase calling its helper
            body = callers + body
        lines[0] += ":"
        lines += body + [f"  {type(found).__name__}: {found}"] + ([notes] if notes else [])
        lines.append("(located by re-running the launch as plain Python on copies of its arrays: "
                     "EnvKernel.run_python)")
        return KernelIndexError("\n".join(lines))
    return None
