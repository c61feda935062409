"""What a run leaves behind: CSV and TensorBoard logs, a progress bar, the learning-curve PNG.

The CSV is rewritten atomically on every log (temp file + rename), so a crash never leaves a torn
row, and a resumed run keeps the rows up to its checkpoint. TensorBoard, tqdm and matplotlib are
optional imports (the ``train`` extra): without them the run still writes the CSV and plain progress.
"""
from __future__ import annotations

import csv
import io
import os
import sys
from pathlib import Path

from .checkpoint import atomic_write_bytes


def progress_wanted(flag: bool | None) -> bool:
    """The progress bar: on when asked; by default only on a TTY and outside CI."""
    if flag is not None:
        return flag
    return sys.stderr.isatty() and not os.environ.get("CI")


class RunLog:
    """Per-iteration scalars into ``log_dir/metrics.csv`` and TensorBoard; a progress bar or lines."""

    def __init__(self, log_dir: Path, total_iters: int, start_iter: int, progress: bool, tensorboard: bool = True):
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.csv_path = self.log_dir / "metrics.csv"
        self.rows = self._previous_rows(start_iter)
        self.total_iters = total_iters
        self._writer = self._tensorboard() if tensorboard else None
        self._bar = None
        self._line_every = max(1, total_iters // 20)
        if progress:
            try:
                from tqdm import tqdm

                self._bar = tqdm(total=total_iters, initial=start_iter, unit="it", dynamic_ncols=True)
            except ImportError:
                pass

    def _previous_rows(self, start_iter: int) -> list[dict]:
        """Rows of a run being resumed, up to its checkpoint (later ones will be redone)."""
        if start_iter == 0 or not self.csv_path.exists():
            return []
        with open(self.csv_path, newline="") as f:
            return [row for row in csv.DictReader(f) if int(row["iteration"]) <= start_iter]

    def _tensorboard(self):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            return None
        return SummaryWriter(str(self.log_dir))

    def log(self, iteration: int, env_steps: int, scalars: dict[str, float]) -> None:
        row = {"iteration": iteration, "env_steps": env_steps, **scalars}
        self.rows.append(row)
        self._write_csv()
        if self._writer is not None:
            for key, value in scalars.items():
                self._writer.add_scalar(key, value, env_steps)
        summary = self._summary(scalars)
        if self._bar is not None:
            self._bar.n = iteration
            self._bar.set_postfix_str(summary, refresh=False)
            self._bar.refresh()
        elif iteration % self._line_every == 0 or iteration == self.total_iters:
            print(f"iter {iteration}/{self.total_iters} steps {env_steps} {summary}", flush=True)

    @staticmethod
    def _summary(scalars: dict[str, float]) -> str:
        keys = [k for k in scalars if k.startswith("return/") or k.endswith("_per_episode")] + ["agent_steps_per_s"]
        return " ".join(f"{k.split('/')[-1] if k.startswith('return/') else k}={scalars[k]:.3g}"
                        for k in keys if k in scalars)

    def _write_csv(self) -> None:
        columns: list[str] = []
        for row in self.rows:
            columns += [k for k in row if k not in columns]
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=columns)
        writer.writeheader()
        writer.writerows(self.rows)
        atomic_write_bytes(self.csv_path, text.getvalue().encode())

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        if self._writer is not None:
            self._writer.close()


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
