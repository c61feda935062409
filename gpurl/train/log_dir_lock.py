"""One writer per log dir: a run holds an exclusive OS lock on its log dir for its whole life.

Two runs started at once into one ``--log-dir`` both found it empty, and both wrote: one's checkpoint, the
other's previous checkpoint, one's ``metrics.csv``, two TensorBoard files. Now the run's main rank takes
``flock`` on ``<log dir>/.gpurl.lock`` before it writes anything there and keeps it until its last write
(``result.json``); torchrun's other ranks write nothing and take none. The kernel drops the lock when the
process dies, SIGKILL included, so a dead run never leaves a stale lock behind; the file stays (a hidden,
empty-looking file: the holder's pid and command, for the message a second run prints).

A second run into a held dir is refused with :class:`LogDirLockedError` naming the holder's pid and command.
``flock`` is advisory and local to the kernel: a log dir on a network file system shared by two machines is
locked per machine only where the file system forwards ``flock`` (NFSv4 does).
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from .run_record import LogDirTakenError

try:
    import fcntl
except ImportError:  # Windows: no flock; runs there are not locked
    fcntl = None

LOCK_FILE = ".gpurl.lock"


class LogDirLockedError(LogDirTakenError):
    """Another live process holds the log dir's lock; the message names its pid and command."""


class LogDirLock:
    """The exclusive lock of one log dir, held from :meth:`acquire` to :meth:`release` (or the process's end)."""

    def __init__(self, log_dir: Path):
        self.path = Path(log_dir) / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock (creating the log dir if needed) and record this process in the lock file; raise
        :class:`LogDirLockedError` naming the holder when another process has it. Idempotent."""
        if self._fd is not None or fcntl is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise LogDirLockedError(
                f"log dir {self.path.parent} is in use by another run: {holder}. Nothing was written. Wait for "
                "it to end, or pick another --log-dir") from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "argv": sys.argv}).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Drop the lock (idempotent). The file stays: deleting it would let a third process lock a new file
        while a second still waits on the old one."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the descriptor releases its flock


def _read_holder(fd: int) -> str:
    """The holder's "pid N (command ...)" from the lock file (written just after it locked; a holder that has
    not written it yet reads as unknown)."""
    try:
        record = json.loads(os.pread(fd, 1 << 16, 0) or b"{}")
        return f"pid {record['pid']} ({' '.join(map(str, record['argv']))})"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not said which yet"


__all__ = ["LOCK_FILE", "LogDirLock", "LogDirLockedError"]
