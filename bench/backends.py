#!/usr/bin/env python
"""Acting and learning backends side by side: one trainer per backend pair, same config and seed, their
iterations alternating in this one process (so machine noise hits every backend alike).

    python bench/backends.py                                  # simple-tag and tag-small, eager vs compiled
    python bench/backends.py --presets simple-tag --iters 12 --pairs compiled/compiled,eager/compiled

A pair is ``POLICY_BACKEND/LEARNER_BACKEND`` (gpurl train's --policy-backend / --learner-backend).
The first ``--warmup`` iterations of every trainer (compilation, allocator warm-up) are not timed.
Prints the median seconds per iteration and per phase of each pair, the ratio to the first pair, and
ends with ``RESULT {json}``.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import describe_machine, print_result  # noqa: E402

from gpurl.train import Trainer, build_config  # noqa: E402
from gpurl.train.process import configure_process  # noqa: E402


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--presets", default="simple-tag,tag-small", help="comma-separated training presets")
    ap.add_argument("--pairs", default="compiled/compiled,eager/eager",
                    help="comma-separated POLICY_BACKEND/LEARNER_BACKEND pairs (the first is the ratios' basis)")
    ap.add_argument("--iters", type=int, default=10, help="timed iterations per trainer")
    ap.add_argument("--warmup", type=int, default=2, help="untimed iterations per trainer first")
    ap.add_argument("--num-envs", type=int, default=None, help="override the presets' num_envs")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args(argv)


def run_preset(preset: str, pairs: list[str], args) -> dict:
    trainers = {}
    for pair in pairs:
        acting, learning = pair.split("/")
        extra = {"num_envs": args.num_envs} if args.num_envs else {}
        cfg = build_config(preset, iters=args.warmup + args.iters + 1, eval_episodes=0, device=args.device,
                           seed=args.seed, policy_backend=acting, learner_backend=learning, **extra)
        trainers[pair] = Trainer(cfg)
    seconds = {pair: [] for pair in pairs}
    phases = {pair: {} for pair in pairs}
    for it in range(args.warmup + args.iters):
        for pair, trainer in trainers.items():  # alternate: every backend sees the same machine state
            t0 = time.perf_counter()
            trainer.read_losses(trainer.iterate())  # reads the statistics: the update has finished
            dt = time.perf_counter() - t0
            split = trainer.timer.read()
            if it >= args.warmup:
                seconds[pair].append(dt)
                for name, value in split.items():
                    phases[pair].setdefault(name, []).append(value)
    cfg = next(iter(trainers.values())).config
    out = {"num_envs": cfg.num_envs, "rollout_len": cfg.rollout_len, "num_agents": next(iter(trainers.values())).env.num_agents,
           "pairs": {}}
    basis = statistics.median(seconds[pairs[0]])
    p = cfg.algo_params
    print(f"\n{preset}: {cfg.num_envs} envs x {cfg.rollout_len} steps, {p.epochs} epochs x {p.minibatches} "
          f"minibatches, hidden {p.hidden}; median over {args.iters} alternating iterations")
    print(f"  {'acting/learning':22s} {'s/iter':>8s} {'vs ' + pairs[0]:>22s}   phases (ms/iter)")
    for pair in pairs:
        median = statistics.median(seconds[pair])
        split = {name: round(statistics.median(values) * 1e3, 1) for name, values in sorted(phases[pair].items())}
        backends = trainers[pair].algo.backends()
        out["pairs"][pair] = {"seconds_per_iteration": median, "phase_ms": split, "backends": backends,
                              "ratio_to_first": median / basis}
        print(f"  {pair:22s} {median:8.4f} {median / basis:21.3f}x   {split}")
    return out


def main(argv=None) -> dict:
    args = parse_args(argv)
    device = torch.device(args.device)
    configure_process(0, device)
    pairs = [p.strip() for p in args.pairs.split(",") if p.strip()]
    machine = describe_machine(device)
    print(f"machine: {machine}")
    print(f"config: presets={args.presets} pairs={pairs} iters={args.iters} warmup={args.warmup} seed={args.seed}")
    results = {preset: run_preset(preset, pairs, args) for preset in args.presets.split(",")}
    payload = {"bench": "backends", "device": str(device), "machine": machine, "iters": args.iters,
               "presets": results}
    print_result(payload)
    return payload


if __name__ == "__main__":
    main()
