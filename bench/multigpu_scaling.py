#!/usr/bin/env python
"""Scaling of the distribution policies over 1..G devices: PPO on Tag launched with torchrun.

For each policy (data_parallel, central_learner) and world size W in 1..G:
- weak scaling: W x ``--envs-per-device`` envs in all (the same load per device);
- strong scaling: ``--global-envs`` envs in all, split over the W ranks.
Each cell is one ``torchrun --nproc_per_node=W bench/tag_ppo.py`` run of ``--iters`` iterations (the
first is warm-up and not timed); it reports end-to-end agent-steps/s and the bytes all ranks put on
the wire per iteration (gradients for data_parallel; trajectories and weights for central_learner).
On a machine without GPUs the ranks are CPU processes talking over gloo (one torch and one Numba thread
each, so W ranks use W cores): those figures are CPU figures and say so. Ends with ``RESULT {json}``.

    python bench/multigpu_scaling.py                    # G = GPUs present, else min(2, CPU cores)
    python bench/multigpu_scaling.py --max-world 4 --envs-per-device 256 --iters 6
    python bench/multigpu_scaling.py --worlds 1,2,4 --modes weak --backends eager   # no compile per process
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from _common import describe_machine, print_result

HERE = Path(__file__).resolve().parent


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cuda = torch.cuda.device_count()
    ap.add_argument("--max-world", type=int, default=cuda or min(2, os.cpu_count() or 1))
    ap.add_argument("--policies", default="data_parallel,central_learner")
    ap.add_argument("--preset", default="tag-small")
    ap.add_argument("--envs-per-device", type=int, default=64 if not cuda else 1000)
    ap.add_argument("--global-envs", type=int, default=None, help="strong scaling total (default: envs-per-device)")
    ap.add_argument("--rollout-len", type=int, default=32)
    ap.add_argument("--iters", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--modes", default="weak,strong", help="weak, strong or both")
    ap.add_argument("--worlds", default=None, help="world sizes to run (default: 1..max-world)")
    ap.add_argument("--backends", default="auto", choices=("auto", "eager"),
                    help="acting and learning backends (eager: no compile in each process)")
    return ap.parse_args()


def launch(world: int, policy: str, num_envs: int, args, device: str) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"gpurl-scaling-{policy}-w{world}-") as log_dir:  # logs unused
        return _launch(world, policy, num_envs, args, device, log_dir)


def _launch(world: int, policy: str, num_envs: int, args, device: str, log_dir: str) -> dict:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={world}",
           str(HERE / "tag_ppo.py"), "--preset", args.preset, "--dist", policy, "--num-envs", str(num_envs),
           "--rollout-len", str(args.rollout_len), "--iters", str(args.iters), "--eval-episodes", "0",
           "--checkpoint-every", "0", "--device", device, "--no-progress", "--policy-backend", args.backends,
           "--learner-backend", args.backends, "--log-dir", log_dir]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if device == "cpu":
        cmd += ["--torch-threads", "1"]
        env.update(OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return json.loads(lines[0].removeprefix("RESULT "))


def main():
    args = parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    machine = describe_machine(torch.device(device))
    label = "GPU" if device == "cuda" else "CPU (gloo processes, 1 core per rank)"
    global_envs = args.global_envs or args.envs_per_device
    print(f"machine: {machine}")
    print(f"measuring: PPO on {args.preset}, T={args.rollout_len}, {args.iters} iterations (1 warm-up), "
          f"world sizes {args.worlds or f'1..{args.max_world}'}, {args.modes} scaling, {args.backends} backends, "
          f"on {label}")
    rows = []
    for policy in args.policies.split(","):
        for mode in args.modes.split(","):
            base = None
            worlds = [int(w) for w in args.worlds.split(",")] if args.worlds else range(1, args.max_world + 1)
            for world in worlds:
                num_envs = args.envs_per_device * world if mode == "weak" else global_envs
                if num_envs % world:
                    continue
                r = launch(world, policy, num_envs, args, device)
                speed = r["agent_steps_per_s"]
                base = base or speed
                row = dict(policy=policy, mode=mode, world_size=world, num_envs=num_envs,
                           agent_steps_per_s=speed, speedup=speed / base, efficiency=speed / base / world,
                           comm_bytes_per_iteration=r["comm_bytes_per_iteration"],
                           phase_seconds=r["phase_seconds"])
                rows.append(row)
                print(f"{policy:16s} {mode:6s} W={world} envs={num_envs:6d}  {speed:10.4g} agent-steps/s  "
                      f"x{row['speedup']:.2f} vs W=1 (efficiency {row['efficiency']:.0%})  "
                      f"{row['comm_bytes_per_iteration'] / 1e6:.3f} MB/iteration on the wire", flush=True)
    print_result({"bench": "multigpu_scaling", "device": device, "label": label, "machine": machine,
                  "preset": args.preset, "rollout_len": args.rollout_len, "iters": args.iters,
                  "backends": args.backends, "rows": rows})


if __name__ == "__main__":
    main()
