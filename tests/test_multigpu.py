"""Distribution policies on gloo (CPU ranks): data_parallel and central_learner reproduce single-device
training, a 2-rank checkpoint resumes on 1 rank, a killed rank stops its peer with an error naming it.

Each multi-rank case is one real launch of bench/tag_ppo.py (torchrun, or ranks spawned by hand for
the fault test); the single-device reference runs in this process.
"""
from __future__ import annotations

import json
import signal
import threading
import time

import pytest
import torch

from dist_helpers import TINY_ARGS, spawn_ranks, torchrun
from gpurl.multigpu.launch import policy_name
from gpurl.multigpu.policies import DataParallel
from gpurl.train.checkpoint import load_checkpoint
from gpurl.train.cli import config_from_args
from gpurl.train.config import build_config
from gpurl.train.placement import EnvShard
from gpurl.train.run import resume_config, train

pytestmark = pytest.mark.cpu

ITERS = 3


def result_line(stdout: str) -> dict:
    lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, stdout[-2000:]
    return json.loads(lines[0].removeprefix("RESULT "))


def assert_same_parameters(a: dict, b: dict, atol: float = 1e-5) -> None:
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], atol=atol, rtol=0, msg=key)


@pytest.fixture(scope="module")
def single_run(tmp_path_factory):
    """The reference: one process, all 4 envs, ITERS iterations, and that run resumed to ITERS + 2.

    The continuation is a resume, not a fresh run of ITERS + 2: the learning rate anneals over the
    ``iters`` a run was started with, so a fresh longer run takes other steps from the first update on.
    """
    root = tmp_path_factory.mktemp("single")
    cfg = config_from_args([*TINY_ARGS, "--iters", str(ITERS), "--dist", "single", "--log-dir", str(root / "a")])
    train(cfg, say=lambda *a: None)
    short = load_checkpoint(root / "a" / "checkpoint.pt")
    longer = resume_config(short, {"iters": ITERS + 2, "log_dir": str(root / "b"), "dist": "single"})
    train(longer, short, say=lambda *a: None)
    return {"short": short, "long": load_checkpoint(root / "b" / "checkpoint.pt")}


@pytest.fixture(scope="module")
def data_parallel_run(tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("dp")
    done = torchrun(2, [*TINY_ARGS, "--iters", str(ITERS), "--dist", "data_parallel",
                        "--replication-check-every", "1", "--log-dir", str(log_dir)])
    return done, log_dir


def test_data_parallel_two_ranks_matches_single_device(single_run, data_parallel_run):
    done, log_dir = data_parallel_run
    result = result_line(done.stdout)
    assert (result["world_size"], result["dist"], result["num_envs"]) == (2, "data_parallel", 4)
    assert result["comm_bytes_per_iteration"] > 0
    saved = load_checkpoint(log_dir / "checkpoint.pt")
    assert (saved["world_size"], saved["iteration"]) == (2, ITERS)
    assert_same_parameters(saved["policies"], single_run["short"]["policies"])
    # The env state of both ranks, gathered in global env order, is the single run's.
    for name, tensor in single_run["short"]["env_state"].items():
        torch.testing.assert_close(saved["env_state"][name], tensor, atol=1e-5, rtol=0, msg=name)


def test_central_learner_two_ranks_matches_single_device(single_run, tmp_path):
    done = torchrun(2, [*TINY_ARGS, "--iters", str(ITERS), "--dist", "central_learner", "--max-staleness", "0",
                        "--log-dir", str(tmp_path)])
    result = result_line(done.stdout)
    assert (result["world_size"], result["dist"]) == (2, "central_learner")
    assert_same_parameters(load_checkpoint(tmp_path / "checkpoint.pt")["policies"], single_run["short"]["policies"])


def test_two_rank_checkpoint_resumes_on_one_rank(single_run, data_parallel_run, tmp_path):
    """Continuing the 2-rank checkpoint in one process for 2 more iterations lands where the single
    run of ITERS + 2 iterations does (the env state of both ranks was saved in global order)."""
    _, log_dir = data_parallel_run
    checkpoint = load_checkpoint(log_dir / "checkpoint.pt")
    cfg = resume_config(checkpoint, {"iters": ITERS + 2, "log_dir": str(tmp_path), "dist": "single"})
    result = train(cfg, checkpoint, say=lambda *a: None)
    assert (result["iterations"], result["world_size"]) == (ITERS + 2, 1)
    assert_same_parameters(load_checkpoint(tmp_path / "checkpoint.pt")["policies"], single_run["long"]["policies"])


def test_killed_rank_stops_its_peer_with_an_error_naming_it(tmp_path):
    timeout = 20
    procs = spawn_ranks(2, [*TINY_ARGS, "--iters", "100000", "--dist", "data_parallel", "--dist-timeout",
                            str(timeout), "--checkpoint-every", "0", "--log-dir", str(tmp_path)])
    rank0, rank1 = procs
    for p in procs:  # drain stdout so a full pipe never blocks a rank
        threading.Thread(target=p.stdout.read, daemon=True).start()
    try:
        # Rank 0 rewrites metrics.csv after every iteration (its progress lines are every iters/20):
        # kill rank 1 once two iterations are done, mid-run.
        deadline = time.monotonic() + 300
        while completed_iterations(tmp_path / "metrics.csv") < 2:
            assert rank0.poll() is None and rank1.poll() is None, rank0.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "the ranks did not finish two iterations in 300 s"
            time.sleep(0.2)
        rank1.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        code = rank0.wait(timeout=timeout + 60)
        elapsed = time.monotonic() - killed_at
        stderr = rank0.stderr.read()
    finally:
        for p in procs:
            p.kill()
    assert code != 0
    assert elapsed < timeout + 30, elapsed
    assert "rank 1" in stderr, stderr[-3000:]


def completed_iterations(csv_path) -> int:
    try:
        return max(0, len(csv_path.read_text().splitlines()) - 1)  # header + one row per iteration
    except FileNotFoundError:
        return 0


def test_env_shards_and_sample_localisation():
    """A global minibatch index over [T, E, n] maps into the shard that steps its env, in order."""
    T, E, n = 3, 6, 2
    global_rows = torch.arange(T * E * n).view(T, E, n)
    idx = torch.randperm(T * E * n, generator=torch.Generator().manual_seed(0))
    seen = []
    for lo, hi in ((0, 2), (2, 4), (4, 6)):
        shard = EnvShard(lo, hi, E)
        local_rows = global_rows[:, lo:hi].reshape(-1)
        local = shard.localize(idx, n)
        assert torch.equal(local_rows[local], idx[torch.isin(idx, local_rows)])
        seen.append(local_rows[local])
    assert sorted(torch.cat(seen).tolist()) == list(range(T * E * n))


def test_placement_errors_name_the_problem():
    cfg = config_from_args([*TINY_ARGS, "--iters", "1", "--dist", "single"])
    with pytest.raises(ValueError, match="started 2 ranks"):
        policy_name(cfg, 2)
    assert policy_name(config_from_args([*TINY_ARGS, "--iters", "1"]), 2) == "data_parallel"

    class TwoRanks:
        rank, world_size, bytes_sent = 1, 2, 0

    with pytest.raises(ValueError, match="num_envs=5 .* multiple of the world size 2"):
        DataParallel(TwoRanks()).env_shard(5)
    assert DataParallel(TwoRanks()).env_shard(6) == EnvShard(3, 6, 6)
    with pytest.raises(ValueError, match="dist must be"):
        build_config(iters=1, dist="ring")
