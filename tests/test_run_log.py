"""The run log (gpurl/train/outputs.py RunLog): metrics.csv appended and flushed per log line, not rewritten
whole; after a resume, metrics.csv and TensorBoard both keep exactly the rows up to the checkpoint."""
from __future__ import annotations

import csv
import os
import time

import pytest

from gpurl.train import outputs as outputs_module
from gpurl.train.outputs import RunLog

pytestmark = pytest.mark.cpu


def csv_rows(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_metrics_csv_is_appended_and_flushed_per_line_not_rewritten(tmp_path, monkeypatch):
    rewrites = []
    real_write = outputs_module.atomic_write_bytes
    monkeypatch.setattr(outputs_module, "atomic_write_bytes", lambda path, data: (rewrites.append(path),
                                                                                   real_write(path, data)))
    log = RunLog(tmp_path, total_iters=50, start_iter=0, progress=False, tensorboard=False, run_id="r")
    log.log(1, 16, {"loss": 1.0})
    inode = os.stat(tmp_path / "metrics.csv").st_ino
    for it in range(2, 41):
        log.log(it, 16 * it, {"loss": float(it)})
        rows = csv_rows(tmp_path / "metrics.csv")  # read by another handle, the log still open
        assert len(rows) == it and rows[-1]["loss"] == str(float(it))
    assert os.stat(tmp_path / "metrics.csv").st_ino == inode and len(rewrites) == 1
    log.log(41, 656, {"loss": 41.0, "return/tagger": 2.5})  # a new column: the one kind of rewrite
    log.log(42, 672, {"loss": 42.0})
    log.close()
    assert len(rewrites) == 2
    rows = csv_rows(tmp_path / "metrics.csv")
    assert [r["iteration"] for r in rows] == [str(i) for i in range(1, 43)]
    assert rows[0]["return/tagger"] == "" and rows[40]["return/tagger"] == "2.5" and rows[41]["run_id"] == "r"


def test_tensorboard_and_csv_stay_in_step_after_a_resume(tmp_path):
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    first = RunLog(tmp_path, total_iters=4, start_iter=0, progress=False, run_id="r")
    for it in (1, 2, 3, 4):  # the checkpoint is at 2; iterations 3 and 4 are lost in a crash
        first.log(it, 16 * it, {"loss": float(it)})
    first.close()
    with open(tmp_path / "metrics.csv", "a") as f:
        f.write("5,80,r,5.")  # a line torn by a kill mid-append
    # TensorBoard reads event files in name order; a name starts with its creation second, then a
    # process-wide writer count that sorts "10" before "9". A resume comes in a later second (a new
    # process): so here too, or the resumed file may be read first.
    first_second = int(time.time())
    while int(time.time()) == first_second:
        time.sleep(0.05)
    resumed = RunLog(tmp_path, total_iters=4, start_iter=2, progress=False, run_id="r", start_env_steps=32)
    for it in (3, 4):
        resumed.log(it, 16 * it, {"loss": 10.0 * it})
    resumed.close()
    expected = [(16, 1.0), (32, 2.0), (48, 30.0), (64, 40.0)]
    assert [(int(r["env_steps"]), float(r["loss"])) for r in csv_rows(tmp_path / "metrics.csv")] == expected
    events = event_accumulator.EventAccumulator(str(tmp_path))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("loss")] == expected


@pytest.mark.parametrize("log_every, iters, printed", [
    (10, 60, [10, 20, 30, 40, 50, 60]),  # rows sparser than 1/20 of the run: every row (was 30 and 60 only)
    (1, 100, list(range(5, 101, 5))),    # a row per iteration: every fifth, about 20 lines
    (3, 10, [3, 6, 9, 10]),              # the last iteration always
])
def test_plain_progress_lines_follow_the_documented_rule(tmp_path, log_every, iters, printed):
    lines = []
    log = RunLog(tmp_path, total_iters=iters, start_iter=0, progress=False, tensorboard=False,
                 lines=lambda text, flush: lines.append(text))
    for it in range(1, iters + 1):
        if it % log_every == 0 or it == iters:
            log.log(it, 16 * it, {"return/tagger": 1.0, "agent_steps_per_s": 100.0})
    log.close()
    assert [int(line.split()[1].split("/")[0]) for line in lines] == printed


def test_a_progress_line_without_returns_says_why(tmp_path):
    lines = []
    log = RunLog(tmp_path, total_iters=1, start_iter=0, progress=False, tensorboard=False,
                 lines=lambda text, flush: lines.append(text))
    log.log(1, 16, {"loss": 1.0, "agent_steps_per_s": 100.0})
    log.close()
    assert lines == ["iter 1/1 steps 16 (no episode ended since the last row) agent_steps_per_s=100"]
