"""Seed sweeps (gpurl/train/sweep.py, ``gpurl train --seeds``): every seed of a side-by-side sweep is the run
of that seed alone; the mean, std and 95% CI over seeds; refusals before anything is written; a sweep
continued by ``--resume auto`` continues every seed in its own dir."""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
import torch

from gpurl.train.checkpoint import load_checkpoint
from gpurl.train.cli import main as cli_main
from gpurl.train.run import train
from gpurl.train.sweep import SWEEP_FILE, parse_seeds, spread, summarize, sweep

from tiny_runs import TINY, quiet, tiny_config

pytestmark = pytest.mark.cpu

TINY_FLAGS = ["--env", "tag_continuous", *[f"--env-param={k}={v}" for k, v in TINY.items()], "--num-envs", "4",
              "--rollout-len", "8", "--epochs", "1", "--minibatches", "1", "--eval-episodes", "0", "--device", "cpu",
              "--policy-backend", "eager", "--learner-backend", "eager", "--torch-threads", "1",
              "--checkpoint-every", "1"]
#: Columns that differ between two runs of one seed: the id and the timing.
UNEQUAL = ("run_id", "agent_steps_per_s")


def sweep_config(log_dir, **overrides):
    """The tiny run over three iterations, measuring 4 episodes of the random and of the trained policy."""
    return tiny_config(log_dir, **{"iters": 3, "eval_episodes": 4, **overrides})


def csv_rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return [{k: v for k, v in row.items() if k not in UNEQUAL} for row in csv.DictReader(f)]


def test_each_seed_of_a_sweep_is_that_seed_run_alone(tmp_path):
    configs = [sweep_config(tmp_path / "sweep" / f"seed{seed}", seed=seed) for seed in (5, 6)]
    payload = sweep(configs, say=quiet, sweep_dir=tmp_path / "sweep")
    alone = train(sweep_config(tmp_path / "alone", seed=6), say=quiet)
    in_sweep = payload["runs"][1]
    assert payload["seeds"] == [5, 6] and in_sweep["seed"] == 6 and in_sweep["iterations"] == 3
    rows = csv_rows(tmp_path / "sweep" / "seed6" / "metrics.csv")
    assert rows == csv_rows(tmp_path / "alone" / "metrics.csv") and len(rows) == 3
    assert rows != csv_rows(tmp_path / "sweep" / "seed5" / "metrics.csv")
    for key in ("return_tagger_final", "return_runner_final", "tags_per_episode_final", "return_tagger_random"):
        assert in_sweep[key] == alone[key], key
    swept = load_checkpoint(tmp_path / "sweep" / "seed6" / "checkpoint.pt")["algo_state"]
    single = load_checkpoint(tmp_path / "alone" / "checkpoint.pt")["algo_state"]
    assert _flat(swept).numel() > 1000 and torch.equal(_flat(swept), _flat(single))  # networks and optimizer
    # the summary: over both seeds, with each seed's value
    summary = payload["summary"]["return_tagger_final"]
    assert summary["values"] == [payload["runs"][0]["return_tagger_final"], in_sweep["return_tagger_final"]]
    assert json.loads((tmp_path / "sweep" / SWEEP_FILE).read_text())["summary"] == json.loads(json.dumps(
        payload["summary"]))


def _flat(state) -> torch.Tensor:
    """Every floating tensor of a (nested) state dict, in key order, as one vector."""
    if isinstance(state, torch.Tensor):
        return state.flatten().double() if state.is_floating_point() else torch.zeros(0, dtype=torch.float64)
    if isinstance(state, dict):
        parts = [_flat(state[k]) for k in sorted(state, key=str)]
    elif isinstance(state, (list, tuple)):
        parts = [_flat(v) for v in state]
    else:
        return torch.zeros(0, dtype=torch.float64)
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)


def test_a_sweep_continued_by_resume_auto_continues_every_seed(tmp_path, capsys):
    log_dir = tmp_path / "sweep"
    command = [*TINY_FLAGS, "--log-dir", str(log_dir), "--seeds", "1,2", "--resume", "auto"]
    cli_main([*command, "--iters", "2"])
    first = json.loads(capsys.readouterr().out.split("RESULT ", 1)[1])
    cli_main([*command, "--iters", "3"])
    out = capsys.readouterr().out
    second = json.loads(out.split("RESULT ", 1)[1])
    assert "[seed 2] gpurl train: run " in out and f"resuming {log_dir / 'seed2' / 'checkpoint.pt'}" in out
    for seed, before, after in zip((1, 2), first["runs"], second["runs"]):
        assert (after["seed"], after["run_id"], after["iterations"]) == (seed, before["run_id"], 3)
        assert [r["iteration"] for r in csv_rows(log_dir / f"seed{seed}" / "metrics.csv")] == ["1", "2", "3"]
    assert second["seeds"] == [1, 2] and second["sweep"]["log_dir"] == str(log_dir)
    assert "return_tagger_last" in second["summary"] and second["summary"]["return_tagger_last"]["n"] == 2
    assert "return_tagger_last: mean " in out and "95% CI [" in out


@pytest.mark.parametrize("flags, message", [
    (["--seeds", "0,0"], "names seed(s) [0] twice"),
    (["--seeds", ""], "takes comma-separated seeds"),
    (["--seeds", "1,x"], "got 'x' in '1,x'"),
    (["--seeds", "0,-1"], "got '-1'"),
    (["--seeds", "0,1", "--seed", "3"], "leave out --seed"),
    (["--seeds", "0,1", "--resume", "runs/x/checkpoint.pt"], "a checkpoint is one seed's run"),
    (["--seeds", "0,1", "--profile"], "--profile profiles one run"),
    (["--seeds", "0,1", "--resume", "auto"], "seed 0: --resume auto looks for the checkpoints in --log-dir"),
], ids=["repeated", "empty", "not-a-number", "negative", "with-seed", "with-a-checkpoint", "profile", "auto-no-dir"])
def test_a_bad_sweep_is_refused_before_anything_is_written(flags, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # default log dirs would go to ./runs
    log_dir = tmp_path / "sweep"
    dir_flags = [] if "auto" in flags else ["--log-dir", str(log_dir)]
    with pytest.raises(SystemExit) as exit_info:
        cli_main([*TINY_FLAGS, "--iters", "1", *dir_flags, *flags])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_under_torchrun_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(SystemExit):
        cli_main([*TINY_FLAGS, "--iters", "1", "--log-dir", str(tmp_path / "s"), "--seeds", "0,1"])
    assert "one of 2 ranks (torchrun)" in capsys.readouterr().err and not (tmp_path / "s").exists()


def test_a_seed_whose_log_dir_is_taken_stops_the_sweep_before_any_seed_writes(tmp_path, capsys):
    log_dir = tmp_path / "sweep"
    train(sweep_config(log_dir / "seed2", seed=9, iters=1, eval_episodes=0), say=quiet)  # another run in seed2's dir
    before = sorted(p.name for p in (log_dir / "seed2").iterdir())
    with pytest.raises(SystemExit) as exit_info:
        cli_main([*TINY_FLAGS, "--iters", "1", "--log-dir", str(log_dir), "--seeds", "1,2"])
    assert exit_info.value.code == 2 and f"log dir {log_dir / 'seed2'} holds files of run" in capsys.readouterr().err
    assert not (log_dir / "seed1").exists() and sorted(p.name for p in (log_dir / "seed2").iterdir()) == before


def test_seeds_parse_into_distinct_whole_numbers():
    assert parse_seeds("0,1,2") == (0, 1, 2) and parse_seeds(" 7 ") == (7,) and parse_seeds("3,1") == (3, 1)
    for bad in ("", ",", "1,,2", "1.5", "2**3", str(2**64)):
        with pytest.raises(ValueError):
            parse_seeds(bad)


def test_spread_is_the_mean_std_and_students_t_interval():
    s = spread([1.0, 2.0, 3.0])
    half = 4.302653 / math.sqrt(3)  # t(0.975, 2)
    assert (s["n"], s["mean"], s["std"]) == (3, 2.0, 1.0)
    assert s["ci95"] == pytest.approx([2.0 - half, 2.0 + half])
    one = spread([4.0])
    assert (one["mean"], one["std"], one["ci95"]) == (4.0, None, None)


def test_summarize_takes_measured_values_and_the_last_logged_ones():
    results = [{"return_a_final": 1.0, "return_a_random": 0.5, "agent_steps_per_s": 10.0, "seed": 0, "x_final": None},
               {"return_a_final": 3.0, "return_a_random": 0.5, "agent_steps_per_s": 30.0, "seed": 1}]
    rows = [[{"iteration": "1", "return/a": "2.0", "tags_per_episode": "1.0"}, {"iteration": "2", "return/a": ""}],
            [{"iteration": 1, "return/a": 4.0, "loss": 9.0}]]
    summary = summarize(results, rows)
    assert sorted(summary) == ["agent_steps_per_s", "return_a_final", "return_a_last", "return_a_random",
                               "tags_per_episode_last"]
    assert summary["return_a_final"]["mean"] == 2.0 and summary["return_a_last"]["values"] == [2.0, 4.0]
    assert summary["tags_per_episode_last"]["n"] == 1
