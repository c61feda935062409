#!/usr/bin/env python
"""Restart overhead of an elastic job: seconds from a rank's SIGKILL to the first iteration the restarted
job completes, under ``torchrun --max-restarts`` with ``--resume auto`` (gloo CPU processes).

    python bench/restart_overhead.py                               # tag-small (the CPU default), 2 ranks
    python bench/restart_overhead.py --preset tag-small --kill 1:6:rollout --iters 10

The job is tests/elastic_worker.py (``gpurl train`` that kills one rank once, in torchrun's first attempt;
``--kill RANK:ITERATION:rollout|checkpoint``), with the preset's defaults but ``--checkpoint-every``. Each
line the job prints is timestamped as it arrives. Reported: ``kill_to_resumed_s`` (the kill to the
restarted run's "resuming" line: torchrun noticing, new processes, imports, rendezvous, loading the
checkpoint), ``kill_to_first_iteration_s`` (to its first completed iteration), beside what the first
attempt took from its start line to its first iteration (the warm-up every start pays: loading compiled
code and env builds), the median seconds of an iteration before the kill, and the iterations redone. CPU figures on a CPU machine. Ends with
``RESULT {json}``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests"))  # the job's worker lives there, and the port helper of the torchrun tests

from _common import print_result  # noqa: E402
from dist_helpers import free_port  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="tag-small")
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--iters", type=int, default=8)
    ap.add_argument("--checkpoint-every", default="2")
    ap.add_argument("--kill", default="1:5:rollout", help="RANK:ITERATION:rollout|checkpoint")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        stamp = Path(tmp) / "killed_at"
        env = dict(os.environ, GPURL_TEST_KILL=args.kill, GPURL_TEST_KILL_STAMP=str(stamp), PYTHONUNBUFFERED="1",
                   OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "tests"), env.get("PYTHONPATH", "")])
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={args.world}", "--max-restarts=1",
               f"--master_port={free_port()}", str(REPO / "tests" / "elastic_worker.py"), "--preset", args.preset,
               "--iters", str(args.iters), "--checkpoint-every", args.checkpoint_every, "--eval-episodes", "0",
               "--device", "cpu", "--torch-threads", "1", "--no-progress", "--dist", "data_parallel",
               "--log-every", "1", "--log-dir", str(Path(tmp) / "run"), "--resume", "auto"]
        print("command:", " ".join(cmd), flush=True)
        lines = []
        t0 = time.time()
        with subprocess.Popen(cmd, env=env, cwd=REPO, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT) as job:
            for line in job.stdout:
                lines.append((time.time(), line.rstrip()))
        if job.returncode != 0:
            print("\n".join(text for _, text in lines[-40:]))
            raise SystemExit(f"the job failed ({job.returncode})")
        killed_at = float(stamp.read_text())
    iters = [(t, text) for t, text in lines if text.startswith("iter ")]
    before = [t for t, _ in iters if t < killed_at]
    started = next(t for t, text in lines if text.startswith("gpurl train: run"))
    resumed = next(t for t, text in lines if t > killed_at and "resuming" in text)
    first_after = next((t, text) for t, text in iters if t > killed_at)
    steps = [b - a for a, b in zip(before, before[1:])]
    done_before = int(next(text for t, text in reversed(iters) if t < killed_at).split()[1].split("/")[0])
    resumed_iteration = int(first_after[1].split()[1].split("/")[0]) - 1
    payload = dict(bench="restart_overhead", preset=args.preset, world=args.world, kill=args.kill,
                   checkpoint_every=args.checkpoint_every, iters=args.iters,
                   kill_to_resumed_s=resumed - killed_at, kill_to_first_iteration_s=first_after[0] - killed_at,
                   fresh_start_to_first_iteration_s=iters[0][0] - started,
                   iteration_s=statistics.median(steps) if steps else None,
                   iterations_redone=done_before - resumed_iteration, job_s=lines[-1][0] - t0,
                   device="cpu (gloo processes)")
    for key, value in payload.items():
        print(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}")
    print_result(payload)


if __name__ == "__main__":
    main()
