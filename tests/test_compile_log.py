"""A first run says what it compiles (gpurl.kernels.compile_log): a kernel build announces itself before the
launch that compiles it and its time after, says when it came from the build cache instead, and says nothing
to nobody (no listener) or for a launch that compiles nothing."""
from __future__ import annotations

import re
import time

import numpy as np
import pytest

from gpurl.kernels import compile_log
from gpurl.kernels.program import EnvKernel, per_agent

pytestmark = pytest.mark.cpu


def _triple(e, i, x):
    x[e, i] = x[e, i] * np.float32(3)


def launch_and_listen(x) -> list[str]:
    lines = []
    kernel = EnvKernel("triple", [per_agent(_triple)], nargs=1)  # a new build each time: its own dispatcher
    with compile_log.listening(lines.append):
        kernel.launch("cpu", 2, 3, x)
        kernel.launch("cpu", 2, 3, x)  # the same argument types: nothing compiles, nothing is said
    return lines


def test_a_build_is_announced_compiled_then_loaded_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GPURL_CACHE_DIR", str(tmp_path))
    x = np.ones((2, 3), dtype=np.float32)
    first = launch_and_listen(x)
    assert first[0] == f"gpurl: building kernel triple for cpu (Numba; cached in {tmp_path}) ..."
    assert re.fullmatch(r"gpurl: kernel triple for cpu compiled in \d+\.\d s", first[1]) and len(first) == 2
    again = launch_and_listen(x)  # a new process would do the same: the build is on disk now
    assert re.fullmatch(r"gpurl: kernel triple for cpu loaded from the cache in \d+\.\d s", again[1]) and len(again) == 2
    np.testing.assert_array_equal(x, np.full((2, 3), 81, dtype=np.float32))  # four launches ran


def test_nothing_is_said_without_a_listener(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GPURL_CACHE_DIR", str(tmp_path))
    assert not compile_log.active()
    EnvKernel("triple", [per_agent(_triple)], nargs=1).launch("cpu", 2, 3, np.ones((2, 3), dtype=np.float32))
    assert capsys.readouterr() == ("", "")


def test_a_training_run_says_what_its_first_iteration_compiles(tmp_path, monkeypatch):
    """(The compiled backends' line names torch.compile and its cache: seen in a real run, too slow here.)"""
    from gpurl.train.run import train

    from tiny_runs import tiny_config

    lines, waits, real_waiting = [], [], compile_log.waiting
    monkeypatch.setattr(compile_log, "waiting", lambda what: waits.append(what) or real_waiting(what))
    train(tiny_config(tmp_path / "run", iters=2), say=lines.append)  # eager: no torch.compile to wait for here
    first = [line for line in lines if line.startswith("gpurl: iteration 1 is this process's first:")]
    assert first == ["gpurl: iteration 1 is this process's first: nothing to compile (eager backends)"], lines
    assert any(re.fullmatch(r"gpurl: first iteration done in \d+\.\d s, its compiles included \(not counted in "
                            r"the throughput\)", line) for line in lines), lines
    assert not any("iteration 2 is" in line for line in lines)
    # a line moves during the first iteration (and during each kernel build), not during later iterations
    assert [w for w in waits if not w.startswith("building kernel")] == ["running the first iteration, its compiles included"]
    assert not compile_log.active()  # the run stopped listening when it ended


def test_the_first_iteration_line_names_each_compile_and_its_cache(monkeypatch):
    from types import SimpleNamespace

    import torch

    from gpurl.train.run import first_iteration_work

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/x/inductor")

    def trainer(backends, device="cpu", graphed=False):
        return SimpleNamespace(algo=SimpleNamespace(backends=lambda: backends), device=torch.device(device),
                               graphed=graphed, graphed_iteration=False)

    assert first_iteration_work(trainer({"acting": "compiled", "learning": "compiled"})) == (
        "torch.compile of the acting and learning steps (cached in /x/inductor: a later run of this configuration "
        "loads them)")
    assert first_iteration_work(trainer({"acting": "triton", "learning": "compiled"}, "cuda", graphed=True)) == (
        "torch.compile of the learning steps (cached in /x/inductor: a later run of this configuration loads them); "
        "the Triton kernels (cached in Triton's cache); then the CUDA graph capture in the next iteration")


class FakeTerminal:
    """A stream that says it is a TTY and keeps what was written to it."""

    def __init__(self, tty: bool = True):
        self.tty, self.text = tty, ""

    def isatty(self) -> bool:
        return self.tty

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


def wait_until(condition, seconds: float = 10.0) -> None:
    """Sleep until ``condition()`` (the ticks come from a thread: a loaded machine delays them)."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.fixture
def fast_ticks(monkeypatch):
    monkeypatch.setattr(compile_log, "HEARTBEAT_SECONDS", 0.1)
    monkeypatch.setattr(compile_log, "REDRAW_SECONDS", 0.02)


def test_a_long_wait_says_still_waiting_every_heartbeat_and_stops_with_its_block(fast_ticks):
    lines = []
    with compile_log.listening(lines.append):
        start = time.monotonic()
        with compile_log.waiting("building kernel slow for cpu"):
            wait_until(lambda: len(lines) >= 3)
        during, seconds = list(lines), time.monotonic() - start
        time.sleep(0.25)  # the block has ended: nothing more ticks
    assert 3 <= len(during) <= seconds / 0.1 + 1, during  # one line a heartbeat, not one a redraw
    assert all(re.fullmatch(r"gpurl: \.\.\. still building kernel slow for cpu: \d+ s so far", line) for line in during)
    assert lines == during
    assert not compile_log._waits


def test_a_live_terminal_gets_one_status_line_redrawn_then_cleared(fast_ticks):
    lines, terminal = [], FakeTerminal()
    with compile_log.listening(lines.append, live=terminal):
        with compile_log.compiling("kernel slow for cpu"):
            wait_until(lambda: terminal.text.count("\r") >= 3)
    redraws = terminal.text.split("\r")[1:]
    assert len(redraws) >= 4 and redraws[-1] == "\033[K"  # the last write clears the line for what follows
    assert all(re.fullmatch(r"gpurl: \.\.\. still building kernel slow for cpu: \d+ s so far\033\[K", r)
               for r in redraws[:-1]), redraws
    # the plain lines are the announcement and the time, no heartbeats (the terminal shows the wait)
    assert lines[0] == "gpurl: building kernel slow for cpu ..." and len(lines) == 2, lines
    assert re.fullmatch(r"gpurl: kernel slow for cpu compiled in \d+\.\d s", lines[1])


def test_a_stream_that_is_no_terminal_gets_heartbeats_instead(fast_ticks):
    lines, log_file = [], FakeTerminal(tty=False)
    with compile_log.listening(lines.append, live=log_file):
        with compile_log.waiting("building kernel slow for cpu"):
            wait_until(lambda: len(lines) >= 1)
    assert log_file.text == "" and len(lines) >= 1


def test_only_the_innermost_wait_ticks(fast_ticks):
    lines = []
    with compile_log.listening(lines.append):
        with compile_log.waiting("running the first iteration"):
            with compile_log.waiting("building kernel inner for cpu"):
                wait_until(lambda: len(lines) >= 2)
            inner = list(lines)
            wait_until(lambda: len(lines) > len(inner))
    assert inner and all("inner" in line for line in inner), inner
    assert any("first iteration" in line for line in lines[len(inner):]), lines


def test_no_listener_no_thread(monkeypatch):
    import threading

    monkeypatch.setattr(threading.Thread, "start", lambda self: pytest.fail("a wait started a thread nobody hears"))
    with compile_log.waiting("building kernel quiet for cpu"):
        pass
