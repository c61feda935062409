"""docs/custom_env.md works verbatim: its python code blocks run, in order, in a fresh interpreter at the
repository root (as a reader pasting them into a session would), every block marked ``file=PATH`` is
a verbatim piece of PATH, in the file's order (so the tutorial and the example file cannot drift
apart), and every output the tutorial shows in a ```text output block is printed by the blocks before it.

The run compiles three CPU builds (the example, its float64 mistake and its two-group variant; the other
mistakes fail before compiling or run uncompiled), starts one simulator process, compiles PTX and trains
two tiny iterations: about a minute on 2 vCPUs.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu

REPO = Path(__file__).resolve().parent.parent
TUTORIAL = REPO / "docs" / "custom_env.md"
FENCE = re.compile(r"^```(?P<info>[^\n]*)\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)

# Runs the blocks one after another in one namespace (the interpreter's own, like a REPL), compiled
# with the tutorial's line numbers so a traceback points at docs/custom_env.md.
RUNNER = """
import json, sys
for line, source in json.load(sys.stdin):
    exec(compile("\\n" * line + source, "docs/custom_env.md", "exec"), globals())
"""


def python_blocks(text: str) -> list[tuple[int, str, str | None]]:
    """(first line of code, 0-based; code; file=PATH or None) of every ```python block."""
    blocks = []
    for m in FENCE.finditer(text):
        words = m.group("info").split()
        if not words or words[0] != "python":
            continue
        target = next((w.split("=", 1)[1] for w in words[1:] if w.startswith("file=")), None)
        blocks.append((text.count("\n", 0, m.start("body")), m.group("body"), target))
    return blocks


def test_tutorial_has_python_blocks_for_every_step():
    blocks = python_blocks(TUTORIAL.read_text())
    assert len(blocks) >= 15
    assert {target for _, _, target in blocks} == {None, "examples/custom_env.py", "examples/custom_env_reference.py"}


def test_file_blocks_are_verbatim_pieces_of_their_files_in_order():
    position: dict[str, int] = {}
    for line, body, target in python_blocks(TUTORIAL.read_text()):
        if target is None:
            continue
        source = (REPO / target).read_text()
        at = source.find(body, position.get(target, 0))
        assert at >= 0, (f"docs/custom_env.md line {line}: this block is not (any longer) a verbatim piece of "
                         f"{target} after the previous block; update the tutorial:\n{body}")
        position[target] = at + len(body)


def shown_outputs(text: str) -> list[tuple[int, str]]:
    """(first line, 0-based; body) of every ```text output block: what the tutorial says the blocks print."""
    return [(text.count("\n", 0, m.start("body")), m.group("body")) for m in FENCE.finditer(text)
            if m.group("info").split()[:2] == ["text", "output"]]


def test_tutorial_shows_the_output_of_every_documented_mistake():
    shown = "\n".join(body for _, body in shown_outputs(TUTORIAL.read_text()))
    for message in ("is a plain Python function", "computes in float64", "best is float64",
                    "it looks like a per_env phase", "is out of bounds", "overlap: agents 2..2 are in both"):
        assert message in shown, message


def test_tutorial_runs_verbatim_in_a_fresh_interpreter():
    text = TUTORIAL.read_text()
    blocks = [(line, body) for line, body, _ in python_blocks(text)]
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "TRITON_INTERPRET")}
    env.setdefault("OMP_NUM_THREADS", "1")
    done = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps(blocks), cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert "CPU build == reference; episodes ended:" in output
    # Each documented mistake raised the error the tutorial catches, with the message it shows (file names
    # and line numbers included: editing the tutorial above a mistake moves them, so update the block).
    printed = done.stdout.splitlines()
    for line, body in shown_outputs(text):
        missing = [shown for shown in body.splitlines() if shown not in printed]
        assert not missing, (f"docs/custom_env.md line {line}: the blocks no longer print these lines of the "
                             f"output shown there; update it:\n" + "\n".join(missing) + "\n--- printed:\n"
                             + done.stdout[-6000:])
    assert "CUDA build in the simulator == reference" in output
    assert "return per episode: random" in output
