#!/usr/bin/env python
"""Training-iteration time of algorithm variants on one config, side by side: each variant's trainer is
built and warmed up (compiles; on CUDA the graph captures), then the variants take turns, ``--iters``
iterations each per round, so that a noisy machine slows them alike. Reports seconds per iteration (median
over rounds, with a device sync at the end of each turn), env-steps/s, the phase split, and each variant's
ratio to the first.

On CUDA it also checks and counts what the GPU-first design promises: every timed iteration runs under
``torch.cuda.set_sync_debug_mode("error")`` (a host sync raises; the variant is then reported as syncing),
says what a CUDA graph captures (the whole iteration, or the rollout), and counts the kernel and memory
nodes per env step of the variant's rollout captured on its own (``--count-nodes``).

    python bench/iteration_time.py                                  # ppo vs mappo on simple-tag (CPU)
    python bench/iteration_time.py --variants ppo,mappo,ppo:gru,mappo:gru --preset simple-tag
    python bench/iteration_time.py --device cuda --variants ppo,mappo,qmix --num-envs 4096 --rollout-len 128
    python bench/iteration_time.py --variants ppo,ppo@clip_vloss=true       # one config value against another

Ends with ``RESULT {"bench": "iteration_time", "preset", "device", "rows": [{"variant",
"seconds_per_iteration", "env_steps_per_s", "ratio", "phases", "syncs", "cuda_graph", "nodes_per_step"}]}``.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
import statistics
import tempfile
import time
from pathlib import Path

import torch

from _common import describe_machine, print_result, sync
from gpurl.train import Trainer, build_config
from gpurl.train.process import configure_process


def variant_config(variant: str, preset: str, overrides: dict):
    """``algo[:recurrent][@field=value...]``: the values after ``@`` are JSON (``true``, ``3``, ``1e-3``) or
    else strings, set over the preset and the run's overrides."""
    name, *settings = variant.split("@")
    algo, _, recurrent = name.partition(":")
    values = {**overrides, "algo": algo, **({"recurrent": recurrent} if recurrent else {})}
    for setting in settings:
        field, sep, text = setting.partition("=")
        if not sep:
            raise SystemExit(f"--variants: {setting!r} in {variant!r} is not field=value")
        try:
            values[field] = json.loads(text)
        except json.JSONDecodeError:
            values[field] = text
    return build_config(preset, **values)


def rollout_nodes_per_step(trainer: Trainer) -> float | None:
    """Kernel and memory nodes per env step of the trainer's rollout captured on its own (CUDA)."""
    if trainer.device.type != "cuda" or trainer.random_actor.groups:
        return None
    sync(trainer.device)
    graph = torch.cuda.CUDAGraph()
    graph.enable_debug_mode()
    with torch.cuda.graph(graph):
        trainer._rollout_steps(timed=False)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rollout.dot"
        graph.debug_dump(str(path))
        nodes = len(re.findall(r"(KERNEL|MEMSET|MEMCPY)", path.read_text()))
    return nodes / trainer.config.rollout_len


def timed_turn(trainer: Trainer, iters: int) -> tuple[float, bool]:
    """Seconds per iteration over ``iters`` iterations (device-synced at the end), and whether any iteration
    synced with the host (CUDA: under set_sync_debug_mode("error"))."""
    device = trainer.device
    sync(device)
    synced = False
    t0 = time.perf_counter()
    if device.type == "cuda":
        torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(iters):
            trainer.iterate()
    except RuntimeError as err:
        if "synchroniz" not in str(err):
            raise
        synced = True
    finally:
        if device.type == "cuda":
            torch.cuda.set_sync_debug_mode("default")
    sync(device)
    return (time.perf_counter() - t0) / iters, synced


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="simple-tag")
    parser.add_argument("--variants", default="ppo,mappo",
                        help="algo[:recurrent][@field=value...], comma-separated")
    parser.add_argument("--train-groups", default="adversary", help="comma-separated ('' = all)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--num-envs", type=int, default=None, help="default: the preset's")
    parser.add_argument("--rollout-len", type=int, default=None, help="default: the preset's")
    parser.add_argument("--iters", type=int, default=5, help="iterations per variant per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=3, help="untimed iterations per variant (compile, capture)")
    parser.add_argument("--threads", type=int, default=0, help="torch/Numba threads (0: the thread policy)")
    parser.add_argument("--count-nodes", action=argparse.BooleanOptionalAction, default=True,
                        help="CUDA: count the graph nodes per env step of each variant's rollout")
    args = parser.parse_args()
    device = torch.device(args.device)
    configure_process(args.threads, device)
    overrides = dict(device=args.device, iters=10_000, eval_episodes=0, progress=False, torch_threads=args.threads,
                     train_groups=tuple(g for g in args.train_groups.split(",") if g))
    for key in ("num_envs", "rollout_len"):
        if getattr(args, key):
            overrides[key] = getattr(args, key)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    trainers = {v: Trainer(variant_config(v, args.preset, overrides)) for v in variants}
    print(f"machine: {describe_machine(device)}")
    nodes = {}
    for v, trainer in trainers.items():
        cfg = trainer.config
        params = " ".join(f"{k}={val}" for k, val in dataclasses.asdict(cfg.algo_params).items())
        print(f"{v}: preset {args.preset}, algo {cfg.algo}, num_envs {cfg.num_envs}, rollout_len {cfg.rollout_len}, "
              f"train_groups {cfg.train_groups}; {type(cfg.algo_params).__name__}: {params}; {trainer.backends()}")
        for _ in range(args.warmup):  # compiles; on CUDA the second captures
            trainer.iterate()
        nodes[v] = rollout_nodes_per_step(trainer) if args.count_nodes else None
        trainer.timer.read()
    times = {v: [] for v in variants}
    synced = {v: False for v in variants}
    phases = {v: {} for v in variants}
    for _ in range(args.rounds):
        for v, trainer in trainers.items():
            seconds, did_sync = timed_turn(trainer, args.iters)
            times[v].append(seconds)
            synced[v] |= did_sync
            for name, secs in trainer.timer.read().items():
                phases[v][name] = phases[v].get(name, 0.0) + secs / (args.rounds * args.iters)
    base = statistics.median(times[variants[0]])
    rows = []
    print(f"\n{'variant':<12}{'s/iteration':>12}{'env-steps/s':>14}{'ratio':>8}{'syncs':>7}{'graph':>11}"
          f"{'nodes/step':>11}  phases (s/iteration)")
    for v, trainer in trainers.items():
        cfg = trainer.config
        median = statistics.median(times[v])
        graph = ("iteration" if trainer.graphed_iteration else "rollout" if trainer.graphed else "none")
        split = {k: round(x, 4) for k, x in sorted(phases[v].items())}
        row = {"variant": v, "seconds_per_iteration": median, "env_steps_per_s": cfg.num_envs * cfg.rollout_len / median,
               "ratio": median / base, "phases": split, "syncs": synced[v] if device.type == "cuda" else None,
               "cuda_graph": graph if device.type == "cuda" else None, "nodes_per_step": nodes[v]}
        rows.append(row)
        node_text = "-" if nodes[v] is None else f"{nodes[v]:.2f}"
        sync_text = "-" if row["syncs"] is None else ("YES" if row["syncs"] else "none")
        print(f"{v:<12}{median:>12.4f}{row['env_steps_per_s']:>14,.0f}{median / base:>8.3f}{sync_text:>7}"
              f"{graph if device.type == 'cuda' else '-':>11}{node_text:>11}  {split}")
    print_result({"bench": "iteration_time", "preset": args.preset, "device": str(device), "iters": args.iters,
                  "rounds": args.rounds, "train_groups": overrides["train_groups"], "rows": rows,
                  "machine": describe_machine(device)})


if __name__ == "__main__":
    main()
