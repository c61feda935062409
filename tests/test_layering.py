"""The package's layers (docs/design.md "Layout"), read from the source: no import cycle between gpurl's
components, no import of a higher layer from a lower one, nothing from bench/ or a peer's stack (JAX)
inside the installed package."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu

PACKAGE = Path(__file__).resolve().parent.parent / "gpurl"

#: component -> the components it may import (docs/design.md's table; a component may import itself).
ALLOWED = {
    "profiling": set(),
    "kernels": set(),
    "envs": {"kernels"},
    "fusion": {"kernels"},
    "multigpu": {"envs", "fusion", "profiling"},
    "storage": {"envs"},
    "algos": {"envs", "fusion", "multigpu", "profiling", "storage"},
    "render": {"envs"},
    "train": {"algos", "envs", "fusion", "kernels", "multigpu", "profiling", "render", "storage"},
    "cli": {"train"},
}
FOREIGN = ("bench", "jax", "jaxlib", "jaxmarl", "flax", "optax", "vmas")


def imports() -> dict[str, set[tuple[str, str]]]:
    """component -> {(module file, imported gpurl component or foreign top-level name)}."""
    found: dict[str, set[tuple[str, str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts[:-1]) if path.name == "__init__.py" else list(rel.parts)
        if len(parts) < 2:
            continue  # gpurl/__init__.py: the package's front door re-exports from its layers
        component = parts[1]
        package = parts if path.name == "__init__.py" else parts[:-1]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                names = [module] + ([f"{module}.{a.name}" for a in node.names] if not node.module else [])
            else:
                continue
            for name in names:
                top = name.split(".")
                if top[0] in FOREIGN:
                    found.setdefault(component, set()).add((str(rel), top[0]))
                elif top[0] == "gpurl" and len(top) > 1 and top[1] != component:
                    found.setdefault(component, set()).add((str(rel), top[1]))
    return found


def test_every_component_is_in_the_table():
    components = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
                  if (p.suffix == ".py" or p.is_dir()) and not p.name.startswith("__")}
    assert components - {"__version__"} == set(ALLOWED), "add new components to ALLOWED and docs/design.md"


def test_lower_layers_never_import_higher_ones_nor_bench_nor_jax():
    bad = [f"{file} imports {target}" for component, edges in imports().items() for file, target in edges
           if target in FOREIGN or target not in ALLOWED.get(component, set())]
    assert not bad, "\n".join(sorted(bad))


def test_the_allowed_graph_has_no_cycle():
    seen, stack = set(), set()

    def visit(node):
        assert node not in stack, f"cycle through {node}"
        if node in seen:
            return
        stack.add(node)
        for nxt in ALLOWED[node]:
            visit(nxt)
        stack.discard(node)
        seen.add(node)

    for node in ALLOWED:
        visit(node)
