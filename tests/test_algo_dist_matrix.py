"""Every registered algorithm under every distribution policy, on gloo with 2 ranks (CPU processes).

An algorithm is written once; a distribution policy decides where its fragments run. So for each
algorithm of ``gpurl.algos.ALGORITHMS``:
- ``data_parallel`` on 2 ranks x E envs ends with the weights of ``single`` on 2E envs;
- ``central_learner`` with ``--max-staleness 0`` ends with them too;
compared after 2 iterations to float tolerance (1e-5), together with the env state of all ranks in
global env order. A new algorithm enters the matrix by registering. The 2-rank data-parallel
checkpoint of PPO also resumes in one process where the single run does.

Each multi-rank case is one real ``torchrun`` launch of bench/tag_ppo.py; the single-device
references run in this process.
"""
from __future__ import annotations

import json

import pytest
import torch

from dist_helpers import TINY_ARGS, torchrun
from gpurl.algos import ALGORITHMS
from gpurl.multigpu import POLICIES
from gpurl.train.checkpoint import load_checkpoint
from gpurl.train.cli import config_from_args
from gpurl.train.run import resume_config, train

pytestmark = pytest.mark.cpu

ITERS = 2
MULTI_RANK = sorted(name for name in POLICIES if name != "single")
MATRIX = [(algo, dist) for algo in sorted(ALGORITHMS) for dist in MULTI_RANK]


def result_line(stdout: str) -> dict:
    lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, stdout[-2000:]
    return json.loads(lines[0].removeprefix("RESULT "))


def assert_same_tensors(a: dict, b: dict, atol: float = 1e-5) -> None:
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], atol=atol, rtol=0, msg=key)


def algo_args(algo: str) -> list[str]:
    return [*TINY_ARGS, "--algo", algo, "--iters", str(ITERS)]


@pytest.fixture(scope="module")
def single_runs(tmp_path_factory):
    """Per algorithm: one process, all 4 envs, ITERS iterations (and, for PPO, that run resumed to
    ITERS + 2: a resume, not a fresh longer run, since the learning rate anneals over ``iters``)."""
    runs = {}
    for algo in sorted(ALGORITHMS):
        root = tmp_path_factory.mktemp(f"single-{algo}")
        train(config_from_args([*algo_args(algo), "--dist", "single", "--log-dir", str(root / "a")]),
              say=lambda *a: None)
        runs[algo] = {"short": load_checkpoint(root / "a" / "checkpoint.pt")}
        if algo == "ppo":
            short = runs[algo]["short"]
            longer = resume_config(short, {"iters": ITERS + 2, "log_dir": str(root / "b"), "dist": "single"})
            train(longer, short, say=lambda *a: None)
            runs[algo]["long"] = load_checkpoint(root / "b" / "checkpoint.pt")
    return runs


@pytest.fixture(scope="module")
def multi_rank_runs(tmp_path_factory):
    """Launched lazily, once per (algorithm, policy) of the matrix."""
    done = {}

    def run(algo: str, dist: str):
        if (algo, dist) not in done:
            log_dir = tmp_path_factory.mktemp(f"{algo}-{dist}")
            extra = ["--replication-check-every", "1"] if dist == "data_parallel" else ["--max-staleness", "0"]
            out = torchrun(2, [*algo_args(algo), "--dist", dist, *extra, "--log-dir", str(log_dir)])
            done[algo, dist] = (result_line(out.stdout), load_checkpoint(log_dir / "checkpoint.pt"))
        return done[algo, dist]

    return run


def test_the_matrix_covers_every_algorithm_and_policy():
    assert {"ppo", "a2c"} <= set(ALGORITHMS)
    assert set(MULTI_RANK) == {"data_parallel", "central_learner"}


@pytest.mark.parametrize("algo,dist", MATRIX, ids=[f"{a}-{d}" for a, d in MATRIX])
def test_two_ranks_end_where_one_device_does(algo, dist, single_runs, multi_rank_runs):
    result, saved = multi_rank_runs(algo, dist)
    reference = single_runs[algo]["short"]
    assert (result["world_size"], result["dist"], result["algo"], result["num_envs"]) == (2, dist, algo, 4)
    assert result["comm_bytes_per_iteration"] > 0
    assert (saved["world_size"], saved["iteration"], saved["algorithm"]) == (2, ITERS, algo)
    assert_same_tensors(saved["algo_state"]["nets"], reference["algo_state"]["nets"])
    # The env state of both ranks, gathered in global env order, is the single run's.
    assert_same_tensors(saved["env_state"], reference["env_state"])


def test_two_rank_checkpoint_resumes_on_one_rank(single_runs, multi_rank_runs, tmp_path):
    """Continuing PPO's 2-rank data-parallel checkpoint in one process for 2 more iterations lands where
    the single run resumed to ITERS + 2 does (the env state of both ranks was saved in global order)."""
    _, checkpoint = multi_rank_runs("ppo", "data_parallel")
    cfg = resume_config(checkpoint, {"iters": ITERS + 2, "log_dir": str(tmp_path), "dist": "single"})
    result = train(cfg, checkpoint, say=lambda *a: None)
    assert (result["iterations"], result["world_size"]) == (ITERS + 2, 1)
    assert_same_tensors(load_checkpoint(tmp_path / "checkpoint.pt")["algo_state"]["nets"],
                        single_runs["ppo"]["long"]["algo_state"]["nets"])
