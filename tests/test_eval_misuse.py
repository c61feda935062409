"""``gpurl eval`` misused: a bad --render path or an absurd --episodes is a usage error (exit 2, one error line
naming the flag and value) before anything is loaded, built or played, and a file that is not a checkpoint is
named as such without torch's advice to load it unsafely.

No test here builds an env or a trainer: the refusals must come before either, which is what is checked.
"""
from __future__ import annotations

import io
import os
import random
from fractions import Fraction
from pathlib import Path

import pytest
import torch

from gpurl.cli import main as gpurl_command
from gpurl.train import eval_cli
from gpurl.train.checkpoint import CheckpointError, load_checkpoint
from gpurl.train.evaluation import MAX_EVAL_EPISODES, check_eval_episodes

pytestmark = pytest.mark.cpu


class Reached(Exception):
    """Raised by the stand-ins below: the command got past its usage checks."""


@pytest.fixture
def run_dir(tmp_path, monkeypatch) -> Path:
    """A run dir whose checkpoint is never read: reading it, building an env or playing fails the test by
    raising :class:`Reached` (so a usage error must come first)."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoint.pt").write_bytes(b"never read")

    def reached(*args, **kwargs):
        raise Reached

    for name in ("read_checkpoint", "make", "play_episodes", "render_episode"):
        monkeypatch.setattr(eval_cli, name, reached)
    return run


def files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def usage_error(capsys, *argv) -> str:
    """The error line of ``gpurl eval argv``, which must exit 2 through parser.error."""
    with pytest.raises(SystemExit) as exit_info:
        eval_cli.main([str(a) for a in argv] + ["--device", "cpu"], prog="gpurl eval")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("usage: gpurl eval") and err[-1].startswith("gpurl eval: error: ")
    return err[-1]


# ---- --render ---------------------------------------------------------------------------------------------


def test_a_good_render_path_passes_the_checks_and_the_checkpoint_is_read_next(run_dir, tmp_path):
    """The control for the tests below: with nothing wrong the command goes on to read the checkpoint."""
    with pytest.raises(Reached):
        eval_cli.main([str(run_dir), "--render", str(tmp_path / "episode.gif")])
    with pytest.raises(Reached):
        eval_cli.main([str(run_dir), "--render"])  # the default: eval_episode.gif in the run dir


def test_a_render_path_of_another_format_is_refused_before_anything_is_played(run_dir, tmp_path, capsys):
    before = files_under(tmp_path)
    line = usage_error(capsys, run_dir, "--render", tmp_path / "episode.png")
    assert line == f"gpurl eval: error: --render {tmp_path / 'episode.png'}: the file must end in .gif or .mp4"
    assert files_under(tmp_path) == before


def test_a_missing_render_directory_is_refused_and_not_created(run_dir, tmp_path, capsys):
    before = files_under(tmp_path)
    target = tmp_path / "no" / "such" / "episode.gif"
    line = usage_error(capsys, run_dir, "--render", target)
    assert f"--render {target}: directory {target.parent} does not exist" in line
    assert f"mkdir -p {target.parent}" in line
    assert files_under(tmp_path) == before and not (tmp_path / "no").exists()


def test_a_render_path_under_a_file_or_naming_a_directory_is_refused(run_dir, tmp_path, capsys):
    before = files_under(tmp_path)
    under_a_file = run_dir / "checkpoint.pt" / "episode.gif"
    assert f"{run_dir / 'checkpoint.pt'} is not a directory" in usage_error(capsys, run_dir, "--render", under_a_file)
    (tmp_path / "frames.gif").mkdir()
    assert "that is a directory" in usage_error(capsys, run_dir, "--render", tmp_path / "frames.gif")
    assert files_under(tmp_path) == sorted(before + ["frames.gif"])


def test_a_render_directory_that_cannot_be_written_is_refused(run_dir, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("this user (root?) can write a read-only directory")
        line = usage_error(capsys, run_dir, "--render", locked / "episode.gif")
        assert f"directory {locked} is not writable" in line
        assert files_under(locked) == []
    finally:
        locked.chmod(0o755)


def test_an_env_without_a_drawer_is_refused_before_any_episode_is_played(tmp_path, capsys, monkeypatch):
    """The example's foraging env has no draw_frame: --render says so once the env is made, before a policy is
    loaded or an episode played (it used to print the results, then a traceback)."""
    import custom_env_harness  # noqa: F401  (registers "foraging")
    from gpurl.train import build_config

    config = build_config(env="foraging", num_envs=2, iters=1, device="cpu", env_modules=("examples/custom_env.py",))
    monkeypatch.setattr(eval_cli, "read_checkpoint", lambda path, say: (Path(path), {"config": config.to_dict()}))
    for name in ("TrainedPolicy", "play_episodes", "render_episode"):
        monkeypatch.setattr(eval_cli, name, lambda *args, **kwargs: (_ for _ in ()).throw(Reached))
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoint.pt").write_bytes(b"read by the stand-in")
    with pytest.raises(SystemExit) as exit_info:
        eval_cli.main([str(run), "--render", str(tmp_path / "episode.gif"), "--device", "cpu"])
    assert exit_info.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("gpurl eval: error: --render: no drawer for Foraging: give the class a draw_frame")


def test_an_mp4_without_ffmpeg_is_refused_before_anything_is_played(run_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(eval_cli.shutil, "which", lambda name: None)
    line = usage_error(capsys, run_dir, "--render", tmp_path / "episode.mp4")
    assert "writing .mp4 needs ffmpeg on the PATH; give a .gif path instead" in line


# ---- --episodes ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("episodes", [10**12, MAX_EVAL_EPISODES + 1, 0, -3])
def test_an_episode_count_out_of_range_is_a_usage_error_naming_flag_value_and_bound(run_dir, capsys, episodes):
    line = usage_error(capsys, run_dir, "--episodes", episodes)
    assert line == (f"gpurl eval: error: --episodes {episodes} is out of range: give 1 to {MAX_EVAL_EPISODES} "
                    f"episodes (the bound is MAX_EVAL_EPISODES in gpurl/train/evaluation.py)")


def test_the_bound_itself_is_accepted(run_dir):
    with pytest.raises(Reached):
        eval_cli.main([str(run_dir), "--episodes", str(MAX_EVAL_EPISODES)])


def test_check_eval_episodes_for_other_flags():
    """What ``gpurl train --eval-episodes`` calls, where 0 means "skip the evaluations"."""
    assert check_eval_episodes(0, "--eval-episodes", minimum=0) == 0
    assert check_eval_episodes(MAX_EVAL_EPISODES, "--eval-episodes", minimum=0) == MAX_EVAL_EPISODES
    for bad in (MAX_EVAL_EPISODES + 1, -1, True, 2.0, "5"):
        with pytest.raises(ValueError, match=r"^--eval-episodes .* is out of range: give 0 to 1000000 episodes") as err:
            check_eval_episodes(bad, "--eval-episodes", minimum=0)
        assert "\n" not in str(err.value)


def test_gpurl_eval_with_an_absurd_episode_count_ends_at_once_with_status_2(tmp_path, capsys):
    """Through the ``gpurl`` command's entry point (in this process: a child would spend its time importing):
    no checkpoint is needed to be refused, and nothing is written."""
    with pytest.raises(SystemExit) as exit_info:
        gpurl_command(["eval", str(tmp_path), "--episodes", str(10**12)])
    assert exit_info.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip().splitlines()[-1].startswith(f"gpurl eval: error: --episodes {10**12} is out of range")
    assert files_under(tmp_path) == []


# ---- files that are not checkpoints -----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
def test_random_bytes_are_named_not_a_gpurl_checkpoint_without_unsafe_advice(tmp_path, seed):
    """torch fails on random bytes in several ways (an unpickling error wrapped in its advice to retry with
    weights_only=False, IndexError, UnicodeDecodeError, ...): each one is the same refusal here."""
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(random.Random(seed).randbytes(4096))
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path)
    message = str(err.value)
    assert message.startswith(f"checkpoint {path} is not a gpurl checkpoint (a corrupt file, or one of another "
                              f"format): gpurl checkpoints are zip archives and this file begins b")
    assert "weights_only" not in message and "\n" not in message


def test_a_torch_file_holding_objects_gpurl_never_saves_gets_no_advice_to_trust_it(tmp_path):
    path = tmp_path / "other.pt"
    torch.save({"ratio": Fraction(1, 3)}, path)
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path)
    message = str(err.value)
    assert message.startswith(f"checkpoint {path} is not a gpurl checkpoint (a corrupt file, or one of another format)")
    assert "fractions.Fraction" in message  # the reason, without what follows it
    assert "weights_only" not in message and "safe_globals" not in message and "\n" not in message


def test_a_cut_torch_zip_is_still_truncated_or_corrupt(tmp_path):
    buffer = io.BytesIO()
    torch.save({"x": torch.arange(1000)}, buffer)
    for cut in (0, 2, len(buffer.getvalue()) // 2):
        path = tmp_path / f"cut{cut}.pt"
        path.write_bytes(buffer.getvalue()[:cut])
        with pytest.raises(CheckpointError, match=r"is truncated or corrupt and cannot be read") as err:
            load_checkpoint(path)
        assert str(path) in str(err.value) and "weights_only" not in str(err.value)


def test_gpurl_eval_of_random_bytes_is_refused_by_name(tmp_path, capsys):
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(random.Random(1).randbytes(4096))
    with pytest.raises(SystemExit) as exit_info:
        eval_cli.main([str(path), "--device", "cpu"], prog="gpurl eval")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"gpurl eval: error: checkpoint {path} is not a gpurl checkpoint" in err and "weights_only" not in err
