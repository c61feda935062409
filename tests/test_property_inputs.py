"""Property-based inputs (Hypothesis): every drawn action tensor, out= buffer, reset mask, env parameter
and config value either runs or raises a gpurl error, in both validation modes; with validation on, a
raised error leaves the env's state bit-identical. The search runs in a child process
(tests/property_inputs.py, which says what it draws), so a case that crashes the process fails this
test instead of ending the test run.

CI draws a bounded number of cases with a fixed seed; ``pytest tests/test_property_inputs.py
--property-examples 500`` draws more (and ``-s`` prints the counts).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu

CHILD = Path(__file__).with_name("property_inputs.py")
CI_EXAMPLES = 25
SEED = 20261126


def test_every_drawn_input_runs_or_raises_a_gpurl_error(request):
    examples = request.config.getoption("--property-examples") or CI_EXAMPLES
    done = subprocess.run([sys.executable, str(CHILD), "--modes", "on,off", "--examples", str(examples),
                           "--seed", str(SEED)], capture_output=True, text=True, timeout=3600)
    tail = (done.stdout + done.stderr)[-6000:]
    assert done.returncode == 0, f"the search process ended with {done.returncode} (negative: killed by that signal):\n{tail}"
    summary = json.loads(done.stdout.strip().splitlines()[-1].removeprefix("SUMMARY "))
    print(f"\n{examples} action cases per env and validation mode:")
    for kind, tally in summary["cases"].items():
        print(f"  {kind}: {tally}")
        assert tally["drawn"] > 0
    actions = [t for kind, t in summary["cases"].items() if kind.endswith(" actions")]
    assert len(actions) >= 6, "every built-in env is searched in both modes"
    # The draws reach both outcomes: valid inputs run, broken ones raise.
    assert all(t.get("ran", 0) > 0 and t["drawn"] > t.get("ran", 0) for t in actions)
