"""Accidental float64 in kernel code, found in Numba's typed code and reported at the author's line.

gpurl's kernels compute in float32. In Numba a Python float literal is float64 (``x * 0.1``), ``/`` of
two ints is float64 (``i / n``), and a variable assigned both an int and a float32 (``best = 0``, later
``best = d``) is typed float64, the one type that holds both. The CPU build compiles and runs such code
without a word (no longer the float32 twin of the GPU build); the CUDA build gets ``.f64`` instructions,
which the compile tier's PTX check finds but cannot place: NVVM inlines the author's functions into one
kernel, and PTX line info names only the kernel gpurl generates.

Numba's typed code still knows the author's lines (every statement keeps its file and line, also where
the CPU build inlines phases and helpers into its generated loop), so the check reads that:

- CPU: :func:`watch_cpu_build` makes a CPU build check each new compilation as Numba adds it (once per
  build and argument types, at the first launch; nothing runs per step). Float64 in the author's code
  raises :class:`~.errors.KernelFloat64Error` at that launch, and the compilation is not kept (nor saved in
  the on-disk cache, :mod:`.build_cache`: a build loaded from there passed this check when it compiled).
- CUDA: :func:`cuda_float64_error` reads the typed code of the phases' CUDA device functions after a
  compile; :func:`~.aot.check_float64_sm90` calls it when the PTX holds float64.

Reported: a float64 made from narrower numbers, i.e. a float32 mixed with anything float64 (a literal, a
float64 variable or argument), a float64 made from ints, bools and literals only (``i / n``,
``float(i)``, ``0.5 * i``), and a variable that holds a float32 and something else, so Numba types it
float64. Not reported: float64 *data* (a float64 array or argument, and arithmetic on it), explicit
``np.float64(...)`` conversions (deliberate), and gpurl's own code (the CPU ``cos32`` evaluates in
float64 on purpose).
"""
from __future__ import annotations

import linecache
import operator
import re
from dataclasses import dataclass, field
from typing import Callable

from .errors import KernelFloat64Error
from .locate import _functions, _is_toolkit, _owner, _phase_reaching, _where

_SYMBOLS = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
            operator.floordiv: "//", operator.mod: "%", operator.pow: "**", operator.iadd: "+=",
            operator.isub: "-=", operator.imul: "*=", operator.itruediv: "/=", operator.ipow: "**=",
            operator.neg: "-", operator.pos: "+", operator.lt: "<", operator.le: "<=", operator.gt: ">",
            operator.ge: ">=", operator.eq: "==", operator.ne: "!="}
_MAX_SHOWN = 5


@dataclass
class Finding:
    """One float64 the author did not ask for: where, what and how to fix it."""

    fn: Callable
    phase: int | None
    lines: list[int]
    what: str
    hint: str
    key: tuple = field(default=())


def _kind(numba_type) -> str | None:
    """"f64", "narrow" (float16/float32), "int" (ints, bools) or None (not a real number)."""
    numba_type = getattr(numba_type, "literal_type", numba_type)  # Literal[int](0) -> int64
    name = str(numba_type)
    if name == "float64":
        return "f64"
    if name in ("float32", "float16"):
        return "narrow"
    if name == "bool" or re.fullmatch(r"u?int\d+", name):
        return "int"
    return None


def _statements(blocks):
    """Every statement of a typed function, the bodies of parallel loops (parfors) included."""
    for block in blocks.values():
        for inst in block.body:
            yield inst
            init = getattr(inst, "init_block", None)
            if init is not None:
                yield from init.body
            body = getattr(inst, "loop_body", None)
            if isinstance(body, dict):
                yield from _statements(body)


def _typed_functions(results) -> list:
    """Numba's type annotations of compile results ``results`` and of every function they call through a
    dispatcher (the CPU build's per-chunk function, an author's own ``njit`` or CUDA device function)."""
    out, seen, stack = [], set(), list(results)
    while stack:
        cres = stack.pop()
        annotation = getattr(cres, "type_annotation", None)
        if annotation is None or id(cres) in seen or not hasattr(annotation, "typemap"):
            continue
        seen.add(id(cres))
        out.append(annotation)
        called = {tuple(sig.args) for sig in annotation.calltypes.values() if hasattr(sig, "args")}
        for numba_type in set(annotation.typemap.values()):
            overloads = getattr(getattr(numba_type, "dispatcher", None), "overloads", None)
            if overloads:
                stack += [result for args, result in list(overloads.items()) if args in called]
    return out


def _source_name(var_name: str, fn: Callable) -> str | None:
    """The author's name of a Numba variable (SSA versions ``x.2`` and inlining prefixes
    ``phase_v3_x`` removed), or None for a temporary."""
    base = re.sub(r"\.\d+$", "", var_name)
    if base.startswith("$"):
        return None
    names = fn.__code__.co_varnames
    if base in names:
        return base
    return max((v for v in names if base.endswith("_" + v)), key=len, default=None)


class _Function:
    """One typed function: its definitions and types, and which author function each line belongs to."""

    def __init__(self, annotation, functions):
        self.typemap = annotation.typemap
        self.statements = [s for s in _statements(annotation.blocks) if type(s).__name__ == "Assign"]
        self.defs: dict[str, list] = {}
        for s in self.statements:
            self.defs.setdefault(s.target.name, []).append(s.value)
        self._functions, self._owners = functions, {}

    def owner(self, loc):
        key = (loc.filename, loc.line)
        if key not in self._owners:
            hit = _owner(self._functions, loc.filename, loc.line) if loc.filename and loc.line else None
            self._owners[key] = None if hit is None or _is_toolkit(hit[0]) else hit
        return self._owners[key]

    def constant(self, var, depth: int = 0):
        """The Python value a variable copies from a literal or a global, else None."""
        values = self.defs.get(var.name, [])
        if len(values) != 1 or depth > 8:
            return None
        value = values[0]
        kind = type(value).__name__
        if kind == "Const" or (kind in ("Global", "FreeVar") and isinstance(value.value, (int, float))):
            return value
        if kind == "Var":
            return self.constant(value, depth + 1)
        return None

    def kind(self, var) -> str | None:
        return _kind(self.typemap.get(var.name))


def _operands(value) -> list:
    if value.op in ("binop", "inplace_binop"):
        return [value.lhs, value.rhs]
    if value.op == "unary":
        return [value.value]
    if value.op == "call":
        return list(value.args) + [v for _, v in value.kws]
    return []


def _operand_name(fun: _Function, var, fn, depth: int = 0) -> str | None:
    """How the author wrote an operand: a variable's name, ``s.field`` or ``a[...]``, else None."""
    name = _source_name(var.name, fn)
    if name is not None or depth > 8:
        return name
    values = fun.defs.get(var.name, [])
    if len(values) != 1:
        return None
    value = values[0]
    if type(value).__name__ == "Var":
        return _operand_name(fun, value, fn, depth + 1)
    if type(value).__name__ == "Expr" and value.op == "getattr":
        base = _operand_name(fun, value.value, fn, depth + 1)
        return f"{base}.{value.attr}" if base else None
    if type(value).__name__ == "Expr" and value.op in ("getitem", "static_getitem"):
        base = _operand_name(fun, value.value, fn, depth + 1)
        return f"{base}[...]" if base else None
    return None


def _describe(fun: _Function, value, operands, result_f64: bool) -> str:
    kinds = [str(fun.typemap.get(v.name)).replace("Literal[int]", "int").replace("Literal[bool]", "bool")
             for v in operands]
    if value.op in ("binop", "inplace_binop"):
        symbol = _SYMBOLS.get(value.fn, "an operator")
        return f"{kinds[0]} {symbol} {kinds[1]} " + ("is float64" if result_f64 else "compares in float64")
    if value.op == "call":
        callee = re.search(r"(?:function|class) '?([\w.]+)", str(fun.typemap.get(value.func.name)))
        return f"{callee.group(1) if callee else 'this call'}({', '.join(kinds)}) is float64"
    return f"{' and '.join(kinds)} gives float64"


def _expression_finding(fun: _Function, stmt, fn, phase, result_f64: bool = True) -> Finding | None:
    value = stmt.value
    operands = _operands(value)
    kinds = [(fun.kind(v), v) for v in operands]
    if not any(k for k, _ in kinds):
        return None
    if value.op == "call":
        callee = fun.typemap.get(value.func.name)
        if str(callee) == "class(float64)":
            return None  # np.float64(...): asked for
        if hasattr(callee, "dispatcher"):
            return None  # a compiled function of the author's: its own float64 is reported inside it
    narrow = any(k == "narrow" for k, _ in kinds)
    data = any(k == "f64" and fun.constant(v) is None for k, v in kinds)
    if data and not narrow:
        return None  # float64 in, float64 out: the author's float64 data, or reported where it began
    literals = [fun.constant(v) for k, v in kinds if k == "f64"]
    literals = [c for c in literals if c is not None]
    ints = [c for c in (fun.constant(v) for k, v in kinds if k == "int") if c is not None]
    if literals:
        c = literals[0]
        if type(c).__name__ == "Const":
            hint = f"a Python float ({c.value!r}) is a float64 constant: write np.float32({c.value!r})"
        else:
            hint = (f"the global {c.name} = {c.value!r} is a Python float, i.e. float64: define it as "
                    f"np.float32({c.value!r})")
    elif value.op in ("binop", "inplace_binop") and value.fn in (operator.truediv, operator.itruediv) and not narrow:
        hint = "/ of two integers is float64 in Numba: write np.float32(a) / np.float32(b)"
    elif narrow and ints and not data:
        hint = (f"an int ({ints[0].value!r}) with a float32 is float64 in Numba: write np.float32({ints[0].value!r})")
    elif narrow and data:
        f64 = [v for k, v in kinds if k == "f64"]
        name = _operand_name(fun, f64[0], fn)
        hint = (f"{name or 'one operand'} is float64 (a float64 argument, e.g. a Python float passed to the "
                f"launch, or float64 data): make it float32 (np.float32(...))")
    else:
        hint = "make the operands float32 (np.float32(...)) so the result stays float32"
    return Finding(fn, phase, [stmt.loc.line], _describe(fun, value, operands, result_f64), hint,
                   (id(fn), stmt.loc.line))


def _variable_finding(fun: _Function, stmt, fn, phase) -> Finding | None:
    """A variable that holds a float32 here and something else elsewhere, so Numba types it float64."""
    name = _source_name(stmt.target.name, fn)
    if name is None:
        return None
    sources = []  # (line, type name) of every assignment of ``name`` from something other than itself
    for other in fun.statements:
        if _source_name(other.target.name, fn) != name or fun.owner(other.loc) is None:
            continue
        if fun.owner(other.loc)[0] is not fn:
            continue
        value = other.value
        if type(value).__name__ == "Var" and _source_name(value.name, fn) == name:
            continue  # a copy between versions of the same variable
        source = value if type(value).__name__ == "Var" else other.target
        source_type = fun.typemap.get(source.name)
        kind = _kind(source_type)
        type_name = {"int": "an int", "narrow": f"a {source_type}", "f64": "a float64"}.get(kind, str(source_type))
        sources.append((other.loc.line, type_name))
    sources = sorted(set(sources))
    lines = [line for line, _ in sources] or [stmt.loc.line]
    where = [f"{t} (line {line})" for line, t in sources] or ["a float32 and another type"]
    where = ", ".join(where[:-1]) + " and " + where[-1] if len(where) > 1 else where[0]
    what = (f"{name} is float64: it is assigned {where}; Numba gives a variable one type, here the "
            f"float64 that holds them all")
    first = next((line for line, t in sources if t == "an int"), None)
    init = linecache.getline(fn.__code__.co_filename, first).split("#", 1)[0].strip() if first else ""
    m = re.fullmatch(rf"{re.escape(name)}\s*=\s*(-?\d+)", init)
    hint = (f"initialise it as a float32: {name} = np.float32({m.group(1)})" if m
            else f"give {name} float32 values only (np.float32(...))")
    return Finding(fn, phase, lines, what, hint, (id(fn), name))


def float64_findings(kernel, results) -> list[Finding]:
    """Float64 in the author's functions of ``kernel`` (not in gpurl's toolkit), read from Numba compile
    results ``results`` (the CPU build's, or the CUDA device functions') and what they call."""
    functions = _functions(kernel.phases)
    found: dict[tuple, Finding] = {}
    for annotation in _typed_functions(results):
        fun = _Function(annotation, functions)
        variables, expressions = [], []
        for stmt in fun.statements:
            value = stmt.value
            result_f64 = _kind(fun.typemap.get(stmt.target.name)) == "f64"
            compares = (type(value).__name__ == "Expr" and value.op == "binop"
                        and any(fun.kind(v) == "f64" for v in (value.lhs, value.rhs)))  # e.g. x > 0.5
            if not (result_f64 or compares) or fun.owner(stmt.loc) is None:
                continue
            fn, phase = fun.owner(stmt.loc)
            phase = _phase_reaching(kernel.phases, fn) if phase is None else phase
            if result_f64 and type(value).__name__ == "Var" and fun.kind(value) == "narrow":
                variables.append((stmt, fn, phase))
            elif type(value).__name__ == "Expr":
                expressions.append((stmt, fn, phase, result_f64))
        reported = set()  # (function, variable) found float64 by unification: its uses are not new findings
        for stmt, fn, phase in variables:
            finding = _variable_finding(fun, stmt, fn, phase)
            if finding is not None:
                found.setdefault(finding.key, finding)
                reported.add(finding.key)
        for stmt, fn, phase, result_f64 in expressions:
            if any((id(fn), _operand_name(fun, v, fn)) in reported for v in _operands(stmt.value)):
                continue
            finding = _expression_finding(fun, stmt, fn, phase, result_f64)
            if finding is not None:
                found.setdefault(finding.key, finding)
    return sorted(found.values(), key=lambda f: (-1 if f.phase is None else f.phase, f.fn.__code__.co_filename,
                                                 f.lines))


def float64_error(kernel, target: str, findings: list[Finding], args: tuple = ()) -> KernelFloat64Error | None:
    """A :class:`~.errors.KernelFloat64Error` listing ``findings`` (None when there are none)."""
    if not findings:
        return None
    out = []
    for finding in findings[:_MAX_SHOWN]:
        header, _, _ = _where(kernel, finding.fn, finding.phase, finding.lines[0], args)
        out.append(f"kernel {kernel.name!r} ({target} build) computes in float64"
                   + (f", {header}:" if header else ":"))
        for line in finding.lines:
            _, body, _ = _where(kernel, finding.fn, finding.phase, line, args)
            out += body
        out += [f"  {finding.what}", f"  fix: {finding.hint}"]
    if len(findings) > _MAX_SHOWN:
        out.append(f"... and {len(findings) - _MAX_SHOWN} more")
    return KernelFloat64Error("\n".join(out))


def watch_cpu_build(kernel, dispatcher) -> None:
    """Make the CPU build ``dispatcher`` of ``kernel`` check every compilation before Numba keeps it.

    Wraps the dispatcher's ``add_overload`` (a Numba internal, called once per new argument types right
    after compiling; checked with numba 0.68): a compilation with float64 in the author's code raises
    :class:`~.errors.KernelFloat64Error` from the launch that compiled it and is dropped, so every later
    launch with those types raises again. Launches of a kept compilation run nothing of this.
    """
    add = getattr(dispatcher, "add_overload", None)
    if add is None:  # not a Numba dispatcher as we know it: no check rather than no kernel
        return

    def add_checked(cres):
        try:
            error = float64_error(kernel, "cpu", float64_findings(kernel, [cres]))
        except Exception:  # noqa: BLE001 - a failed check must never stop a kernel that compiled
            error = None
        if error is not None:
            raise error
        add(cres)

    dispatcher.add_overload = add_checked


def cuda_float64_error(kernel, args: tuple, constants: tuple = ()) -> KernelFloat64Error | None:
    """The float64 of ``kernel``'s CUDA build for launch arguments ``args`` (after a compile, e.g.
    :func:`~.aot.compile_ptx_sm90`), read from its phases' device functions; None when none is found."""
    import numba

    arg_types = tuple(numba.typeof(a) for a in args)
    results = []
    for phase in kernel.phases:
        for fn in (phase.fn, getattr(phase, "when", None)):
            if fn is None:
                continue
            overloads = getattr(fn.build("cuda", constants), "overloads", {})
            results += [r for key, r in overloads.items() if tuple(key[len(key) - len(arg_types):]) == arg_types]
    return float64_error(kernel, "cuda", float64_findings(kernel, results), args)
