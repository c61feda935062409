"""Say when a kernel build compiles and how long it took: a first run tells its user why it waits.

Quiet unless someone listens: ``with compile_log.listening(print): ...`` (the trainer's command line does).
A build announces itself before its first launch of new argument types compiles (or loads from gpurl's
build cache, :mod:`.build_cache`), and its time after::

    gpurl: building kernel simple_tag for cpu (Numba; cached in ~/.cache/gpurl/builds) ...
    gpurl: kernel simple_tag for cpu compiled in 41.3 s        (a later run: loaded from the cache in 0.1 s)
"""
from __future__ import annotations

import contextlib
import time
from typing import Callable, Iterator

_listeners: list[Callable[[str], None]] = []


def active() -> bool:
    """Someone listens (checked before doing any work to announce a build)."""
    return bool(_listeners)


@contextlib.contextmanager
def listening(say: Callable[[str], None]) -> Iterator[None]:
    """``say(line)`` gets every compile announcement made inside the block."""
    _listeners.append(say)
    try:
        yield
    finally:
        _listeners.remove(say)


def _say(line: str) -> None:
    for say in list(_listeners):
        say(f"gpurl: {line}")


@contextlib.contextmanager
def compiling(what: str, note: str = "", loaded: Callable[[], bool] | None = None) -> Iterator[None]:
    """Announce ``what`` (with ``note``, e.g. where its cache lives) before the block and its time after;
    ``loaded()`` (asked after the block) says the build came from a cache rather than a compile."""
    if not _listeners:
        yield
        return
    _say(f"building {what}{f' ({note})' if note else ''} ...")
    start = time.perf_counter()
    yield
    how = "loaded from the cache" if loaded is not None and loaded() else "compiled"
    _say(f"{what} {how} in {time.perf_counter() - start:.1f} s")


__all__ = ["active", "compiling", "listening"]
