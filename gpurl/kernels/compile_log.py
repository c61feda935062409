"""Say when a kernel build compiles and how long it took: a first run tells its user why it waits.

Quiet unless someone listens: ``with compile_log.listening(print): ...`` (the trainer's command line does).
A build announces itself before its first launch of new argument types compiles (or loads from gpurl's
build cache, :mod:`.build_cache`), and its time after::

    gpurl: building kernel simple_tag for cpu (Numba; cached in ~/.cache/gpurl/builds) ...
    gpurl: ... still building kernel simple_tag for cpu: 15 s so far
    gpurl: kernel simple_tag for cpu compiled in 41.3 s        (a later run: loaded from the cache in 0.1 s)

While a long wait runs (:func:`waiting`: a build, a training run's first iteration) something moves: a listener
with a live terminal (``listening(say, live=sys.stderr)``) sees one status line redrawn every second with the
seconds so far, the others get a "still ..." line every :data:`HEARTBEAT_SECONDS` (a log file or CI keeps a
few lines, not a redraw per second). Only the innermost wait ticks: a build inside a first iteration shows the
build.
"""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Callable, Iterator, TextIO

#: Seconds between the "still ..." lines of a listener without a live terminal.
HEARTBEAT_SECONDS = 15.0
#: Seconds between redraws of the status line on a live terminal.
REDRAW_SECONDS = 1.0

_listeners: list[tuple[Callable[[str], None], TextIO | None]] = []
_waits: list["_Wait"] = []  # the waits running now, innermost last


def active() -> bool:
    """Someone listens (checked before doing any work to announce a build)."""
    return bool(_listeners)


@contextlib.contextmanager
def listening(say: Callable[[str], None], live: TextIO | None = None) -> Iterator[None]:
    """``say(line)`` gets every compile announcement made inside the block; ``live``: a terminal stream on which
    a long wait redraws one status line (ignored unless it is a TTY)."""
    entry = (say, live if live is not None and live.isatty() else None)
    _listeners.append(entry)
    try:
        yield
    finally:
        _listeners.remove(entry)


def _say(line: str) -> None:
    for say, _ in list(_listeners):
        say(f"gpurl: {line}")


class _Wait:
    """A thread that ticks while one :func:`waiting` block runs (only while it is the innermost one)."""

    def __init__(self, what: str):
        self.what = what
        self.start = time.perf_counter()
        self.stopped = threading.Event()
        self.drawn = False  # a status line is on some live terminal
        self.thread = threading.Thread(target=self._run, name=f"gpurl wait: {what}", daemon=True)

    def _run(self) -> None:
        next_heartbeat = HEARTBEAT_SECONDS
        period = min(REDRAW_SECONDS, HEARTBEAT_SECONDS)
        while not self.stopped.wait(period):
            if not _waits or _waits[-1] is not self:
                continue
            seconds = time.perf_counter() - self.start
            line = f"gpurl: ... still {self.what}: {seconds:.0f} s so far"
            heartbeat = seconds >= next_heartbeat
            if heartbeat:
                next_heartbeat += HEARTBEAT_SECONDS
            for say, live in list(_listeners):
                if live is not None:
                    live.write(f"\r{line}\033[K")
                    live.flush()
                    self.drawn = True
                elif heartbeat:
                    say(line)

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join()
        if self.drawn:
            for _, live in list(_listeners):
                if live is not None:
                    live.write("\r\033[K")  # the line that follows replaces the status line
                    live.flush()


@contextlib.contextmanager
def waiting(what: str) -> Iterator[None]:
    """Keep something moving while the block runs (see the module's docstring); ``what`` reads after "still",
    e.g. ``"building kernel tag for cpu"``. Nothing runs without a listener."""
    if not _listeners:
        yield
        return
    wait = _Wait(what)
    _waits.append(wait)
    wait.thread.start()
    try:
        yield
    finally:
        _waits.remove(wait)
        wait.stop()


@contextlib.contextmanager
def compiling(what: str, note: str = "", loaded: Callable[[], bool] | None = None) -> Iterator[None]:
    """Announce ``what`` (with ``note``, e.g. where its cache lives) before the block and its time after;
    ``loaded()`` (asked after the block) says the build came from a cache rather than a compile."""
    if not _listeners:
        yield
        return
    _say(f"building {what}{f' ({note})' if note else ''} ...")
    start = time.perf_counter()
    with waiting(f"building {what}"):
        yield
    how = "loaded from the cache" if loaded is not None and loaded() else "compiled"
    _say(f"{what} {how} in {time.perf_counter() - start:.1f} s")


__all__ = ["HEARTBEAT_SECONDS", "REDRAW_SECONDS", "active", "compiling", "listening", "waiting"]
