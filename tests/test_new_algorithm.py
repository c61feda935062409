"""CPU tier: an algorithm written outside gpurl (tests/reinforce_algo.py: REINFORCE with a learned baseline)
registers itself and gets everything a built-in algorithm has: its flags and their checks from its own
parameters' dataclass, training, checkpoints and resume (and, in tests/test_algo_dist_matrix.py, every
distribution policy), with no line of gpurl changed for it.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

import reinforce_algo
from dist_helpers import TINY_ARGS
from gpurl.algos import ALGORITHMS
from gpurl.train.checkpoint import load_checkpoint
from gpurl.train.cli import build_parser, config_from_args
from gpurl.train.resume import resume_config
from gpurl.train.run import train

pytestmark = pytest.mark.cpu

#: TINY_ARGS without PPO's own parameters (REINFORCE reads neither epochs nor minibatches).
ARGS = [a for k, a in enumerate(TINY_ARGS) if a not in ("--epochs", "--minibatches")
        and TINY_ARGS[k - 1] not in ("--epochs", "--minibatches")]


def test_it_imports_only_what_an_algorithm_in_gpurl_algos_may():
    """The layers below gpurl.algos (docs/design.md): it could be dropped into gpurl/algos as it is."""
    tree = ast.parse(Path(reinforce_algo.__file__).read_text())
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    gpurl_modules = {m for m in modules if m.startswith("gpurl")}
    assert gpurl_modules and all(m.split(".")[1] in ("algos", "storage", "fusion", "envs", "multigpu")
                                 for m in gpurl_modules), gpurl_modules


def test_returns_against_a_hand_computed_case():
    reward = torch.tensor([[[1.0]], [[2.0]], [[3.0]]])          # T=3, E=1, n=1
    ended = torch.tensor([[False], [True], [False]])            # the episode ends at step 1
    last = torch.tensor([[10.0]])
    G = reinforce_algo.returns(reward, ended, last, 0.5)
    # step 2: 3 + 0.5 * 10 = 8; step 1 ended: 2; step 0: 1 + 0.5 * 2 = 2
    assert G.flatten().tolist() == [2.0, 2.0, 8.0]


def test_its_flag_is_generated_checked_and_others_are_refused(capsys):
    assert ALGORITHMS["reinforce"] is reinforce_algo.Reinforce
    assert "--baseline-coef" in build_parser().format_help()
    cfg = config_from_args([*ARGS, "--algo", "reinforce", "--baseline-coef", "0.25", "--iters", "1"])
    assert type(cfg.algo_params) is reinforce_algo.ReinforceParams and cfg.algo_params.baseline_coef == 0.25
    for flags, message in ((["--baseline-coef", "-1"], "config: baseline_coef=-1.0 is out of range; allowed: >= 0"),
                           (["--epochs", "3"], "epochs=3 is not read by algo 'reinforce' (read by: a2c, mappo, ppo)")):
        with pytest.raises(SystemExit):
            config_from_args([*ARGS, "--algo", "reinforce", "--iters", "1", *flags])
        assert message in capsys.readouterr().err
    with pytest.raises(SystemExit):  # another algorithm does not read its parameter either
        config_from_args([*ARGS, "--algo", "ppo", "--baseline-coef", "0.25", "--iters", "1"])
    assert "baseline_coef=0.25 is not read by algo 'ppo' (read by: reinforce)" in capsys.readouterr().err


def test_it_trains_checkpoints_and_resumes_where_a_longer_run_ends(tmp_path):
    def run(iters: int, log_dir: Path, checkpoint=None) -> dict:
        args = [*ARGS, "--algo", "reinforce", "--iters", str(iters), "--log-dir", str(log_dir)]
        cfg = config_from_args(args) if checkpoint is None else resume_config(
            checkpoint, {"iters": iters, "log_dir": str(log_dir)})
        train(cfg, checkpoint, say=lambda *a: None)
        return load_checkpoint(log_dir / "checkpoint.pt")

    whole = run(3, tmp_path / "whole")
    first = run(2, tmp_path / "first")
    before = first["algo_state"]["nets"]
    assert any(not torch.equal(before[k], whole["algo_state"]["nets"][k]) for k in before)  # it learned
    assert first["config"]["algo_params"]["baseline_coef"] == 0.5
    resumed = run(3, tmp_path / "resumed", first)
    for key, value in whole["algo_state"]["nets"].items():
        torch.testing.assert_close(resumed["algo_state"]["nets"][key], value, rtol=0, atol=0)
