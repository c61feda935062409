"""Checkpoint files (gpurl/train/checkpoint.py): round trip, every way a file can be bad (a content hash
that does not match included), atomic writes, the previous checkpoint kept and the newest good one found;
and the run outputs built on them (gpurl/train/outputs.py): metrics.csv across a resume, the curve PNG."""
from __future__ import annotations

import csv
import hashlib
import io
import os

import pytest
import torch

from gpurl.train.checkpoint import FORMAT, REQUIRED, CheckpointError, atomic_write_bytes, latest_checkpoint, \
    load_checkpoint, save_checkpoint
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


def enveloped(path, inner, digest=None):
    """``inner`` written as the documented envelope: {format, sha256 of the serialised inner, its bytes}."""
    buffer = io.BytesIO()
    torch.save(inner, buffer)
    data = buffer.getvalue()
    torch.save({"format": FORMAT, "sha256": digest or hashlib.sha256(data).hexdigest(),
                "content": torch.tensor(list(data), dtype=torch.uint8)}, path)


def _lacks_a_key(path):
    p = {"format": FORMAT, **payload()}
    del p["env_state"]
    enveloped(path, p)


def _inner_wrong_format(path):
    enveloped(path, {**payload(), "format": "gpurl-checkpoint-v0"})


def _hash_mismatch(path):
    """One float of the algorithm's state changed after the hash was taken (torch.load alone reads it)."""
    p = {"format": FORMAT, **payload()}
    buffer = io.BytesIO()
    torch.save(p, buffer)
    p["algo_state"]["nets"]["tagger.actor.0.weight"][0, 0] += 1.0
    enveloped(path, p, digest=hashlib.sha256(buffer.getvalue()).hexdigest())


def _no_content(path):
    torch.save({"format": FORMAT, "sha256": "0" * 64}, path)


def _not_a_dict(path):
    torch.save([1, 2, 3], path)


BAD = {
    "truncated": (_truncated, ""),
    "random_bytes": (_random_bytes, ""),
    "empty": (lambda path: path.write_bytes(b""), ""),
    "no_format_key": (_no_format_key, FORMAT),
    "wrong_format": (_wrong_format, "gpurl-checkpoint-v0"),
    "lacks_a_key": (_lacks_a_key, "env_state"),
    "inner_wrong_format": (_inner_wrong_format, "gpurl-checkpoint-v0"),
    "hash_mismatch": (_hash_mismatch, "fails its content hash"),
    "no_content": (_no_content, "no content and hash in its envelope"),
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


def test_the_documented_envelope_loads():
    """An envelope written here by hand (the format the module docstring states) loads as the payload."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "hand.pt")
        enveloped(path, {"format": FORMAT, **payload()})
        loaded = load_checkpoint(path)
    loaded.pop("format")
    assert_same(payload(), loaded)


def test_keep_previous_makes_the_replaced_checkpoint_the_previous_one(tmp_path):
    path = tmp_path / "checkpoint.pt"
    first, second, third = (dict(payload(), iteration=i) for i in (1, 2, 3))
    save_checkpoint(path, first, keep_previous=True)          # nothing to keep yet
    assert sorted(os.listdir(tmp_path)) == ["checkpoint.pt"]
    save_checkpoint(path, second, keep_previous=True)
    save_checkpoint(path, third, keep_previous=True)
    assert sorted(os.listdir(tmp_path)) == ["checkpoint.prev.pt", "checkpoint.pt"]   # the last two, no temp files
    assert load_checkpoint(path)["iteration"] == 3
    assert load_checkpoint(tmp_path / "checkpoint.prev.pt")["iteration"] == 2
    assert os.stat(path).st_ino != os.stat(tmp_path / "checkpoint.prev.pt").st_ino


def test_a_save_killed_after_keeping_the_previous_one_leaves_no_temp_link(tmp_path):
    """A save killed between its two steps leaves checkpoint.prev.pt and checkpoint.pt one file (two links);
    the next save must still keep it as the previous one without leaving a temp link (rename() between two
    links of one file does nothing)."""
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, dict(payload(), iteration=1))
    os.link(path, tmp_path / "checkpoint.prev.pt")
    save_checkpoint(path, dict(payload(), iteration=2), keep_previous=True)
    assert sorted(os.listdir(tmp_path)) == ["checkpoint.prev.pt", "checkpoint.pt"]
    assert load_checkpoint(path)["iteration"] == 2
    assert load_checkpoint(tmp_path / "checkpoint.prev.pt")["iteration"] == 1


def test_latest_checkpoint_falls_back_to_the_previous_one_and_says_why(tmp_path):
    path = tmp_path / "checkpoint.pt"
    assert latest_checkpoint(tmp_path, say=print) is None              # an empty dir: start afresh
    for i in (1, 2):
        save_checkpoint(path, dict(payload(), iteration=i), keep_previous=True)
    found, checkpoint = latest_checkpoint(tmp_path, say=print)
    assert found == path and checkpoint["iteration"] == 2
    said = []
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])                             # the newest is truncated
    found, checkpoint = latest_checkpoint(tmp_path, say=said.append)
    assert found == tmp_path / "checkpoint.prev.pt" and checkpoint["iteration"] == 1
    assert len(said) == 1 and said[0].startswith(f"warning: skipping {path}: ") and "truncated or corrupt" in said[0]
    _hash_mismatch(tmp_path / "checkpoint.prev.pt")                      # and the previous one is corrupt too
    with pytest.raises(CheckpointError, match=f"no checkpoint in {tmp_path} can be loaded") as err:
        latest_checkpoint(tmp_path, say=said.append)
    assert "fails its content hash" in str(err.value) and "truncated or corrupt" in str(err.value)


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
