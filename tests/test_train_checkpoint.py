"""Checkpoint files (gpurl/train/checkpoint.py): round trip, every way a file can be bad, atomic writes;
and the run outputs built on them (gpurl/train/outputs.py): metrics.csv across a resume, the curve PNG."""
from __future__ import annotations

import csv
import os

import pytest
import torch

from gpurl.train.checkpoint import FORMAT, REQUIRED, CheckpointError, atomic_write_bytes, load_checkpoint, \
    save_checkpoint
from gpurl.train.outputs import RunLog, plot_curve

pytestmark = pytest.mark.cpu

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def payload() -> dict:
    """Every REQUIRED key but "format" (save_checkpoint adds it), with small tensors of several dtypes."""
    g = torch.Generator().manual_seed(1)
    p = dict(
        config={"num_envs": 2, "hidden": [8, 8], "env_params": {"num_runners": 3}},
        iteration=3, env_steps=48,
        algorithm="ppo",
        algo_state={"nets": {"tagger.actor.0.weight": torch.randn(4, 3, generator=g), "tagger.log_std": torch.zeros(0)},
                    "optimizer": {"state": {0: {"step": torch.tensor(3.0), "exp_avg": torch.randn(4, 3, generator=g)}},
                                  "param_groups": [{"lr": 1e-3, "params": [0]}]}},
        generator=torch.Generator().manual_seed(9).get_state(),
        sample_generator=torch.Generator().manual_seed(10).get_state(),
        step_counter=torch.tensor([17]),
        env_state={"x": torch.rand(2, 5, generator=g), "alive": torch.ones(2, 5, dtype=torch.int32)},
        history_obs=torch.randn(2, 2, 5, 4, generator=g),
        history_starts=torch.tensor([[True, False], [False, True]]),
        episode_stats={"return/tagger": torch.tensor([1.0, 2.0])},
        extras={"best": 0.5},
        run_id="20261126-120000-abcdef",
        carried={"hidden": torch.randn(2, 5, 3, generator=g)},
    )
    assert set(p) == set(REQUIRED) - {"format"}
    return p


def assert_same(a, b, where="payload"):
    """Structural equality with exact tensor equality (dtype included)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def test_round_trip(tmp_path):
    path = tmp_path / "sub" / "ckpt.pt"   # the parent folder is created
    p = payload()
    save_checkpoint(path, p)
    loaded = load_checkpoint(path)
    assert loaded.pop("format") == FORMAT
    assert_same(p, loaded)
    assert os.listdir(path.parent) == ["ckpt.pt"]


def test_save_refuses_an_incomplete_payload(tmp_path):
    p = payload()
    del p["algo_state"]
    with pytest.raises(ValueError, match="algo_state"):
        save_checkpoint(tmp_path / "c.pt", p)
    assert not (tmp_path / "c.pt").exists()


def _truncated(path):
    save_checkpoint(path, payload())
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def _random_bytes(path):
    path.write_bytes(torch.randint(0, 256, (4096,), dtype=torch.uint8,
                                   generator=torch.Generator().manual_seed(0)).numpy().tobytes())


def _no_format_key(path):
    torch.save(payload(), path)


def _wrong_format(path):
    torch.save({**payload(), "format": "gpurl-checkpoint-v0"}, path)


def _lacks_a_key(path):
    p = {"format": FORMAT, **payload()}
    del p["env_state"]
    torch.save(p, path)


def _not_a_dict(path):
    torch.save([1, 2, 3], path)


BAD = {
    "truncated": (_truncated, ""),
    "random_bytes": (_random_bytes, ""),
    "empty": (lambda path: path.write_bytes(b""), ""),
    "no_format_key": (_no_format_key, FORMAT),
    "wrong_format": (_wrong_format, "gpurl-checkpoint-v0"),
    "lacks_a_key": (_lacks_a_key, "env_state"),
    "not_a_dict": (_not_a_dict, "list"),
    "missing": (lambda path: None, "does not exist"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_files_raise_checkpoint_error_naming_the_path(tmp_path, case):
    make, detail = BAD[case]
    path = tmp_path / f"{case}.pt"
    make(path)
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path)
    assert str(path) in str(err.value)
    assert detail in str(err.value)


def test_atomic_write_replaces_and_leaves_no_temp_files(tmp_path):
    path = tmp_path / "f.bin"
    atomic_write_bytes(path, b"first")
    atomic_write_bytes(path, b"second")
    assert path.read_bytes() == b"second"
    assert os.listdir(tmp_path) == ["f.bin"]


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_failed_atomic_write_keeps_the_old_file(tmp_path, monkeypatch, failing):
    path = tmp_path / "f.bin"
    atomic_write_bytes(path, b"old content")

    def crash(*args, **kwargs):
        raise OSError("disk gone")

    monkeypatch.setattr(os, failing, crash)
    with pytest.raises(OSError, match="disk gone"):
        atomic_write_bytes(path, b"new content that never lands")
    monkeypatch.undo()
    assert path.read_bytes() == b"old content"
    assert os.listdir(tmp_path) == ["f.bin"]   # the temp file was cleaned up


# ---- RunLog and the curve --------------------------------------------------------------------------


def read_csv(path):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return reader.fieldnames, list(reader)


def test_run_log_writes_csv_and_a_resume_keeps_rows_up_to_its_checkpoint(tmp_path, capsys):
    log = RunLog(tmp_path, total_iters=3, start_iter=0, progress=False, tensorboard=False)
    for it in (1, 2, 3):
        log.log(it, 16 * it, {"return/tagger": float(it), "loss": 0.5 * it})
    log.close()
    header, rows = read_csv(tmp_path / "metrics.csv")
    assert header == ["iteration", "env_steps", "return/tagger", "loss"]
    assert [(r["iteration"], r["env_steps"], float(r["return/tagger"]), float(r["loss"])) for r in rows] == [
        ("1", "16", 1.0, 0.5), ("2", "32", 2.0, 1.0), ("3", "48", 3.0, 1.5)]
    assert "iter 3/3" in capsys.readouterr().out  # no progress bar: plain lines

    resumed = RunLog(tmp_path, total_iters=3, start_iter=2, progress=False, tensorboard=False)
    assert [r["iteration"] for r in resumed.rows] == ["1", "2"]
    resumed.log(3, 48, {"return/tagger": 30.0, "loss": 9.0})   # iteration 3 is redone, not duplicated
    resumed.close()
    _, rows = read_csv(tmp_path / "metrics.csv")
    assert [(r["iteration"], float(r["return/tagger"])) for r in rows] == [("1", 1.0), ("2", 2.0), ("3", 30.0)]
    assert sorted(os.listdir(tmp_path)) == ["metrics.csv"]   # no TensorBoard files, no temp files

    fresh = RunLog(tmp_path, total_iters=3, start_iter=0, progress=False, tensorboard=False)
    assert fresh.rows == []   # a new run (start_iter 0) does not inherit old rows


def test_plot_curve_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [{"iteration": i, "env_steps": 16 * i, "return/tagger": float(i), "tags_per_episode": "2.5",
             "loss": 0.1} for i in (1, 2, 3)]
    path = plot_curve(rows, tmp_path / "curve.png", {"return/tagger": 0.5}, title="test")
    assert path == tmp_path / "curve.png"
    assert path.read_bytes()[:8] == PNG_MAGIC
    assert os.listdir(tmp_path) == ["curve.png"]
