"""Multi-rank machinery on gloo (CPU ranks): a killed rank stops its peer with an error naming it, env
shards and sample localisation, and the errors of a misconfigured launch. (Every algorithm under
every distribution policy: tests/test_algo_dist_matrix.py.)
"""
from __future__ import annotations

import signal
import threading
import time

import pytest
import torch

from dist_helpers import TINY_ARGS, spawn_ranks
from gpurl.multigpu.placement import EnvShard
from gpurl.multigpu.policies import DataParallel
from gpurl.multigpu.process_group import policy_name
from gpurl.train.config import build_config

pytestmark = pytest.mark.cpu


def test_killed_rank_stops_its_peer_with_an_error_naming_it(tmp_path):
    timeout = 20
    procs = spawn_ranks(2, [*TINY_ARGS, "--iters", "100000", "--dist", "data_parallel", "--dist-timeout",
                            str(timeout), "--checkpoint-every", "0", "--log-dir", str(tmp_path)])
    rank0, rank1 = procs
    for p in procs:  # drain stdout so a full pipe never blocks a rank
        threading.Thread(target=p.stdout.read, daemon=True).start()
    try:
        # Rank 0 appends a row to metrics.csv after every iteration (its progress lines are every iters/20):
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
    with pytest.raises(ValueError, match="started 2 ranks"):
        policy_name("single", 2)
    assert policy_name("auto", 2) == "data_parallel" and policy_name("auto", 1) == "single"

    class TwoRanks:
        rank, world_size, bytes_sent = 1, 2, 0

    with pytest.raises(ValueError, match="num_envs=5 .* multiple of the world size 2"):
        DataParallel(TwoRanks()).env_shard(5)
    assert DataParallel(TwoRanks()).env_shard(6) == EnvShard(3, 6, 6)
    with pytest.raises(ValueError, match="dist must be"):
        build_config(iters=1, dist="ring")
