"""A run's record in its log dir: its id, ``run.json`` written at start, and whose files a log dir holds.

Every run has an id (:func:`new_run_id`), kept across resumes: it is saved in every checkpoint, in
``run.json`` and in every row of ``metrics.csv``. A run writes only into a log dir that is empty or
holds its own files (:func:`claim_log_dir`), so one run never overwrites or mixes with another's
output. ``run.json`` is written before the first slow step (the random baseline), so a run that dies
early still leaves its id, log dir, resolved config and machine behind.
"""
from __future__ import annotations

import csv
import json
import secrets
import sys
import time
from pathlib import Path

from .checkpoint import atomic_write_bytes

RUN_FILE = "run.json"
#: The files a run writes into its log dir (TensorBoard's event files besides): finding any of them
#: means the dir belongs to a run.
RUN_OUTPUTS = (RUN_FILE, "metrics.csv", "checkpoint.pt", "checkpoint.prev.pt", "result.json", "learning_curve.png",
               "final_episode.gif")


class LogDirTakenError(ValueError):
    """The log dir holds files of another run; the message names it, its files and the ways out."""


def new_run_id() -> str:
    """Start time (readable, sortable) plus 24 random bits, so two runs started in the same second differ."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def run_files(log_dir: Path) -> list[str]:
    """Names of the run outputs present in ``log_dir`` (sorted)."""
    if not log_dir.is_dir():
        return []
    names = [name for name in RUN_OUTPUTS if (log_dir / name).exists()]
    return sorted(names + [p.name for p in log_dir.glob("events.out.tfevents*")])


def log_dir_owner(log_dir: Path) -> str | None:
    """The id of the run whose files ``log_dir`` holds, from run.json or else metrics.csv; None when
    neither names one (no run files, or files written before gpurl had run ids)."""
    try:
        record = json.loads((log_dir / RUN_FILE).read_text())
        if isinstance(record, dict) and record.get("run_id"):
            return str(record["run_id"])
    except (OSError, ValueError):
        pass
    try:
        with open(log_dir / "metrics.csv", newline="") as f:
            first = next(csv.DictReader(f), None)
        if first and first.get("run_id"):
            return first["run_id"]
    except OSError:
        pass
    return None


def claim_log_dir(log_dir: Path, run_id: str, fresh: bool, say=print) -> Path:
    """The dir run ``run_id`` writes into: ``log_dir`` when it is absent, empty of run files or holds this
    run's own; with ``fresh`` and another run's files there, ``<log_dir>-<run_id>`` (nothing is deleted).

    Raises LogDirTakenError, before anything is written, when ``log_dir`` holds another run's files and
    ``fresh`` is off.
    """
    log_dir = Path(log_dir)
    files = run_files(log_dir)
    owner = log_dir_owner(log_dir) if files else None
    if not files or owner == run_id:
        return log_dir
    who = f"run {owner}" if owner else "a run without a run id"
    alternative = Path(f"{log_dir}-{run_id}")
    if not fresh:
        raise LogDirTakenError(
            f"log dir {log_dir} holds files of {who} ({', '.join(files)}); this run is {run_id}. Nothing was "
            f"written. Pick another --log-dir, or pass --fresh-log-dir to write this run into {alternative}")
    if run_files(alternative) and log_dir_owner(alternative) != run_id:
        raise LogDirTakenError(f"--fresh-log-dir: {alternative} holds files of another run too; pick another --log-dir")
    say(f"log dir {log_dir} holds files of {who}; this run ({run_id}) writes into {alternative} (--fresh-log-dir)")
    return alternative


def remove_stale_temp_files(log_dir: Path, say=print) -> list[Path]:
    """Delete the temp files of atomic writes (``.<name>.<random>.tmp``) that a killed process left in
    ``log_dir``; say which. Only a run that owns the dir calls this, so no live writer is affected."""
    stale = sorted(p for name in RUN_OUTPUTS for p in log_dir.glob(f".{name}.*.tmp")) if log_dir.is_dir() else []
    for path in stale:
        path.unlink(missing_ok=True)
        say(f"removed {path}: a temporary file left by a write that was interrupted (the process was killed)")
    return stale


def write_run_record(log_dir: Path, run_id: str, config: dict, machine: dict, iteration: int) -> Path:
    """Write ``log_dir/run.json`` atomically: run id, log dir, resolved config, machine, and one entry per
    start of the run (fresh or resumed: time, iteration, command line), earlier starts kept."""
    path = Path(log_dir) / RUN_FILE
    starts = []
    try:
        previous = json.loads(path.read_text())
        if isinstance(previous, dict) and previous.get("run_id") == run_id:
            starts = list(previous.get("starts", []))
    except (OSError, ValueError):
        pass
    starts.append({"at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "from_iteration": iteration, "argv": sys.argv})
    record = {"run_id": run_id, "log_dir": str(log_dir), "config": config, "machine": machine, "starts": starts}
    atomic_write_bytes(path, json.dumps(record, indent=1, default=str).encode())
    return path


__all__ = ["LogDirTakenError", "RUN_FILE", "RUN_OUTPUTS", "claim_log_dir", "log_dir_owner", "new_run_id",
           "remove_stale_temp_files", "run_files", "write_run_record"]
