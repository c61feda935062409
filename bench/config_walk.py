"""A walk of the trainer's config from the CLI entry point: which rooms (gpurl's modules) a reader follows,
traced as Python runs it.

    python bench/config_walk.py                      # gpurl train --preset simple-tag --epochs 2 ...
    python bench/config_walk.py --argv "--algo iql --q-batch 64 --iters 1"

It traces ``gpurl.train.cli.config_from_args(argv)`` (imports done first, so only the config's own code is
walked) and reports, over the calls from one gpurl module into another:
- rooms entered: the distinct modules whose code ran;
- climbs: calls from a lower layer into a higher one (docs/design.md's layers: kernels < envs < fusion <
  multigpu < storage < algos < train), the trail a reader must follow back up;
- returns to a room already left: calls into a module the walk had left by an earlier call.
Beside the walk, what a reader of ``gpurl/train/config.py`` must open: the gpurl modules it imports, and how
many fields of its ``TrainConfig`` only some algorithms read. It ends with one ``RESULT {json}`` line.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

#: Layer order, lowest first (docs/design.md "Layout"); a component missing here counts as the top.
LAYERS = ("profiling", "kernels", "envs", "fusion", "multigpu", "storage", "algos", "render", "train", "cli")
DEFAULT_ARGV = "--preset simple-tag --epochs 2 --iters 1 --device cpu"


def room(filename: str) -> str | None:
    """``gpurl/train/config.py`` -> ``train/config``; None outside the package."""
    parts = Path(filename).parts
    if "gpurl" not in parts:
        return None
    inner = parts[len(parts) - 1 - parts[::-1].index("gpurl") + 1:]
    return "/".join(inner).removesuffix(".py") if inner else None


def layer(name: str) -> int:
    top = name.split("/")[0]
    return LAYERS.index(top) if top in LAYERS else len(LAYERS)


def config_imports() -> list[str]:
    """The gpurl modules ``gpurl/train/config.py`` imports (its rooms next door)."""
    import ast

    import gpurl.train.config as config

    tree = ast.parse(Path(config.__file__).read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = ["train"][: max(0, 2 - node.level)]
            found.add("/".join(base + (node.module or "").split(".")))
    return sorted(found)


def algorithm_fields_in_run_config() -> int:
    """Fields of the run's TrainConfig that only some algorithms read (the flat config of before the algorithms
    declared their parameters named them in ``ALGORITHM_SPECIFIC_FIELDS``; none since)."""
    import dataclasses

    import gpurl.algos as algos
    from gpurl.train.config import TrainConfig

    specific = getattr(algos, "ALGORITHM_SPECIFIC_FIELDS", frozenset())
    return sum(1 for f in dataclasses.fields(TrainConfig) if f.name in specific)


def walk(argv: list[str]) -> dict:
    from gpurl.train import cli

    calls: list[tuple[str, str]] = []

    def tracer(frame, event, arg):
        if event == "call":
            here = room(frame.f_code.co_filename)
            caller = frame.f_back and room(frame.f_back.f_code.co_filename)
            if here and caller and here != caller:
                calls.append((caller, here))
        return None

    sys.setprofile(None)
    sys.settrace(tracer)
    try:
        cli.config_from_args(argv)
    finally:
        sys.settrace(None)
    rooms = sorted({r for pair in calls for r in pair})
    climbs = sorted({(a, b) for a, b in calls if layer(b) > layer(a)})
    left, returns = set(), []
    for caller, callee in calls:
        if callee in left and (caller, callee) not in returns:
            returns.append((caller, callee))
        left.add(caller)
    return {"argv": argv, "config_imports": config_imports(),
            "algorithm_fields_in_run_config": algorithm_fields_in_run_config(), "rooms": rooms,
            "rooms_entered": len(rooms), "climbs": [f"{a} -> {b}" for a, b in climbs],
            "climb_count": len(climbs), "returns": [f"{a} -> {b}" for a, b in returns], "return_count": len(returns)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--argv", default=DEFAULT_ARGV, help="the gpurl train command line to walk")
    args = parser.parse_args()
    import gpurl  # noqa: F401  (imports first: the walk is of the config's code, not of module loading)
    from gpurl import __version__

    out = walk(shlex.split(args.argv))
    print(f"config walk of `gpurl train {args.argv}` (gpurl {__version__}, python {sys.version.split()[0]})")
    print(f"rooms entered ({out['rooms_entered']}): {', '.join(out['rooms'])}")
    print(f"climbs back up the layers ({out['climb_count']}): {'; '.join(out['climbs']) or 'none'}")
    print(f"returns to a room already left ({out['return_count']}): {'; '.join(out['returns']) or 'none'}")
    print(f"train/config.py imports ({len(out['config_imports'])}): {', '.join(out['config_imports'])}")
    print(f"TrainConfig fields only some algorithms read: {out['algorithm_fields_in_run_config']}")
    print("RESULT " + json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
