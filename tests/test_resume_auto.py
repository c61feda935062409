"""``--resume auto`` (issue 25): a run that dies is continued by the same command, from the newest checkpoint
in its log dir that loads, and ends where an uninterrupted run ends (gpurl/train/{cli,run,checkpoint}.py).

A crash is simulated in-process: ``Trainer.iterate`` raises at the start of iteration k, after the
checkpoints of the iterations before it were written (``--checkpoint-every 1``). Then the same command line
runs again. Checked against an uninterrupted run of the same command: the final parameters bit for bit (the
CPU is deterministic) and ``metrics.csv`` holding every iteration exactly once. Covered: a crash after
checkpoints (resume from the newest), the newest checkpoint truncated (the previous one, with a warning
naming the skipped file), a crash before any checkpoint (the run restarts from iteration 0 under its own id
and rewrites its logs), a log dir of another config, and no --log-dir. And ``--checkpoint-every`` as a time
('10m'), on a clock the test moves.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch

from gpurl.train.checkpoint import load_checkpoint
from gpurl.train.cli import main as cli_main
from gpurl.train.trainer import Trainer

pytestmark = pytest.mark.cpu

ITERS = 4
COMMAND = ["--env", "tag_continuous", "--env-param", "num_taggers=2", "--env-param", "num_runners=3",
           "--env-param", "grid_length=4.0", "--env-param", "episode_length=12",
           "--env-param", "use_full_observation=False", "--env-param", "num_other_agents_observed=3",
           "--num-envs", "4", "--rollout-len", "8", "--iters", str(ITERS), "--epochs", "1", "--minibatches", "1",
           "--eval-episodes", "0", "--seed", "5", "--no-progress", "--device", "cpu", "--policy-backend", "eager",
           "--learner-backend", "eager", "--checkpoint-every", "1", "--torch-threads", "1"]


def command(log_dir: Path, *extra: str) -> list[str]:
    return [*COMMAND, "--log-dir", str(log_dir), "--resume", "auto", *extra]


class SimulatedCrash(RuntimeError):
    pass


def crashed_run(log_dir: Path, monkeypatch, iteration: int) -> str:
    """The command run into ``log_dir`` with ``Trainer.iterate`` raising when it starts iteration ``iteration``
    (1-based); returns the run's id."""
    original = Trainer.iterate

    def iterate(self):
        if self.iteration + 1 == iteration:
            raise SimulatedCrash(f"killed at the start of iteration {iteration}")
        return original(self)

    monkeypatch.setattr(Trainer, "iterate", iterate)
    with pytest.raises(SimulatedCrash):
        cli_main(command(log_dir))
    monkeypatch.undo()
    return json.loads((log_dir / "run.json").read_text())["run_id"]


def final_params(log_dir: Path) -> dict:
    return load_checkpoint(log_dir / "checkpoint.pt")["algo_state"]["nets"]


def iterations_logged(log_dir: Path) -> list[int]:
    with open(log_dir / "metrics.csv", newline="") as f:
        return [int(row["iteration"]) for row in csv.DictReader(f)]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    log_dir = tmp_path_factory.mktemp("uninterrupted") / "run"
    cli_main(command(log_dir))  # --resume auto in a dir that does not exist yet: a fresh start
    assert load_checkpoint(log_dir / "checkpoint.pt")["iteration"] == ITERS
    assert load_checkpoint(log_dir / "checkpoint.prev.pt")["iteration"] == ITERS - 1   # the last two kept
    return log_dir


def assert_same_end(log_dir: Path, reference: Path) -> None:
    want, got = final_params(reference), final_params(log_dir)
    assert want.keys() == got.keys()
    for name in want:
        assert torch.equal(want[name], got[name]), name
    assert iterations_logged(log_dir) == list(range(1, ITERS + 1))


@pytest.mark.parametrize("spoil_newest", [False, True], ids=["newest", "newest-truncated"])
def test_the_same_command_continues_a_crashed_run_to_the_uninterrupted_end(uninterrupted, tmp_path, monkeypatch,
                                                                          capsys, spoil_newest):
    log_dir = tmp_path / "run"
    run_id = crashed_run(log_dir, monkeypatch, 3)
    assert load_checkpoint(log_dir / "checkpoint.pt")["iteration"] == 2
    if spoil_newest:
        data = (log_dir / "checkpoint.pt").read_bytes()
        (log_dir / "checkpoint.pt").write_bytes(data[:len(data) // 2])
    capsys.readouterr()
    result = cli_main(command(log_dir))
    out, err = capsys.readouterr()
    resumed_from = log_dir / ("checkpoint.prev.pt" if spoil_newest else "checkpoint.pt")
    assert f"resuming {resumed_from}" in out
    if spoil_newest:
        assert f"warning: skipping {log_dir / 'checkpoint.pt'}: checkpoint {log_dir / 'checkpoint.pt'} is truncated" in err
    assert result["iterations"] == ITERS and result["run_id"] == run_id
    assert_same_end(log_dir, uninterrupted)


def test_a_run_that_crashed_before_its_first_checkpoint_restarts_under_its_own_id(uninterrupted, tmp_path,
                                                                                   monkeypatch, capsys):
    log_dir = tmp_path / "run"
    run_id = crashed_run(log_dir, monkeypatch, 1)
    assert not (log_dir / "checkpoint.pt").exists()
    result = cli_main(command(log_dir))
    assert "restarted from iteration 0 (--resume auto: no checkpoint yet)" in capsys.readouterr().out
    assert result["run_id"] == run_id
    assert len(json.loads((log_dir / "run.json").read_text())["starts"]) == 2
    assert_same_end(log_dir, uninterrupted)


def test_a_log_dir_of_another_config_is_refused_and_left_alone(uninterrupted, capsys):
    before = {p.name: p.read_bytes() for p in uninterrupted.iterdir() if p.is_file()}
    with pytest.raises(SystemExit) as exit_info:
        cli_main(command(uninterrupted, "--seed", "6", "--iters", str(ITERS + 1)))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"--resume auto: {uninterrupted / 'checkpoint.pt'} was saved from another config (seed: 5 there, 6 here)" \
        in err
    assert {p.name: p.read_bytes() for p in uninterrupted.iterdir() if p.is_file()} == before


def test_auto_needs_a_log_dir(capsys):
    with pytest.raises(SystemExit):
        cli_main([*COMMAND, "--resume", "auto"])
    assert "--resume auto looks for the checkpoints in --log-dir: pass --log-dir" in capsys.readouterr().err


def test_checkpoint_every_takes_a_time(tmp_path, monkeypatch):
    """``--checkpoint-every 1m`` with a clock that moves 40 s per reading (one at the start, one per iteration,
    one per checkpoint): due at iterations 2 (80 s since the start) and 4 (80 s since the last), so the two
    kept are those of iterations 2 and 4 (every iteration would keep 3 and 4)."""
    from gpurl.train import run as run_module

    readings = iter(range(0, 10_000, 40))
    monkeypatch.setattr(run_module, "_clock", lambda: float(next(readings)))
    log_dir = tmp_path / "timed"
    cli_main([*command(log_dir), "--checkpoint-every", "1m"])
    assert load_checkpoint(log_dir / "checkpoint.pt")["iteration"] == ITERS
    assert load_checkpoint(log_dir / "checkpoint.prev.pt")["iteration"] == 2
    assert json.loads((log_dir / "run.json").read_text())["config"]["checkpoint_every"] == "1m"


@pytest.mark.parametrize("value,normalised", [(7, 7), ("12", 12), ("90s", "90s"), (" 10M", "10m"), ("1.5h", "1.5h")])
def test_checkpoint_every_reads_iterations_or_a_time(value, normalised):
    from gpurl.train.config import checkpoint_interval, checkpoint_seconds

    assert checkpoint_interval(value) == normalised
    assert checkpoint_seconds(normalised) == {"90s": 90.0, "10m": 600.0, "1.5h": 5400.0}.get(normalised)


@pytest.mark.parametrize("value", [-1, "-5m", "0s", "10x", "m", "infh", True, 2.5])
def test_a_bad_checkpoint_every_is_refused_naming_it(value, capsys):
    from gpurl.train.config import checkpoint_interval

    with pytest.raises(ValueError, match="checkpoint_every must be iterations .* or a time such as '90s'"):
        checkpoint_interval(value)
    if isinstance(value, str):
        with pytest.raises(SystemExit):
            cli_main([*COMMAND, f"--checkpoint-every={value}"])
        assert "checkpoint_every must be iterations" in capsys.readouterr().err
