#!/usr/bin/env python
"""Training-iteration time of algorithm variants on one config, side by side: each variant's trainer is
built and warmed up (compiles), then the variants take turns, ``--iters`` iterations each per round,
so that a noisy machine slows them alike. Reports seconds per iteration (median over rounds), the
phase split, and each variant's ratio to the first.

    python bench/iteration_time.py                                  # ppo vs mappo on simple-tag
    python bench/iteration_time.py --variants ppo,mappo,ppo:gru,mappo:gru --preset simple-tag

Ends with ``RESULT {"bench": "iteration_time", "preset", "rows": [{"variant", "seconds_per_iteration",
"ratio", "phases"}]}``.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from _common import describe_machine, print_result
from gpurl.train import Trainer, build_config
from gpurl.train.process import configure_process


def variant_config(variant: str, preset: str, overrides: dict):
    algo, _, recurrent = variant.partition(":")
    values = {**overrides, "algo": algo, "recurrent": recurrent or "none"}
    if algo != "mappo":
        values["value_norm"] = False
    return build_config(preset, **values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="simple-tag")
    parser.add_argument("--variants", default="ppo,mappo", help="algo or algo:recurrent, comma-separated")
    parser.add_argument("--train-groups", default="adversary", help="comma-separated ('' = all)")
    parser.add_argument("--iters", type=int, default=5, help="iterations per variant per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch/Numba threads (0: the thread policy)")
    args = parser.parse_args()
    configure_process(args.threads, torch.device("cpu"))
    overrides = dict(device="cpu", iters=10_000, eval_episodes=0, progress=False, torch_threads=args.threads,
                     train_groups=tuple(g for g in args.train_groups.split(",") if g))
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    trainers = {v: Trainer(variant_config(v, args.preset, overrides)) for v in variants}
    print(f"machine: {describe_machine(torch.device('cpu'))}")
    for v, trainer in trainers.items():
        cfg = trainer.config
        print(f"{v}: preset {args.preset}, algo {cfg.algo}, recurrent {cfg.recurrent}, num_envs {cfg.num_envs}, "
              f"rollout_len {cfg.rollout_len}, epochs {cfg.epochs}, minibatches {cfg.minibatches}, "
              f"hidden {cfg.hidden}, train_groups {cfg.train_groups}; {trainer.backends()}")
        for _ in range(2):  # compiles
            trainer.iterate()
        trainer.timer.read()
    times = {v: [] for v in variants}
    phases = {v: {} for v in variants}
    for _ in range(args.rounds):
        for v, trainer in trainers.items():
            t0 = time.perf_counter()
            for _ in range(args.iters):
                trainer.iterate()
            times[v].append((time.perf_counter() - t0) / args.iters)
            for name, seconds in trainer.timer.read().items():
                phases[v][name] = phases[v].get(name, 0.0) + seconds / (args.rounds * args.iters)
    base = statistics.median(times[variants[0]])
    rows = []
    print(f"\n{'variant':<12}{'s/iteration':>12}{'ratio':>8}  phases (s/iteration)")
    for v in variants:
        median = statistics.median(times[v])
        split = {k: round(x, 4) for k, x in sorted(phases[v].items())}
        rows.append({"variant": v, "seconds_per_iteration": median, "ratio": median / base, "phases": split})
        print(f"{v:<12}{median:>12.4f}{median / base:>8.3f}  {split}")
    print_result({"bench": "iteration_time", "preset": args.preset, "iters": args.iters, "rounds": args.rounds,
                  "train_groups": overrides["train_groups"], "rows": rows})


if __name__ == "__main__":
    main()
