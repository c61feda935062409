"""What a run owns and writes (issue 40): one writer per log dir (gpurl/train/log_dir_lock.py), a resume writes
only where the user points (gpurl/train/resume.py ``resume_config``), and a finished run whose ``result.json``
is missing or torn gets it back on ``--resume auto`` (``check_work_left`` there, ``TrainingRun.finish_only``).

On main at 7e58601: two runs into one dir both exited 0 and mixed their files; ``--resume branch/checkpoint.pt``
wrote into the checkpoint's recorded dir ``run/`` (rolling it back); a kill while ``result.json`` was written
left a run that ``--resume auto`` called finished, and no ``result.json`` ever again.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gpurl.train.checkpoint import load_checkpoint
from gpurl.train.cli import main as cli_main
from gpurl.train.log_dir_lock import LOCK_FILE, LogDirLock, LogDirLockedError
from gpurl.train.run import TrainingRun
from gpurl.train.run_record import LogDirTakenError
from tiny_runs import quiet, tiny_config

pytestmark = pytest.mark.cpu

COMMAND = ["--env", "tag_continuous", "--env-param", "num_taggers=2", "--env-param", "num_runners=3",
           "--env-param", "grid_length=4.0", "--env-param", "episode_length=12",
           "--env-param", "use_full_observation=False", "--env-param", "num_other_agents_observed=3",
           "--num-envs", "4", "--rollout-len", "8", "--iters", "2", "--epochs", "1", "--minibatches", "1",
           "--eval-episodes", "4", "--seed", "5", "--no-progress", "--device", "cpu", "--policy-backend", "eager",
           "--learner-backend", "eager", "--checkpoint-every", "1", "--torch-threads", "1"]


def files(log_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(log_dir.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> tuple[Path, dict]:
    """A finished two-iteration run (with its evaluations) and its result."""
    log_dir = tmp_path_factory.mktemp("finished") / "run"
    result = cli_main([*COMMAND, "--log-dir", str(log_dir)])
    return log_dir, result


# ---- one writer per log dir --------------------------------------------------------------------------


def test_a_second_run_into_a_held_dir_is_refused_naming_the_holder(tmp_path, capsys):
    log_dir = tmp_path / "run"
    holder = LogDirLock(log_dir)
    holder.acquire()
    try:
        with pytest.raises(SystemExit) as exit_info:
            cli_main([*COMMAND, "--log-dir", str(log_dir)])
    finally:
        holder.release()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"log dir {log_dir} is in use by another run: pid {os.getpid()} (" in err
    assert sorted(os.listdir(log_dir)) == [LOCK_FILE]  # the other run wrote nothing


def test_a_run_that_took_the_dir_after_this_one_claimed_it_wins(tmp_path):
    # B checks the empty dir first; A then runs to its end (lock released); B's begin() finds A's files
    # under the lock and refuses, writing nothing.
    log_dir = tmp_path / "run"
    late = TrainingRun(tiny_config(log_dir, iters=1), say=quiet, lines=quiet)
    first = TrainingRun(tiny_config(log_dir, iters=1), say=quiet, lines=quiet)
    first.build()
    first.begin()
    while not first.done:
        first.step()
    first.close()
    first.finish()
    before = files(log_dir)
    late.build()
    with pytest.raises(LogDirTakenError, match=f"holds files of run {first.run_id}"):
        late.begin()
    assert files(log_dir) == before


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    log_dir = tmp_path / "run"
    code = ("import sys, time; from gpurl.train.log_dir_lock import LogDirLock; "
            f"LogDirLock({str(log_dir)!r}).acquire(); print('held', flush=True); time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        with pytest.raises(LogDirLockedError, match=f"pid {child.pid} "):
            LogDirLock(log_dir).acquire()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    lock = LogDirLock(log_dir)
    lock.acquire()  # the kernel dropped the dead process's lock
    assert lock.held
    lock.release()


# ---- a resume writes only where the user points ---------------------------------------------------------


@pytest.mark.parametrize("point_at", ["checkpoint", "dir"])
def test_a_resume_of_a_copied_run_dir_continues_in_the_copy(finished_run, tmp_path, point_at):
    run, _ = finished_run
    branch = tmp_path / "branch"
    shutil.copytree(run, branch)
    original = files(run)
    target = branch / "checkpoint.pt" if point_at == "checkpoint" else branch
    result = cli_main(["--resume", str(target), "--iters", "3"])
    assert files(run) == original  # the checkpoint's recorded log dir is untouched
    assert result["log_dir"] == str(branch) and result["iterations"] == 3
    assert load_checkpoint(branch / "checkpoint.pt")["iteration"] == 3
    rows = (branch / "metrics.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["1", "2", "3"]


def test_a_resume_may_repeat_the_saved_values(finished_run, tmp_path):
    run, _ = finished_run
    branch = tmp_path / "branch"
    shutil.copytree(run, branch)
    # eval_episodes 4 and env tag_continuous are the checkpoint's own: no change, so no refusal
    result = cli_main(["--resume", str(branch), "--iters", "3", "--eval-episodes", "4", "--env", "tag_continuous"])
    assert result["iterations"] == 3


def test_a_resume_that_changes_a_saved_value_names_both(finished_run, tmp_path, capsys):
    run, _ = finished_run
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["--resume", str(run), "--iters", "3", "--eval-episodes", "5"])
    assert exit_info.value.code == 2
    assert "these cannot change: eval_episodes (saved 4, given 5)" in capsys.readouterr().err


# ---- final outputs are derivable --------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["missing", "torn"])
def test_a_finished_run_without_its_result_gets_it_back_on_resume_auto(finished_run, tmp_path, damage, capsys):
    run, original = finished_run
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    # a result.json torn by a kill (a non-atomic writer; gpurl's own writes leave the old file or none)
    if damage == "missing":
        (copy / "result.json").unlink()
    else:
        (copy / "result.json").write_text(json.dumps(original)[:40])
    checkpoint_before = (copy / "checkpoint.pt").read_bytes()
    result = cli_main([*COMMAND, "--log-dir", str(copy), "--resume", "auto"])
    assert "is missing or torn: no training" in capsys.readouterr().out
    assert (copy / "checkpoint.pt").read_bytes() == checkpoint_before  # nothing trained, nothing saved
    written = json.loads((copy / "result.json").read_text())
    assert written == json.loads(json.dumps(result)) and written["rewritten_from_checkpoint"] is True
    # the same policy measured with the same seeds: the same finals; the training time from the checkpoint
    for key in [k for k in original if k.endswith(("_final", "_random"))] + ["iterations", "env_steps", "run_id",
                                                                            "train_seconds", "timed_iterations"]:
        assert written[key] == original[key], key
    # and now the run is whole: nothing left to do
    with pytest.raises(SystemExit) as exit_info:
        cli_main([*COMMAND, "--log-dir", str(copy), "--resume", "auto"])
    assert exit_info.value.code == 2
    assert "nothing left to do" in capsys.readouterr().err
