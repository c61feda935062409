"""Usage errors of ``gpurl train`` (issue 40): every mistake in what the user typed prints one line naming
what was wrong, exits with status 2 and writes nothing into the log dir (gpurl/train/cli.py; the errors are
ParameterError, InsufficientMemory and the config's ValueErrors).

Each case was a traceback with exit status 1, a crash, a hang or a flag silently ignored on main at 7e58601.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from gpurl.envs.params import ParameterError
from gpurl.multigpu.policies import DataParallel
from gpurl.train.cli import main as cli_main
from gpurl.train.threads import max_threads

pytestmark = pytest.mark.cpu

TINY = ["--preset", "simple-tag", "--num-envs", "4", "--rollout-len", "8", "--iters", "1", "--eval-episodes", "0",
        "--device", "cpu", "--policy-backend", "eager", "--learner-backend", "eager", "--no-progress",
        "--torch-threads", "1"]

#: (flags, what the error line must hold)
CASES = {
    "unknown env": (["--env", "nope"], "unknown env 'nope'; registered envs:"),
    "empty env name": (["--env", ""], "unknown env ''"),
    "device gpu0": (["--device", "gpu0"], "device must be 'cpu', 'cuda', 'cuda:N' or None, got 'gpu0'"),
    "triton acting on the CPU": (["--policy-backend", "triton"], "policy_backend='triton' runs on CUDA"),
    "unknown train group": (["--train-groups", "nope"], "train_groups names unknown group(s) ['nope']"),
    "unknown env param": (["--env-param", "nope=1"], "simple_tag got an unknown parameter 'nope'"),
    "qmix with MultiDiscrete actions": (["--algo", "qmix", "--env", "tag_continuous", "--env-param", "num_taggers=1"],
                                        "act in Discrete spaces"),
    "env param owned by the trainer": (["--env-param", "global_state=False"],
                                       "env_params 'global_state' is set by the algorithm"),
    "q flag with ppo": (["--algo", "ppo", "--q-batch", "3"], "q_batch=3 is not read by algo 'ppo' (read by: iddpg, iql, isac, maddpg, masac, matd3, qmix, vdn)"),
    "mappo flags with a2c": (["--algo", "a2c", "--epochs", "7", "--no-critic-agent-id", "--value-norm"],
                             "critic_agent_id=False is not read by algo 'a2c' (read by: mappo); value_norm=True is not "
                             "read"),
    "value_norm with iql": (["--algo", "iql", "--value-norm"], "value_norm=True is not read by algo 'iql'"),
    "minibatches past int64": (["--minibatches", "99999999999999999999"],
                               "minibatches (99999999999999999999) must be <= the samples of a one-agent group"),
    "minibatches past the samples": (["--minibatches", "100000"], "num_envs x rollout_len = 32"),
    "eval episodes without end": (["--eval-episodes", "1000000000000"],
                                  "eval_episodes=1000000000000 is out of range; allowed: in [0, 1000000]"),
    "networks that cannot fit": (["--hidden", "100000000,100000000"], "pass smaller --hidden widths"),
    "threads past the CPUs": (["--torch-threads", "100000"], f"this machine has {max_threads()} CPUs"),
    "empty resume": (["--resume", ""], "argument --resume: takes a checkpoint file, a run dir holding one, or 'auto'"),
    "resume of a dir without checkpoint": (["--resume", "{tmp}"], "the directory holds no checkpoint"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_usage_mistake_is_one_line_exit_2_and_nothing_written(case, tmp_path, capsys):
    flags, expected = CASES[case]
    flags = [f.replace("{tmp}", str(tmp_path)) for f in flags]
    log_dir = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        cli_main([*TINY, *flags, "--log-dir", str(log_dir)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if ": error: " in line]
    assert len(errors) == 1 and expected in errors[0], err
    assert "Traceback" not in err
    assert not log_dir.exists()


def test_cuda_without_a_cuda_device_is_a_usage_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    with pytest.raises(SystemExit) as exit_info:
        cli_main([*TINY, "--device", "cuda", "--log-dir", str(tmp_path / "run")])
    assert exit_info.value.code == 2
    assert "device='cuda' requested but no CUDA device is usable here" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_wandb_mode_that_wandb_refuses_is_named_before_anything_is_written(tmp_path, capsys, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "sideways")
    with pytest.raises(SystemExit) as exit_info:
        cli_main([*TINY, "--wandb", "--wandb-mode", "offline", "--log-dir", str(tmp_path / "run")])
    assert exit_info.value.code == 2
    assert "--wandb: $WANDB_MODE is 'sideways', and W&B takes one of" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_envs_that_do_not_split_over_the_ranks_are_a_usage_error():
    # 7 envs on 2 data-parallel ranks: a ParameterError, which gpurl train reports as a usage error
    policy = DataParallel(comm=SimpleNamespace(world_size=2, rank=0), device=torch.device("cpu"))
    with pytest.raises(ParameterError, match="num_envs=7 .global. must be a multiple of the world size 2"):
        policy.env_shard(7)


def test_values_equal_to_the_defaults_or_implied_are_no_mistake(tmp_path):
    from gpurl.train.config import build_config

    assert build_config("simple-tag", algo="a2c", value_norm=False).algo_params.epochs == 1  # MAPPO's default
    assert build_config("simple-tag", algo="iql", recurrent="none", q_batch=3).algo_params.q_batch == 3
    assert build_config("simple-tag", minibatches=50 * 256).algo_params.minibatches == 50 * 256  # the bound itself
    with pytest.raises(ValueError, match="epochs=1 is not read by algo 'iql'"):  # PPO's 4, A2C's 1: no one default
        build_config("simple-tag", algo="iql", epochs=1)


def test_unknown_env_names_the_command_that_registers_one_and_a_chosen_device_prints_nothing(capsys, caplog):
    from gpurl.envs.registry import make, resolve_device

    with pytest.raises(ParameterError, match=r"registered by importing its module: gpurl train --env-module PATH\.py"):
        make("nope", num_envs=1, device="cpu")
    with caplog.at_level("INFO", logger="gpurl"):
        chosen = resolve_device(None)
    assert capsys.readouterr().err == ""  # said only to whoever asks the "gpurl" logger
    assert f"device=None -> using {chosen}" in caplog.text
