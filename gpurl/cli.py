"""The ``gpurl`` console command: ``gpurl train [flags]``, ``gpurl eval RUN_DIR [flags]`` (``--help`` lists them)."""
from __future__ import annotations

import sys

COMMANDS = {"train": "train agent groups with a registered algorithm on a gpurl env (gpurl.train)",
            "eval": "evaluate a run's trained policies over new episodes, against random or another run's"}


def usage() -> str:
    lines = "\n".join(f"  {name:8s} {text}" for name, text in COMMANDS.items())
    return f"usage: gpurl COMMAND [flags]\n\ncommands:\n{lines}\n\n`gpurl COMMAND --help` lists a command's flags."


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    if argv[0] not in COMMANDS:
        print(f"gpurl: unknown command {argv[0]!r}\n{usage()}", file=sys.stderr)
        return 2
    if argv[0] == "eval":
        from .train.eval_cli import main as eval_main

        eval_main(argv[1:], prog="gpurl eval")
        return 0
    from .train.cli import main as train_main

    train_main(argv[1:], prog="gpurl train")
    return 0


if __name__ == "__main__":
    sys.exit(main())
