"""Where a piece of a kernel comes from in the author's source: the phase, the function, file and line.

Numba reports errors, and keeps line numbers in its typed code, at the statements it compiled: once the
CPU build has inlined phases and helpers into the loop gpurl generates, a location is still the author's
file and line. These helpers map such a location back to the author's function and the phase that runs
it, and format that part of a message (:mod:`.errors`, :mod:`.float64`). gpurl's own toolkit functions
(this package) count as the toolkit's, not the author's.
"""
from __future__ import annotations

import linecache
import os
import re
from typing import Callable

from .targets import DeviceFunction


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
    for p, phase in enumerate(phases):
        if getattr(phase, "when", None) is not None:
            add(phase.when.py_func, p)
    for p, phase in enumerate(phases):  # a phase's own per-target implementations
        for impl in phase.fn._overrides.values():
            add(impl, p)
    return found


def _reaches(fn: Callable, target: Callable, seen: set | None = None) -> bool:
    """Whether ``fn`` calls ``target`` (directly or through helpers)."""
    seen = set() if seen is None else seen
    if fn is target:
        return True
    if id(fn) in seen or not hasattr(fn, "__code__"):
        return False
    seen.add(id(fn))
    for name in fn.__code__.co_names:
        value = fn.__globals__.get(name)
        if isinstance(value, DeviceFunction):
            if any(_reaches(impl, target, seen) for impl in (value.py_func, *value._overrides.values())):
                return True
    return False


def _phase_reaching(phases, fn: Callable) -> int | None:
    """The first phase that runs ``fn`` (itself, its guard or through a helper)."""
    for p, phase in enumerate(phases):
        roots = [phase.fn.py_func, *phase.fn._overrides.values()]
        if getattr(phase, "when", None) is not None:
            roots.append(phase.when.py_func)
        if any(_reaches(root, fn) for root in roots):
            return p
    return None


def _is_toolkit(fn: Callable) -> bool:
    """A function of gpurl's own kernel toolkit (not the author's)."""
    return (getattr(fn, "__module__", None) or "").startswith(__name__.rsplit(".", 1)[0] + ".")


def _def_line(fn: Callable) -> int:
    """Line of ``def`` of ``fn`` (its first line is that of its first decorator)."""
    code = fn.__code__
    for line in range(code.co_firstlineno, code.co_firstlineno + 20):
        text = linecache.getline(code.co_filename, line).lstrip()
        if text.startswith(("def ", "async def ")):
            return line
        if not text:
            break
    return code.co_firstlineno


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
    import numpy as np

    if isinstance(value, np.generic):
        return f"{value.dtype} scalar {value}"
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
    params = code.co_varnames[:code.co_argcount][1 if phase_kind == "env" else 2:]
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
        guard = getattr(ph, "when", None)
        helper = "" if fn is ph.fn.py_func or fn in ph.fn._overrides.values() else (
            f", in its guard {fn.__name__}" if guard is not None and fn is guard.py_func
            else f", in its helper {fn.__name__}")
        header = f"phase {phase} of {len(kernel.phases)}, {ph.fn.__name__} (per {ph.kind}){helper}"
        notes = _names_on_line(source, _argument_names(fn, ph.fn.py_func, ph.kind, args))
    body = [f'  File "{fn.__code__.co_filename}", line {line}, in {fn.__name__}'] + ([f"    {source}"] if source else [])
    return header, body, ("  on this line: " + "; ".join(notes)) if notes else ""


_OUT_OF_BOUNDS = re.compile(r"index (-?\d+) is out of bounds for axis (\d+) with size (\d+)")
_SUBSCRIPTED = re.compile(r"\b([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\s*\[")


def _declared_size(message: str, frames, source: str) -> str:
    """For NumPy's "index 6 is out of bounds for axis 0 with size 6" raised at ``source`` (a line of the
    innermost of ``frames``, the author's frames outermost first): which kernel array the index runs
    along and the declared size of that axis, e.g. ``row is a view of s.obs, float32 ndarray of shape
    [4, 3, 6] (3-d): index 6 on its axis 2, whose declared size is 6`` ("" when it cannot be told)."""
    import numpy as np

    m = _OUT_OF_BOUNDS.search(message)
    if m is None or not frames:
        return ""
    index, axis, size = (int(g) for g in m.groups())
    labels: dict[int, str] = {}  # id of a kernel array -> how the author's code names it
    for frame in frames:
        for name, value in frame.f_locals.items():
            if hasattr(value, "_fields"):
                labels.update((id(v), f"{name}.{f}") for f, v in zip(value._fields, value) if isinstance(v, np.ndarray))
            elif isinstance(value, np.ndarray) and value.base is None:
                labels[id(value)] = name
    local = frames[-1].f_locals
    for expr in _SUBSCRIPTED.findall(source.split("#", 1)[0]):
        head, *attrs = expr.split(".")
        value = local.get(head, frames[-1].f_globals.get(head))
        for attr in attrs:
            value = getattr(value, attr, None)
        if not isinstance(value, np.ndarray) or value.ndim <= axis or value.shape[axis] != size:
            continue
        base, base_axis = value, axis
        while id(base) not in labels and isinstance(base.base, np.ndarray):
            base = base.base
        if id(base) not in labels:
            continue
        if base is not value:  # a view (row = s.obs[e, i]): its axis is the array's axis of the same stride
            base_axis = next((k for k in range(base.ndim) if base.strides[k] == value.strides[axis]
                              and base.shape[k] == size), None)
            if base_axis is None:
                continue
        what = expr if base is value else f"{expr} is a view of {labels[id(base)]}, which"
        return (f"  {what} is {_describe(base)}: index {index} on its axis {base_axis}, whose declared size is "
                f"{size}")
    return ""
