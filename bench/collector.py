#!/usr/bin/env python
"""Frames per second of TorchRL's data collector over gpurl's TorchRL adapter and over TorchRL's ``VmasEnv``, the
same collector, the same random policy, the same scenario, side by side.

A frame is one env step of one env (TorchRL's definition: a batch of ``num_envs`` envs x T steps is
``num_envs * T`` frames, counted from each batch's own size); frames/s is the frames of N batches over the
time the collector takes to hand them out (policy, steps, resets of ended envs, stacking the batch), the
device synchronised before the clock is read. Warm-up batches come first (gpurl's first build JIT-compiles
its Numba kernels). The two sides take turns in rounds and each round's ratio gpurl/VMAS is printed, because
a shared machine's speed drifts between rounds.

Both sides take discrete actions (index actions), episodes of 25 steps and the MPE defaults (simple_tag: 3
adversaries, 1 good agent, 2 obstacles; simple_spread: 3 agents). gpurl's env is made with ``validate=False``
and ``global_state=False`` unless asked (VmasEnv checks nothing and writes no global state). VMAS's
scenarios are its own ports of MPE (simple_tag integrates 10 physics substeps per step; its discrete
actions have 9 choices, mpe2's 5), so the two do not compute the same numbers: this compares what a user
gets from each.

    python bench/collector.py --num-envs 64,4096
    python bench/collector.py --device cuda --num-envs 4096 --scenarios simple_tag,simple_spread

Threads: gpurl's thread policy (``configure_process``) sizes one OpenMP pool for torch and Numba. On a CPU
that other processes keep busy, a 2-thread pool can make gpurl's side several times slower (a parallel region
waits for its descheduled thread); ``--threads 1`` gives steadier CPU figures there.

The last line is ``RESULT {json}``. CPU figures are CPU figures.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import statistics
import sys
import time
import traceback

import torch
from torchrl.collectors import Collector  # TorchRL 0.14's name for SyncDataCollector
from torchrl.envs.utils import RandomPolicy

from gpurl.envs import resolve_device
from gpurl.train.process import configure_process

from _common import describe_machine, print_result, sync

EPISODE_STEPS = 25
SIDES = ("gpurl", "vmas")
#: scenario -> (gpurl params, VMAS scenario kwargs): the same world on both sides.
SCENARIOS = {
    "simple_tag": (dict(num_adversaries=3, num_good=1, num_obstacles=2),
                   dict(num_adversaries=3, num_good_agents=1, num_landmarks=2)),
    "simple_spread": (dict(N=3), dict(n_agents=3)),
}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda if usable)")
    ap.add_argument("--scenarios", default="simple_tag", help=f"comma-separated, of {list(SCENARIOS)}")
    ap.add_argument("--num-envs", default="64,4096", help="comma-separated num_envs")
    ap.add_argument("--steps", type=int, default=100, help="T: steps per env in one batch")
    ap.add_argument("--batches", type=int, default=5, help="timed batches per side per round")
    ap.add_argument("--warmup", type=int, default=3, help="untimed batches after building a side")
    ap.add_argument("--rounds", type=int, default=3, help="turns each side takes")
    ap.add_argument("--sides", default=",".join(SIDES), help="comma-separated, of gpurl,vmas")
    ap.add_argument("--threads", type=int, default=0, help="torch and Numba threads (0: gpurl's thread policy)")
    ap.add_argument("--validate", action="store_true", help="gpurl validate=True (one device read per step)")
    ap.add_argument("--global-state", action="store_true", help="gpurl writes its global state each step")
    args = ap.parse_args(argv)
    if min(args.steps, args.batches, args.warmup, args.rounds) < 1:
        ap.error("--steps, --batches, --warmup and --rounds must be >= 1 (warm-up compiles gpurl's kernels)")
    return args


def make_env(side: str, scenario: str, num_envs: int, device, args):
    if scenario not in SCENARIOS:
        raise ValueError(f"no gpurl/VMAS pairing for scenario {scenario!r}; known: {list(SCENARIOS)}")
    gpurl_params, vmas_kwargs = SCENARIOS[scenario]
    if side == "gpurl":
        from gpurl.envs.adapters import torchrl_env

        return torchrl_env(scenario, num_envs, device=device, max_cycles=EPISODE_STEPS, validate=args.validate,
                           global_state=args.global_state, **gpurl_params)
    from torchrl.envs.libs.vmas import VmasEnv

    return VmasEnv(scenario=scenario, num_envs=num_envs, device=device, continuous_actions=False,
                   categorical_actions=True, max_steps=EPISODE_STEPS, seed=0, **vmas_kwargs)


def start_collector(env, steps: int):
    """An endless collector of num_envs * steps frames a batch, and the iterator that yields its batches."""
    collector = Collector(env, RandomPolicy(env.full_action_spec), frames_per_batch=env.batch_size.numel() * steps,
                          total_frames=-1)
    return collector, iter(collector)


def timed_batches(batches, count: int, device) -> tuple[int, float, tuple]:
    """(frames, seconds, batch shape) of ``count`` batches; frames from the batches' own sizes."""
    frames = 0
    sync(device)
    start = time.perf_counter()
    for _ in range(count):
        batch = next(batches)
        frames += batch.numel()
    sync(device)  # the last batch's device work belongs to its time
    return frames, time.perf_counter() - start, tuple(batch.batch_size)


def shut_down(collector, *_) -> None:
    try:
        collector.shutdown()
    except Exception as err:  # noqa: BLE001  (a failed shutdown must not lose the figures)
        print(f"  collector shutdown failed: {error_text(err)}", flush=True)


def error_text(err: BaseException) -> str:
    """The error's first line for the table; its last frames on stderr, for whoever reads an unattended run."""
    traceback.print_exc(limit=-3, file=sys.stderr)
    return f"{type(err).__name__}: {err}".splitlines()[0][:300]


def measure_config(scenario: str, num_envs: int, sides: list[str], device, args, say) -> dict:
    """One (scenario, num_envs): build and warm each side, then the rounds of timed batches, turn about."""
    rows = {side: {"scenario": scenario, "num_envs": num_envs, "side": side, "fps": [], "error": None}
            for side in sides}
    running = {}
    for side in sides:
        row = rows[side]
        collector = None
        try:
            start = time.perf_counter()
            env = make_env(side, scenario, num_envs, device, args)
            collector, batches = start_collector(env, args.steps)
            frames, _, shape = timed_batches(batches, args.warmup, device)
            row.update(frames_per_batch=frames // args.warmup, batch_size=shape,
                       setup_s=round(time.perf_counter() - start, 2))
            running[side] = (collector, batches)
            say(f"  {scenario} x{num_envs} {side}: built and warmed in {row['setup_s']} s, batch {shape}")
        except Exception as err:  # noqa: BLE001  (a side that fails is reported, the other still runs)
            row["error"] = error_text(err)
            say(f"  {scenario} x{num_envs} {side}: FAILED to build/warm: {row['error']}")
            if collector is not None:
                shut_down(collector)
    for r in range(args.rounds):
        for side, (_, batches) in list(running.items()):
            try:
                frames, seconds, shape = timed_batches(batches, args.batches, device)
                rows[side]["fps"].append(frames / seconds)
                rows[side]["frames_per_batch"], rows[side]["batch_size"] = frames // args.batches, shape
                say(f"  round {r + 1}: {side:5s} {frames} frames in {seconds:.3f} s = {frames / seconds:,.0f} frames/s")
            except Exception as err:  # noqa: BLE001
                rows[side]["error"] = error_text(err)
                say(f"  round {r + 1}: {side} FAILED: {rows[side]['error']}")
                shut_down(*running.pop(side))
    for collector, _ in running.values():
        shut_down(collector)
    for row in rows.values():
        row["fps_median"] = statistics.median(row["fps"]) if row["fps"] else None
    return rows


def installed_version(package: str) -> str:
    """The version, or "absent": a machine without VMAS still runs gpurl's side."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def ratios(rows: dict) -> list[float]:
    """gpurl/VMAS frames/s of each round both sides completed."""
    if "gpurl" not in rows or "vmas" not in rows:
        return []
    return [g / v for g, v in zip(rows["gpurl"]["fps"], rows["vmas"]["fps"])]


def print_table(results: list[dict]) -> None:
    print(f"\n{'scenario':14s} {'num_envs':>8s} {'side':5s} {'frames/batch':>12s} {'median frames/s':>16s}  "
          f"per round / error")
    for res in results:
        for row in res["rows"]:
            median = f"{row['fps_median']:,.0f}" if row["fps_median"] else "-"
            rounds = " ".join(f"{f:,.0f}" for f in row["fps"])
            print(f"{row['scenario']:14s} {row['num_envs']:8d} {row['side']:5s} {row.get('frames_per_batch', 0):12d} "
                  f"{median:>16s}  {rounds}{'  ERROR ' + row['error'] if row['error'] else ''}")
        if res["ratios"]:
            print(f"{'':14s} {'':8s} gpurl/VMAS per round: {' '.join(f'{x:.2f}' for x in res['ratios'])}"
                  f" (median {statistics.median(res['ratios']):.2f})")


def main(argv=None) -> dict:
    args = parse_args(argv)
    device = resolve_device(args.device)
    sides = [s for s in args.sides.split(",") if s]
    if unknown := [s for s in sides if s not in SIDES]:
        sys.exit(f"unknown side(s) {unknown}: choose from {list(SIDES)}")
    # One OpenMP pool for torch (VMAS) and Numba (gpurl), as `gpurl train` sets it: two pools spinning on the
    # same CPUs make either side's figure swing several-fold between rounds.
    configure_process(args.threads, device)
    machine = describe_machine(device)
    print("TorchRL collector frames/s, gpurl vs VMAS: " + ", ".join(f"{k}={v}" for k, v in machine.items()))
    versions = {name: installed_version(name) for name in ("torchrl", "tensordict", "vmas")}
    settings = {"scenarios": args.scenarios, "num_envs": args.num_envs, "steps": args.steps, "batches": args.batches,
                "warmup": args.warmup, "rounds": args.rounds, "sides": sides, "episode_steps": EPISODE_STEPS,
                "gpurl_validate": args.validate, "gpurl_global_state": args.global_state, **versions}
    print("settings: " + ", ".join(f"{k}={v}" for k, v in settings.items()))
    print("a frame = one env step of one env; frames counted from each batch's size; random policy")
    results = []
    for scenario in args.scenarios.split(","):
        for num_envs in (int(n) for n in args.num_envs.split(",")):
            print(f"\n== {scenario} x {num_envs} envs on {device}", flush=True)
            rows = measure_config(scenario, num_envs, sides, device, args, lambda s: print(s, flush=True))
            results.append({"rows": list(rows.values()), "ratios": ratios(rows)})
    print_table(results)
    payload = {"bench": "collector", "machine": machine, "settings": settings,
               "rows": [row for res in results for row in res["rows"]],
               "ratios": [{"scenario": res["rows"][0]["scenario"], "num_envs": res["rows"][0]["num_envs"],
                           "per_round": res["ratios"],
                           "median": statistics.median(res["ratios"]) if res["ratios"] else None}
                          for res in results if res["rows"]]}
    print_result(payload)
    return payload


if __name__ == "__main__":
    main()
