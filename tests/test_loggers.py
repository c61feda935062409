"""The run's loggers (gpurl/train/loggers.py, driven by RunLog in gpurl/train/outputs.py): one interface for
CSV, TensorBoard and Weights & Biases; W&B offline in a real training run holds exactly metrics.csv's rows
and a resume continues the same W&B run; a missing extra is refused before anything is written."""
from __future__ import annotations

import csv
import json
import struct
import sys
from pathlib import Path

import pytest

from gpurl.train.checkpoint import load_checkpoint
from gpurl.train.cli import build_parser, config_from_args
from gpurl.train.cli import main as cli_main
from gpurl.train.loggers import WANDB_INSTALL, Logger, LoggerUnavailable, wandb_mode
from gpurl.train.outputs import RunLog
from gpurl.train.resume import RESUME_OVERRIDABLE, resume_config
from gpurl.train.run import train

from tiny_runs import TINY, tiny_config

pytestmark = pytest.mark.cpu

WANDB_FIELDS = ("wandb", "wandb_mode", "wandb_project", "wandb_entity", "wandb_group")


def csv_rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def wandb_offline(tmp_path, monkeypatch):
    """W&B offline, quiet, and every directory it might write to inside tmp_path: no network, no home dir."""
    import wandb  # noqa: F401  (the dev extra brings it: a missing one fails here, not skips)

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    for name in ("WANDB_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        path = tmp_path / "wandb-home" / name.lower()
        path.mkdir(parents=True)
        monkeypatch.setenv(name, str(path))


# ---- reading an offline W&B run back ---------------------------------------------------------------

#: A .wandb file is a LevelDB-style log: a 7-byte header (":W&B", magic, version), then 32 KiB blocks of
#: records (crc32, length, type; FULL=1, FIRST=2, MIDDLE=3, LAST=4), each record one protobuf Record.
BLOCK, HEADER = 32768, 7


def wandb_records(path: Path) -> list:
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    records, pos, pieces = [], HEADER, b""
    while pos + 7 <= len(data):
        if BLOCK - pos % BLOCK < 7:  # a block's tail too short for a record header is padding
            pos += BLOCK - pos % BLOCK
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        pieces += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pieces)
            records.append(record)
            pieces = b""
        elif kind == 0 and length == 0:
            break  # zero padding at the end
    return records


def offline_runs(log_dir: Path, run_id: str) -> list[Path]:
    """The offline W&B run dirs of ``run_id`` in ``log_dir/wandb``, oldest first (one per start)."""
    return sorted((log_dir / "wandb").glob(f"offline-run-*-{run_id}"))


def history(run_dir: Path) -> list[dict]:
    rows = []
    for record in wandb_records(next(run_dir.glob("run-*.wandb"))):
        if record.WhichOneof("record_type") == "history":
            rows.append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                         for item in record.history.item})
    return rows


def run_record(run_dir: Path):
    return next(r.run for r in wandb_records(next(run_dir.glob("run-*.wandb"))) if r.WhichOneof("record_type") == "run")


def same_rows(wandb_rows: list[dict], rows: list[dict]) -> None:
    """Every metrics.csv row (its numbers; the run id is W&B's run id) is a W&B history row, in order."""
    assert len(wandb_rows) == len(rows)
    for logged, row in zip(wandb_rows, rows):
        numbers = {k: float(v) for k, v in row.items() if k != "run_id" and v != ""}
        assert {k: float(logged[k]) for k in numbers} == numbers
        assert logged["_step"] == int(row["iteration"])


# ---- tests ---------------------------------------------------------------------------------------------


def test_wandb_offline_run_holds_the_metrics_and_a_resume_continues_it(tmp_path, wandb_offline):
    log_dir = tmp_path / "run"
    said = []
    result = train(tiny_config(log_dir, wandb=True), say=said.append)
    run_id = result["run_id"]
    [line] = [line for line in said if line.startswith("loggers: ")]
    assert line == (f"loggers: csv, tensorboard, wandb (offline, project gpurl, id {run_id}, dir {log_dir / 'wandb'}; "
                    f"upload later: wandb sync {log_dir / 'wandb'}/offline-run-*)")
    rows = csv_rows(log_dir / "metrics.csv")
    [first] = offline_runs(log_dir, run_id)
    same_rows(history(first), rows)
    assert history(first)[-1]["return/tagger"] == float(rows[-1]["return/tagger"])  # the last row, exactly
    run = run_record(first)
    config = {item.key: json.loads(item.value_json) for item in run.config.update}
    assert (run.run_id, run.project, config["seed"], config["iters"], config["log_dir"]) == (
        run_id, "gpurl", 5, 2, str(log_dir))

    path = log_dir / "checkpoint.pt"
    checkpoint = load_checkpoint(path)
    train(resume_config(checkpoint, {"iters": 3, "resume": str(path)}), checkpoint, say=said.append)
    rows = csv_rows(log_dir / "metrics.csv")
    assert [r["iteration"] for r in rows] == ["1", "2", "3"]
    first_again, second = offline_runs(log_dir, run_id)  # the same W&B run id, one offline dir per start
    assert first_again == first and run_record(second).run_id == run_id
    same_rows(history(second), rows[2:])


def test_a_sweep_puts_every_seeds_wandb_run_in_one_group(tmp_path, wandb_offline, capsys):
    log_dir = tmp_path / "sweep"
    cli_main(["--env", "tag_continuous", *[f"--env-param={k}={v}" for k, v in TINY.items()], "--num-envs", "4",
              "--rollout-len", "8", "--iters", "1", "--epochs", "1", "--minibatches", "1", "--eval-episodes", "0",
              "--device", "cpu", "--policy-backend", "eager", "--learner-backend", "eager", "--torch-threads", "1",
              "--log-dir", str(log_dir), "--seeds", "1,2", "--wandb"])
    payload = json.loads(capsys.readouterr().out.split("RESULT ", 1)[1])
    for seed, result in zip((1, 2), payload["runs"]):
        [run_dir] = offline_runs(log_dir / f"seed{seed}", result["run_id"])
        run = run_record(run_dir)
        assert (run.run_group, run.run_id) == ("sweep", result["run_id"])
        same_rows(history(run_dir), csv_rows(log_dir / f"seed{seed}" / "metrics.csv"))


def test_wandb_without_its_extra_is_refused_before_anything_is_written(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb raises ImportError
    log_dir = tmp_path / "run"
    with pytest.raises(LoggerUnavailable, match=WANDB_INSTALL.replace("[", r"\[").replace("]", r"\]")):
        train(tiny_config(log_dir, wandb=True))
    assert not log_dir.exists()
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["--env", "simple_spread", "--iters", "1", "--device", "cpu", "--log-dir", str(log_dir), "--wandb"])
    assert exit_info.value.code == 2
    assert f"wandb is not installed" in capsys.readouterr().err and not log_dir.exists()


def test_run_log_drives_every_logger_through_one_interface(tmp_path):
    class Collect:
        name = "collect"

        def __init__(self):
            self.lines, self.closed = [], None

        def log(self, iteration, env_steps, scalars):
            self.lines.append((iteration, env_steps, dict(scalars)))

        def close(self, failed=False):
            self.closed = failed

    collect = Collect()
    assert isinstance(collect, Logger)
    log = RunLog(tmp_path, total_iters=2, start_iter=0, progress=False, tensorboard=False, run_id="r",
                 loggers=[collect], lines=lambda *a, **k: None)
    log.log(1, 16, {"loss": 1.0})
    log.log(2, 32, {"loss": 0.5, "return/tagger": 2.0})
    log.close(failed=True)
    assert collect.lines == [(1, 16, {"loss": 1.0}), (2, 32, {"loss": 0.5, "return/tagger": 2.0})]
    assert collect.closed is True
    assert [r["loss"] for r in csv_rows(tmp_path / "metrics.csv")] == ["1.0", "0.5"]


def test_wandb_flags_come_from_the_config_and_a_resume_may_change_them(tmp_path, monkeypatch, capsys):
    flags = build_parser().format_help()
    for flag in ("--wandb", "--no-wandb", "--wandb-mode", "--wandb-project", "--wandb-entity", "--wandb-group"):
        assert flag in flags
    assert set(WANDB_FIELDS) <= set(RESUME_OVERRIDABLE)
    cfg = config_from_args(["--env", "simple_spread", "--iters", "1", "--wandb-mode", "offline",
                            "--wandb-project", "p"])
    assert (cfg.wandb, cfg.wandb_mode, cfg.wandb_project) == (False, "offline", "p")
    with pytest.raises(SystemExit):
        config_from_args(["--env", "simple_spread", "--iters", "1", "--wandb-mode", "sometimes"])
    assert "wandb_mode must be one of ['auto', 'offline', 'online']" in capsys.readouterr().err
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    assert wandb_mode("auto") == "offline" and wandb_mode("online") == "online"
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    assert wandb_mode("auto") == "online"
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert wandb_mode("auto") == "offline"
