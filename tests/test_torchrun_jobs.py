"""Jobs under torchrun on gloo CPU processes (issue 25): elastic restarts, and two nodes over loopback.

Restarts: ``torchrun --max-restarts 2`` on 2 ranks, one rank SIGKILLed once, the job restarted by torchrun and
continued by ``--resume auto`` from the last checkpoint. Each case runs the same command as an uninterrupted
2-rank job (tests/elastic_worker.py runs ``gpurl train`` and kills one rank once, in torchrun's first attempt
only) and checks that the job completes, that its final parameters equal the uninterrupted job's bit for
bit, and that ``metrics.csv`` has every iteration exactly once. Kills: rank 1 in the rollout of iteration 3
(rank 0 then fails in its next collective), rank 1 in the learner's gradient all-reduces of iteration 3 (rank 0
is inside the collective), and rank 0 while writing the checkpoint of iteration 2 (the new
file's data written, the rename never done: the job continues from iteration 1's checkpoint and the
interrupted write's temp file is removed). The extra seconds of a killed job over the uninterrupted one are
printed (``-rA`` shows them).

Two nodes: two torchrun launches (``--nnodes 2``, one rank each, a c10d rendezvous on 127.0.0.1) run the
same job as the one-node 2-rank job and end with its parameters bit for bit; rank 0 alone writes the shared
log dir. A launch whose second node never joins fails within the rendezvous's join timeout, saying so.
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


def job_args(log_dir: Path) -> list[str]:
    """The job's command line after the script."""
    return [*TINY_ARGS, "--iters", str(ITERS), "--checkpoint-every", "1", "--dist", "data_parallel",
            "--log-dir", str(log_dir), "--resume", "auto"]


def job(log_dir: Path, kill: str | None, max_restarts: int) -> tuple[subprocess.CompletedProcess, float]:
    """The 2-rank job under torchrun; (its completed process, its wall seconds). Raises with the output when
    it fails."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--max-restarts={max_restarts}",
           f"--master_port={free_port()}", WORKER, *job_args(log_dir)]
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


def final_params(log_dir: Path) -> dict:
    return load_checkpoint(log_dir / "checkpoint.pt")["algo_state"]["nets"]


def assert_same_params(log_dir: Path, reference: Path) -> None:
    want, got = final_params(reference), final_params(log_dir)
    assert want.keys() == got.keys()
    for name in want:
        assert torch.equal(want[name], got[name]), name


def iterations_logged(log_dir: Path) -> list[int]:
    with open(log_dir / "metrics.csv", newline="") as f:
        return [int(row["iteration"]) for row in csv.DictReader(f)]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> tuple[Path, float]:
    log_dir = tmp_path_factory.mktemp("elastic") / "uninterrupted"
    _, seconds = job(log_dir, None, max_restarts=0)
    return log_dir, seconds


@pytest.mark.parametrize("kill,resumed_from", [("1:3:rollout", 2), ("1:3:allreduce", 2), ("0:2:checkpoint", 1)],
                         ids=["rank1-in-rollout", "rank1-in-allreduce", "rank0-in-checkpoint-write"])
def test_a_killed_rank_is_restarted_and_the_job_ends_as_if_never_killed(uninterrupted, tmp_path, kill,
                                                                         resumed_from):
    reference, reference_seconds = uninterrupted
    log_dir = tmp_path / "killed"
    done, seconds = job(log_dir, kill, max_restarts=2)
    record = json.loads((log_dir / "run.json").read_text())
    assert [start["from_iteration"] for start in record["starts"]] == [0, resumed_from], record["starts"]
    assert f"resuming {log_dir / 'checkpoint.pt'}" in done.stdout
    assert_same_params(log_dir, reference)
    assert iterations_logged(log_dir) == list(range(1, ITERS + 1))
    assert not list(log_dir.glob(".*.tmp")), "the interrupted write's temp file is removed on restart"
    print(f"\n{kill}: job {seconds:.1f} s, uninterrupted {reference_seconds:.1f} s: "
          f"{seconds - reference_seconds:.1f} s for the kill, the restart and the redone iterations")


# ---- two nodes over loopback -----------------------------------------------------------------------------


def node_command(port: int, *, join_timeout: int = 120) -> list[str]:
    """One node's launch: ``torchrun --nnodes 2 --nproc-per-node 1`` with a c10d rendezvous on 127.0.0.1."""
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1", "--max-restarts=0",
            "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=gpurl-two-nodes",
            f"--rdzv-conf=join_timeout={join_timeout}", "-m", "gpurl.train"]


def test_two_nodes_over_loopback_end_where_one_node_does(uninterrupted, tmp_path):
    reference, _ = uninterrupted
    log_dir = tmp_path / "two-nodes"
    cmd = [*node_command(free_port()), *job_args(log_dir)]
    nodes = [subprocess.Popen(cmd, env=worker_env(), cwd=REPO, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for _ in range(2)]
    outputs = [node.communicate(timeout=600) for node in nodes]
    for node, (out, err) in zip(nodes, outputs):
        assert node.returncode == 0, f"{out[-3000:]}\n{err[-5000:]}"
    assert sum("gpurl train: run" in out for out, _ in outputs) == 1      # one main rank prints and writes
    assert "world_size=2" in "".join(out for out, _ in outputs)
    assert len(json.loads((log_dir / "run.json").read_text())["starts"]) == 1
    assert_same_params(log_dir, reference)
    assert iterations_logged(log_dir) == list(range(1, ITERS + 1))


def test_a_node_that_never_joins_fails_the_launch_within_the_join_timeout(tmp_path):
    cmd = [*node_command(free_port(), join_timeout=10), *job_args(tmp_path / "alone")]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=worker_env(), cwd=REPO)
    seconds = time.perf_counter() - t0
    assert done.returncode != 0
    assert "RendezvousTimeoutError" in done.stderr, done.stderr[-3000:]
    assert seconds < 120, f"the lone node waited {seconds:.0f} s"
    assert not (tmp_path / "alone").exists()        # no worker started: nothing written
