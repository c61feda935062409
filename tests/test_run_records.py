"""A run never destroys what an earlier run wrote (issue 21, part 1): a resume with nothing left to do,
run ids and a log dir of another run, the record written before the random baseline, temp files left
by a SIGKILL, and checkpoints that cannot be loaded (gpurl/train/{run,run_record,checkpoint,trainer}.py).
metrics.csv appended per line and TensorBoard after a resume: tests/test_run_log.py."""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpurl.train import run as run_module
from gpurl.train.checkpoint import FORMAT, CheckpointError, load_checkpoint
from gpurl.train.cli import main as cli_main
from gpurl.train.resume import resume_config
from gpurl.train.run import train
from gpurl.train.run_record import LogDirTakenError

from tiny_runs import TINY, quiet, tiny_config

pytestmark = pytest.mark.cpu

REPO = Path(__file__).resolve().parent.parent


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root``: its bytes and modification time (ns)."""
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def csv_rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def finished_runs(tmp_path_factory):
    """Two finished tiny runs (2 iterations, a checkpoint at each) in their own log dirs; tests copy them."""
    root = tmp_path_factory.mktemp("runs")
    for name, seed in (("a", 5), ("b", 6)):
        train(tiny_config(root / name, seed=seed), say=quiet)
    return root


@pytest.fixture
def run_a(finished_runs, tmp_path) -> Path:
    """A copy of run a (its checkpoint's config still names the original log dir: resumes pass --log-dir)."""
    return Path(shutil.copytree(finished_runs / "a", tmp_path / "a"))


@pytest.fixture
def run_b(finished_runs, tmp_path) -> Path:
    return Path(shutil.copytree(finished_runs / "b", tmp_path / "b"))


def run_id_of(log_dir: Path) -> str:
    return json.loads((log_dir / "run.json").read_text())["run_id"]


# ---- a resume with nothing left to do ----------------------------------------------------------------


@pytest.mark.parametrize("iters", [1, 2])
def test_resume_with_nothing_left_to_do_says_so_and_changes_nothing(run_a, iters, capsys):
    before = snapshot(run_a)
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["--resume", str(run_a / "checkpoint.pt"), "--iters", str(iters), "--log-dir", str(run_a)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"the checkpoint is at iteration 2 and this run asks for iters={iters}: nothing left to do" in err
    assert str(run_a / "checkpoint.pt") in err
    # the same refusal when train() is called directly, before anything is built or written
    checkpoint = load_checkpoint(run_a / "checkpoint.pt")
    cfg = resume_config(checkpoint, {"iters": iters, "resume": str(run_a / "checkpoint.pt")})
    with pytest.raises(ValueError, match="nothing left to do"):
        train(cfg, checkpoint, say=quiet)
    assert snapshot(run_a) == before
    assert json.loads((run_a / "result.json").read_text())["agent_steps_per_s"] is not None


# ---- run ids and a log dir of another run ------------------------------------------------------------


def test_every_file_of_a_run_carries_its_id(run_a):
    run_id = run_id_of(run_a)
    assert load_checkpoint(run_a / "checkpoint.pt")["run_id"] == run_id
    assert json.loads((run_a / "result.json").read_text())["run_id"] == run_id
    assert [(r["iteration"], r["run_id"]) for r in csv_rows(run_a / "metrics.csv")] == [("1", run_id), ("2", run_id)]


def test_a_run_refuses_a_log_dir_of_another_run_unless_asked_for_a_fresh_one(run_a, run_b, capsys):
    id_a, id_b = run_id_of(run_a), run_id_of(run_b)
    assert id_a != id_b
    checkpoint = load_checkpoint(run_a / "checkpoint.pt")
    b_before = snapshot(run_b)

    resume_into_b = resume_config(checkpoint, {"iters": 3, "log_dir": str(run_b), "resume": "a/checkpoint.pt"})
    with pytest.raises(LogDirTakenError, match=f"log dir {run_b} holds files of run {id_b}") as err:
        train(resume_into_b, checkpoint, say=quiet)
    assert "--fresh-log-dir" in str(err.value) and "metrics.csv" in str(err.value)
    with pytest.raises(LogDirTakenError, match=f"holds files of run {id_b}"):  # a fresh run is refused too
        train(tiny_config(run_b), say=quiet)
    with pytest.raises(SystemExit) as exit_info:  # from the command line: a usage error, no traceback
        cli_main(["--env", "tag_continuous", *[f"--env-param={k}={v}" for k, v in TINY.items()], "--num-envs", "4",
                  "--device", "cpu", "--iters", "1", "--eval-episodes", "0", "--log-dir", str(run_b)],
                 prog="gpurl train")
    assert exit_info.value.code == 2
    assert f"gpurl train: error: log dir {run_b} holds files of run {id_b}" in capsys.readouterr().err
    assert snapshot(run_b) == b_before

    fresh = resume_config(checkpoint, {"iters": 3, "log_dir": str(run_b), "fresh_log_dir": True})
    result = train(fresh, checkpoint)
    new_dir = Path(f"{run_b}-{id_a}")
    assert f"this run ({id_a}) writes into {new_dir}" in capsys.readouterr().out
    assert result["log_dir"] == str(new_dir) and result["run_id"] == id_a
    assert snapshot(run_b) == b_before
    assert [(r["iteration"], r["run_id"]) for r in csv_rows(new_dir / "metrics.csv")] == [("3", id_a)]
    assert load_checkpoint(new_dir / "checkpoint.pt")["run_id"] == id_a


def test_a_resume_into_its_own_log_dir_continues_its_rows(run_a):
    run_id = run_id_of(run_a)
    checkpoint = load_checkpoint(run_a / "checkpoint.pt")
    train(resume_config(checkpoint, {"iters": 3, "log_dir": str(run_a)}), checkpoint, say=quiet)
    assert [(r["iteration"], r["run_id"]) for r in csv_rows(run_a / "metrics.csv")] == [
        ("1", run_id), ("2", run_id), ("3", run_id)]
    record = json.loads((run_a / "run.json").read_text())
    assert [s["from_iteration"] for s in record["starts"]] == [0, 2]


# ---- the record written at start ---------------------------------------------------------------------


def test_log_dir_config_and_machine_are_written_before_the_random_baseline(tmp_path, monkeypatch, capsys):
    def die(*args, **kwargs):
        raise RuntimeError("killed during the random baseline")

    monkeypatch.setattr(run_module.Trainer, "evaluate", die)
    log_dir = tmp_path / "early"
    cfg = tiny_config(log_dir, eval_episodes=8)
    with pytest.raises(RuntimeError, match="random baseline"):
        train(cfg)
    record = json.loads((log_dir / "run.json").read_text())
    assert record["log_dir"] == str(log_dir)
    assert record["config"] == json.loads(json.dumps(cfg.to_dict()))  # tuples as lists
    assert record["machine"]["device"] == "cpu" and record["machine"]["torch"] == torch.__version__
    out = capsys.readouterr().out
    first, machine_line = out.splitlines()[0], out.index("machine: ")
    assert first == f"gpurl train: run {record['run_id']}, log_dir={log_dir}"
    assert machine_line < out.index("config: ") < out.index("measuring a random policy")


# ---- a temp file left by a SIGKILL ------------------------------------------------------------------


KILLED_MID_SAVE = """
import os, signal, sys
from gpurl.train import checkpoint
path = sys.argv[1]
payload = checkpoint.load_checkpoint(path)
payload.pop("format")
os.replace = lambda *args: os.kill(os.getpid(), signal.SIGKILL)  # the data is written, the rename never comes
checkpoint.save_checkpoint(path, payload)
"""


def test_a_temp_checkpoint_left_by_sigkill_is_removed_on_the_next_start(run_a, capsys):
    checkpoint_bytes = (run_a / "checkpoint.pt").read_bytes()
    killed = subprocess.run([sys.executable, "-c", KILLED_MID_SAVE, str(run_a / "checkpoint.pt")], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed.stderr
    temps = list(run_a.glob(".checkpoint.pt.*.tmp"))
    assert len(temps) == 1 and temps[0].stat().st_size > 0
    assert (run_a / "checkpoint.pt").read_bytes() == checkpoint_bytes  # the old checkpoint is whole

    checkpoint = load_checkpoint(run_a / "checkpoint.pt")
    train(resume_config(checkpoint, {"iters": 3, "log_dir": str(run_a)}), checkpoint)
    assert f"removed {temps[0]}: a temporary file left by a write that was interrupted" in capsys.readouterr().out
    assert not list(run_a.glob(".*.tmp"))
    assert load_checkpoint(run_a / "checkpoint.pt")["iteration"] == 3


# ---- a checkpoint that cannot be loaded names the file and why -----------------------------------------


def _truncated(path: Path, checkpoint: dict):
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 3])


def _not_gpurl(path: Path, checkpoint: dict):
    torch.save({"state_dict": {"w": torch.zeros(2)}}, path)


def _other_format_version(path: Path, checkpoint: dict):
    torch.save({**checkpoint, "format": "gpurl-checkpoint-v3"}, path)


BAD_CHECKPOINTS = {  # name -> (how the file is spoiled, config overrides of the run resuming it, message)
    "truncated": (_truncated, {}, "is truncated or corrupt and cannot be read"),
    "not_gpurl": (_not_gpurl, {}, f"is not a gpurl checkpoint: expected format {FORMAT!r}, found None"),
    "format_version": (_other_format_version, {},
                       f"has gpurl checkpoint format 'gpurl-checkpoint-v3'; this gpurl reads {FORMAT!r} only"),
    "other_env": (None, dict(env="simple_tag", env_params={}),
                  "was saved from env 'tag_continuous'; this run is env 'simple_tag'"),
    "other_env_params": (None, dict(env_params={**TINY, "num_runners": 4}),
                         "was saved from a different 'tag_continuous' env (num_runners: 3 there, 4 here)"),
    "other_algorithm": (None, dict(algo="a2c"), "was saved from algorithm 'ppo'; this run is 'a2c'"),
}


@pytest.mark.parametrize("case", list(BAD_CHECKPOINTS))
def test_a_checkpoint_that_cannot_be_loaded_names_the_file_and_why(run_a, tmp_path, case):
    spoil, overrides, message = BAD_CHECKPOINTS[case]
    path = run_a / "checkpoint.pt"
    if spoil is not None:
        spoil(path, load_checkpoint(path))
    before = snapshot(run_a)
    with pytest.raises(CheckpointError) as err:
        checkpoint = load_checkpoint(path)
        train(tiny_config(tmp_path / "new", iters=3, resume=str(path), **overrides), checkpoint, say=quiet)
    assert str(path) in str(err.value) and message in str(err.value)
    assert snapshot(run_a) == before and not (tmp_path / "new").exists()


def test_a_checkpoint_whose_env_state_does_not_fit_names_the_file_and_field(run_a, tmp_path):
    """The same env name and parameters, but an env definition that changed since (a state field renamed)."""
    path = run_a / "checkpoint.pt"
    checkpoint = load_checkpoint(path)
    checkpoint["env_state"]["old_name"] = checkpoint["env_state"].pop("x")
    with pytest.raises(CheckpointError, match="does not fit this run: its env state has fields") as err:
        train(tiny_config(tmp_path / "new", iters=3, resume=str(path)), checkpoint, say=quiet)
    assert str(path) in str(err.value) and "'old_name'" in str(err.value)
