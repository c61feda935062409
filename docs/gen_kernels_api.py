#!/usr/bin/env python
"""Generate docs/kernels_api.md, the API reference of ``gpurl.kernels`` and of the env-author API of
``gpurl.envs`` (:data:`ENV_MODULES`), from the docstrings.

    python docs/gen_kernels_api.py           # rewrite docs/kernels_api.md
    python docs/gen_kernels_api.py --check   # exit 1 if the committed file is out of date

Every public name (no leading underscore) defined in a module of ``gpurl.kernels`` is listed in source
order with its signature (parameter names and defaults; the docstrings state types and shapes) and
its docstring; device functions (``@device``) are marked, classes list their class variables and public
methods, and ``#:`` comments document module constants.
``tests/test_kernels_api_doc.py`` checks that the committed file equals this script's output.
"""
from __future__ import annotations

import argparse
import importlib
import dataclasses
import inspect
import pkgutil
import re
import sys
from pathlib import Path

OUTPUT = Path(__file__).resolve().parent / "kernels_api.md"
#: The order modules are listed in; any other module of gpurl.kernels follows, alphabetically.
ORDER = ["program", "targets", "rng", "math32", "neighbors", "scratch", "interop", "errors", "aot"]
#: The modules of gpurl.envs an env author declares an env with, and the public names documented of each.
ENV_MODULES = {"base": ["KernelEnv"], "step_inputs": ["StepOutputs"], "spaces": ["Group", "check_groups"],
               "lifecycle": ["STEP", "RESET", "RUNNING", "ENDED", "TOOLKIT_ARRAYS", "TOOLKIT_CONSTANTS",
                             "episode_kernel", "default_state_phases", "global_state_layout",
                             "default_global_state_dim", "default_global_state_ref"],
               "params": ["ranged", "span", "Range", "ParameterError", "check_fields", "check_rules",
                          "checked_params"]}
HEADER = """# `gpurl.kernels` API reference

Generated from the docstrings by `docs/gen_kernels_api.py` (run `python docs/gen_kernels_api.py`
after changing a docstring; `tests/test_kernels_api_doc.py` fails while this file is out of date).
The tutorial [custom_env.md](custom_env.md) shows the toolkit at work on a complete env; the last
part, [Declaring an env](#declaring-an-env-gpurlenvs), is the `gpurl.envs` API it is declared with.
"""


def _markdown(doc: str) -> str:
    """Sphinx roles (:func:`~.x.y`) as code spans; everything else is already Markdown-friendly."""
    return re.sub(r":\w+:`~?\.?([^`]+)`", lambda m: f"`{m.group(1)}`", doc)


def _signature(fn) -> str:
    """``(a, b=1, *args, c=None, **kw)`` without annotations (their spelling varies across Pythons)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return "(...)"
    parts, star_done = [], False
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            parts.append(f"*{p.name}")
            star_done = True
            continue
        if p.kind is p.VAR_KEYWORD:
            parts.append(f"**{p.name}")
            continue
        if p.kind is p.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        if p.default is p.empty or p.default is dataclasses.MISSING:  # MISSING: no default (its repr has an address)
            parts.append(p.name)
        else:
            parts.append(f"{p.name}={p.default!r}")
    return f"({', '.join(parts)})"


def _line(obj) -> int:
    try:
        return inspect.getsourcelines(obj)[1]
    except (OSError, TypeError):
        return 0


def _members(module) -> list[tuple[str, object]]:
    from gpurl.kernels.targets import DeviceFunction

    found = []
    for name, obj in vars(module).items():
        if name.startswith("_"):
            continue
        target = obj.py_func if isinstance(obj, DeviceFunction) else obj
        if (inspect.isfunction(target) or inspect.isclass(target)) and target.__module__ == module.__name__:
            found.append((name, obj))
    return sorted(found, key=lambda item: _line(item[1].py_func if hasattr(item[1], "py_func") else item[1]))


def _constants(module, names: list[str]) -> list[str]:
    """Entries of the module constants among ``names``: their assignment lines (consecutive ones together)
    and the ``#:`` comment above them."""
    entries, comment, previous = [], [], False
    lines = inspect.getsource(module).splitlines()
    while lines:
        line = lines.pop(0)
        if line.startswith("#:"):
            comment.append(line[2:].strip())
            continue
        while line.count("(") > line.count(")") and lines and lines[0][:1].isspace():  # continued assignment
            line = line + " " + lines.pop(0).strip()
        targets = line.split("=", 1)[0].split(":")[0] if "=" in line and not line[:1].isspace() else ""
        listed = any(target.strip() in names for target in targets.split(","))
        if listed and previous and not comment:
            entries[-1][0].append(line.strip())
        elif listed:
            entries.append(([line.strip()], comment))
        comment, previous = [], listed
    return [item for code, text in entries for item in
            ("- " + ", ".join(f"`{c}`" for c in code) + (f": {_markdown(' '.join(text))}" if text else ""), "")]


def _class_variables(cls) -> str:
    """``name = default`` of every public ``ClassVar`` of ``cls`` (an env's declarations)."""
    names = [n for n, kind in vars(cls).get("__annotations__", {}).items()
             if not n.startswith("_") and "ClassVar" in str(kind) and n in vars(cls)]
    return ", ".join(f"`{n} = {vars(cls)[n]!r}`" for n in names)


def _entry(name: str, obj, level: str = "###") -> list[str]:
    from gpurl.kernels.targets import DeviceFunction

    doc = _markdown(inspect.getdoc(obj) or "")
    if isinstance(obj, DeviceFunction):
        lines = [f"{level} `{name}{_signature(obj.py_func)}` (device function)", ""]
        doc = doc or _markdown(inspect.getdoc(obj.py_func) or "")
    elif inspect.isclass(obj):
        init = obj.__init__ if "__init__" in vars(obj) else None
        signature = _signature(init).replace("(self, ", "(").replace("(self)", "()") if init else ""
        if hasattr(obj, "_fields"):  # a NamedTuple
            defaults = getattr(obj, "_field_defaults", {})
            signature = f"({', '.join(n + (f'={defaults[n]!r}' if n in defaults else '') for n in obj._fields)})"
        lines = [f"{level} class `{name}{signature}`", ""]
    else:
        lines = [f"{level} `{name}{_signature(obj)}`", ""]
    lines += [doc, ""] if doc else ["(no docstring)", ""]
    if inspect.isclass(obj) and _class_variables(obj):
        lines += ["Class variables: " + _class_variables(obj) + ".", ""]
    if inspect.isclass(obj):
        methods = [(n, getattr(m, "__func__", m)) for n, m in vars(obj).items()
                   if not n.startswith("_") and inspect.isfunction(getattr(m, "__func__", m))]
        for method_name, method in sorted(methods, key=lambda item: _line(item[1])):
            signature = _signature(method).replace("(self, ", "(").replace("(self)", "()")
            signature = signature.replace("(cls, ", "(").replace("(cls)", "()")
            method_doc = _markdown(inspect.getdoc(method) or "(no docstring)")
            lines += [f"- `{name}.{method_name}{signature}`: " + method_doc.replace("\n", "\n  "), ""]
    return lines


def modules() -> list[str]:
    """Every module of gpurl.kernels (none is left out by accident): :data:`ORDER` first."""
    import gpurl.kernels as package

    found = sorted(m.name for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_"))
    return [m for m in ORDER if m in found] + [m for m in found if m not in ORDER]


def render() -> str:
    import gpurl.kernels as package

    out = [HEADER, "## `gpurl.kernels`", "", _markdown(inspect.getdoc(package)), "",
           "Exported by the package: " + ", ".join(f"`{n}`" for n in sorted(package.__all__)) + ".", ""]
    for short in modules():
        module = importlib.import_module(f"gpurl.kernels.{short}")
        out += [f"## `gpurl.kernels.{short}`", "", _markdown(inspect.getdoc(module) or ""), ""]
        for name, obj in _members(module):
            out += _entry(name, obj)
    out += ["## Declaring an env (`gpurl.envs`)", ""]
    for short, names in ENV_MODULES.items():
        module = importlib.import_module(f"gpurl.envs.{short}")
        out += [f"### `gpurl.envs.{short}`", "", _markdown(inspect.getdoc(module) or ""), ""]
        out += _constants(module, names)
        for name, obj in _members(module):
            if name in names:
                out += _entry(name, obj, level="####")
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/kernels_api.md is out of date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = OUTPUT.read_text() if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT} is out of date: run python docs/gen_kernels_api.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
