"""The training command's entry points after the README's install: ``gpurl train``, ``python -m
gpurl.train`` and ``bench/tag_ppo.py`` (subprocesses, as a user runs them)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu

REPO = Path(__file__).resolve().parent.parent


def run(*cmd) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True, cwd=REPO, timeout=120)


@pytest.mark.parametrize("cmd", [
    ["gpurl", "train", "--help"],
    [sys.executable, "-m", "gpurl.train", "--help"],
    [sys.executable, "bench/tag_ppo.py", "--help"],
], ids=["console-script", "module", "main-job"])
def test_help_lists_every_config_field(cmd):
    if cmd[0] == "gpurl":
        script = shutil.which("gpurl") or str(Path(sys.executable).parent / "gpurl")
        if not Path(script).exists():
            pytest.fail("the gpurl console script is not installed (pip install -e . declares it)")
        cmd = [script, *cmd[1:]]
    done = run(*cmd)
    assert done.returncode == 0, done.stderr
    for flag in ("--algo", "--dist", "--policy-backend", "--learner-backend", "--preset", "--resume"):
        assert flag in done.stdout, flag


def test_the_gpurl_command_names_its_commands_and_refuses_others():
    from gpurl.cli import main

    assert main([]) == 0
    assert main(["bogus"]) == 2


@pytest.mark.parametrize("command", ["train", "eval"])
def test_help_says_each_default_once(command):
    """argparse's defaults formatter appended "(default: None)" to flags whose help already said their default
    in words, and "(default: True)" to switches; each flag's help now says its default at most once."""
    import argparse

    from gpurl.train.cli import build_parser as train_parser
    from gpurl.train.eval_cli import build_parser as eval_parser

    parser = train_parser() if command == "train" else eval_parser()
    formatter = parser._get_formatter()
    checked = 0
    for action in parser._actions:
        if action.help in (None, argparse.SUPPRESS):
            continue
        text = formatter._get_help_string(action)
        assert text.count("(default:") <= 1, f"{action.option_strings}: {text}"
        if command == "eval":  # (train's help writes each field's default itself, None included)
            assert "(default: None)" not in text, f"{action.option_strings}: {text}"
        checked += 1
    assert checked >= 10
    switches = [a for a in parser._actions if isinstance(a, (argparse._StoreTrueAction, argparse._StoreFalseAction))]
    assert all("(default:" not in formatter._get_help_string(a) for a in switches)
