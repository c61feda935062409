"""What a run leaves behind: CSV and TensorBoard logs (and the other loggers of :mod:`gpurl.train.loggers`),
a progress bar, the learning-curve PNG.

Each log line is appended to the CSV and flushed, so the cost of a log stays constant over a long run;
the file is rewritten whole (atomically: temp file + rename) only when a row brings a new column (a
group's return appears once episodes end: a few times per run) and once when a run resumes, to keep
the rows up to its checkpoint (later ones are redone; a torn last line left by a kill is dropped).
TensorBoard purges its events after the checkpoint the same way, so both logs stay in step. Every row
carries the run's id. TensorBoard, tqdm and matplotlib are optional imports (the ``train`` extra):
without them the run still writes the CSV and plain progress.
"""
from __future__ import annotations

import csv
import io
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .checkpoint import atomic_write_bytes
from .loggers import Logger, TensorBoardLog, tensorboard_available


def progress_wanted(flag: bool | None) -> bool:
    """The progress bar: on when asked; by default only on a TTY and outside CI."""
    if flag is not None:
        return flag
    return sys.stderr.isatty() and not os.environ.get("CI")


class CsvLog:
    """The scalars as rows of ``log_dir/metrics.csv``, each carrying the run id (the :class:`Logger` every
    run has). A resumed run (``start_iter`` > 0) keeps the rows up to its checkpoint."""

    name = "csv"

    def __init__(self, log_dir: Path, run_id: str | None, start_iter: int):
        self.path = Path(log_dir) / "metrics.csv"
        self.run_id = run_id
        self._columns: list[str] = []
        self._file = None
        self._csv = None
        self.rows = self._previous_rows(start_iter)
        if self.rows:
            self._rewrite()

    def _previous_rows(self, start_iter: int) -> list[dict]:
        """Rows of a run being resumed, up to its checkpoint (later ones will be redone)."""
        if start_iter == 0 or not self.path.exists():
            return []
        text = self.path.read_text()
        if not text.endswith("\n"):  # a line torn by a kill mid-append
            text = text[:text.rfind("\n") + 1]
        reader = csv.DictReader(io.StringIO(text, newline=""))
        rows = [row for row in reader if int(row["iteration"]) <= start_iter]
        self._columns = list(reader.fieldnames or [])
        return rows

    def log(self, iteration: int, env_steps: int, scalars: dict[str, float]) -> None:
        ids = {"run_id": self.run_id} if self.run_id is not None else {}
        row = {"iteration": iteration, "env_steps": env_steps, **ids, **scalars}
        self.rows.append(row)
        new_columns = [k for k in row if k not in self._columns]
        if new_columns or self._csv is None:
            self._columns += new_columns
            self._rewrite()
        else:
            self._csv.writerow(row)
            self._file.flush()

    def _rewrite(self) -> None:
        """All rows under the current header, atomically; then reopen the file for appending."""
        if self._file is not None:
            self._file.close()
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=self._columns, restval="")
        writer.writeheader()
        writer.writerows(self.rows)
        atomic_write_bytes(self.path, text.getvalue().encode())
        self._file = open(self.path, "a", newline="")
        self._csv = csv.DictWriter(self._file, fieldnames=self._columns, restval="")

    def close(self, failed: bool = False) -> None:
        if self._file is not None:
            self._file.close()
            self._file, self._csv = None, None


class RunLog:
    """Per-iteration scalars into every logger of the run (``metrics.csv``, TensorBoard when installed, and
    the ``loggers`` given, such as W&B); a progress bar or plain lines."""

    def __init__(self, log_dir: Path, total_iters: int, start_iter: int, progress: bool, tensorboard: bool = True,
                 run_id: str | None = None, start_env_steps: int = 0, restarted: bool = False,
                 loggers: Sequence[Logger] = (), lines=print):
        """``start_iter`` / ``start_env_steps``: where a resumed run continues (0 for a fresh one).
        ``restarted``: a run starting again from iteration 0 in its own log dir (it died before its first
        checkpoint): its earlier TensorBoard events are hidden too (metrics.csv is rewritten anyway).
        ``loggers``: further loggers, already started; the run log closes them. ``lines``: where the plain
        progress lines go (print-like: it gets ``flush=True``)."""
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.csv = CsvLog(self.log_dir, run_id, start_iter)
        self.loggers: list[Logger] = [self.csv]
        self.total_iters = total_iters
        if tensorboard and tensorboard_available():
            # purge_step hides the events a previous process of this run logged after the checkpoint
            purge = start_env_steps + 1 if start_iter or restarted else None
            self.loggers.append(TensorBoardLog(self.log_dir, purge, run_id, start_env_steps))
        self.loggers += list(loggers)
        self._lines = lines
        self._bar = None
        # Without a bar, stdout gets about 20 lines over the run: a row at least _line_every iterations after
        # the last line printed (every row, when --log-every spaces them wider).
        self._line_every = max(1, total_iters // 20)
        self._next_line = start_iter + self._line_every
        if progress:
            try:
                from tqdm import tqdm

                self._bar = tqdm(total=total_iters, initial=start_iter, unit="it", dynamic_ncols=True)
            except ImportError:
                pass

    @property
    def rows(self) -> list[dict]:
        """Every row of metrics.csv (this run's, from iteration 1), as logged."""
        return self.csv.rows

    @property
    def csv_path(self) -> Path:
        return self.csv.path

    def log(self, iteration: int, env_steps: int, scalars: dict[str, float]) -> None:
        for logger in self.loggers:
            logger.log(iteration, env_steps, scalars)
        summary = self._summary(scalars)
        if self._bar is not None:
            self._bar.n = iteration
            self._bar.set_postfix_str(summary, refresh=False)
            self._bar.refresh()
        elif iteration >= self._next_line or iteration == self.total_iters:
            self._next_line = iteration + self._line_every
            self._lines(f"iter {iteration}/{self.total_iters} steps {env_steps} {summary}", flush=True)

    @staticmethod
    def _summary(scalars: dict[str, float]) -> str:
        keys = [k for k in scalars if k.startswith("return/") or k.endswith("_per_episode")]
        shown = " ".join(f"{k.split('/')[-1] if k.startswith('return/') else k}={scalars[k]:.3g}"
                         for k in [*keys, "agent_steps_per_s"] if k in scalars)
        # Returns are means over the episodes that ended since the last row: there may be none yet.
        return shown if keys else f"(no episode ended since the last row) {shown}".rstrip()

    def close(self, failed: bool = False) -> None:
        """Close every logger (idempotent); ``failed``: the run stops on an error (W&B marks it so)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        errors = []
        for logger in self.loggers:
            try:
                logger.close(failed=failed)
            except Exception as err:  # one logger failing to close must not keep the others open
                errors.append(err)
        if errors:
            raise errors[0]


def plot_curve(rows: list[dict], path: Path, baselines: dict[str, float], title: str) -> Path | None:
    """Returns per group and per-episode metrics over env steps, with the random baselines dashed.

    Returns the PNG's path, or None without matplotlib.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    keys = sorted({k for row in rows for k in row if k.startswith("return/") or k.endswith("_per_episode")})
    fig, axes = plt.subplots(1, max(1, len(keys)), figsize=(4.5 * max(1, len(keys)), 3.4), squeeze=False)
    for ax, key in zip(axes[0], keys):
        points = [(float(r["env_steps"]), float(r[key])) for r in rows if r.get(key) not in (None, "")]
        if points:
            ax.plot(*zip(*points), label="trained")
        if key in baselines:
            ax.axhline(baselines[key], color="gray", linestyle="--", label="random policy")
        ax.set_title(key)
        ax.set_xlabel("env steps")
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    atomic_write_bytes(path, buffer.getvalue())
    return path
