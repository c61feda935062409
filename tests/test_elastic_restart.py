"""Elastic restarts (issue 25): ``torchrun --max-restarts 2`` on 2 gloo ranks, one rank SIGKILLed once, the job
restarted by torchrun and continued by ``--resume auto`` from the last checkpoint.

Each case runs the same command as an uninterrupted 2-rank job (tests/elastic_worker.py runs ``gpurl train``
and kills one rank once, in torchrun's first attempt only) and checks that the job completes, that its final
parameters equal the uninterrupted job's bit for bit, and that ``metrics.csv`` has every iteration exactly
once. Kills: rank 1 in the rollout of iteration 3 (rank 0 then fails in its next collective), and rank 0
while writing the checkpoint of iteration 2 (the new file's data written, the rename never done: the job
continues from iteration 1's checkpoint and the interrupted write's temp file is removed). The extra
seconds of a killed job over the uninterrupted one are printed (``-rA`` shows them).
"""
from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from dist_helpers import REPO, TINY_ARGS, free_port, worker_env
from gpurl.train.checkpoint import load_checkpoint

pytestmark = pytest.mark.cpu

ITERS = 4
WORKER = str(REPO / "tests" / "elastic_worker.py")


def job(log_dir: Path, kill: str | None, max_restarts: int) -> tuple[subprocess.CompletedProcess, float]:
    """The 2-rank job under torchrun; (its completed process, its wall seconds). Raises with the output when
    it fails."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--max-restarts={max_restarts}",
           f"--master_port={free_port()}", WORKER, *TINY_ARGS, "--iters", str(ITERS), "--checkpoint-every", "1",
           "--dist", "data_parallel", "--log-dir", str(log_dir), "--resume", "auto"]
    env = worker_env()
    env.pop("GPURL_TEST_KILL", None)
    if kill is not None:
        env["GPURL_TEST_KILL"] = kill
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}")
    return done, seconds


def iterations_logged(log_dir: Path) -> list[int]:
    with open(log_dir / "metrics.csv", newline="") as f:
        return [int(row["iteration"]) for row in csv.DictReader(f)]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> tuple[Path, float]:
    log_dir = tmp_path_factory.mktemp("elastic") / "uninterrupted"
    _, seconds = job(log_dir, None, max_restarts=0)
    return log_dir, seconds


@pytest.mark.parametrize("kill,resumed_from", [("1:3:rollout", 2), ("0:2:checkpoint", 1)],
                         ids=["rank1-in-rollout", "rank0-in-checkpoint-write"])
def test_a_killed_rank_is_restarted_and_the_job_ends_as_if_never_killed(uninterrupted, tmp_path, kill,
                                                                         resumed_from):
    reference, reference_seconds = uninterrupted
    log_dir = tmp_path / "killed"
    done, seconds = job(log_dir, kill, max_restarts=2)
    record = json.loads((log_dir / "run.json").read_text())
    assert [start["from_iteration"] for start in record["starts"]] == [0, resumed_from], record["starts"]
    assert f"resuming {log_dir / 'checkpoint.pt'}" in done.stdout
    want = load_checkpoint(reference / "checkpoint.pt")["algo_state"]["nets"]
    got = load_checkpoint(log_dir / "checkpoint.pt")["algo_state"]["nets"]
    assert want.keys() == got.keys()
    for name in want:
        assert torch.equal(want[name], got[name]), name
    assert iterations_logged(log_dir) == list(range(1, ITERS + 1))
    assert not list(log_dir.glob(".*.tmp")), "the interrupted write's temp file is removed on restart"
    print(f"\n{kill}: job {seconds:.1f} s, uninterrupted {reference_seconds:.1f} s: "
          f"{seconds - reference_seconds:.1f} s for the kill, the restart and the redone iterations")
