#!/usr/bin/env python
"""Several seeds of one config: side by side in one process (``gpurl train --seeds``) against one after
another, as three separate processes (``gpurl train --seed k`` three times) and as three runs in one process.

    python bench/seeds.py                                    # simple-spread, 32 envs, 10 iterations, seeds 0,1,2
    python bench/seeds.py --repeats 1 -- --preset tag-small --num-envs 16 --iters 10

Every way runs in a fresh process of its own (timed from outside: start-up, imports and compile loads
included), after one warm-up run that fills the compile caches on disk (inductor's and the env kernels'),
so each way starts with warm caches, as every run after a configuration's first does. The ways alternate
over ``--repeats`` rounds (the 2-vCPU machines drift); the median wall time and CPU time (user + system of
the processes) of each is reported, with the env steps per second over that wall time, the training loops'
own seconds (the runs' ``train_seconds``, after each run's warm-up iteration), and the ratios to the sweep.
It also says whether every way gave each seed the same final returns. Ends with ``RESULT {json}``.
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import describe_machine, print_result  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
WAYS = ("side_by_side", "processes", "in_process")
DEFAULT_TRAIN = ["--preset", "simple-spread", "--num-envs", "32", "--iters", "10", "--eval-episodes", "32"]


def results_of(output: str) -> list[dict]:
    return [json.loads(line[len("RESULT "):]) for line in output.splitlines() if line.startswith("RESULT ")]


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_process(command: list[str]) -> tuple[float, float, list[dict]]:
    """Wall and CPU seconds (user + system) of one process running ``command``, and the RESULT payloads it
    printed."""
    cpu, start = children_cpu_seconds(), time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    seconds, cpu = time.perf_counter() - start, children_cpu_seconds() - cpu
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n"
                         f"{done.stderr[-3000:]}")
    return seconds, cpu, results_of(done.stdout)


def one_way(way: str, train: list[str], seeds: list[int], root: Path) -> dict:
    """Run the seeds one way; the per-seed results (RESULT payloads of the runs) and the wall time."""
    train_cmd = [sys.executable, "-m", "gpurl.train", *train]
    if way == "side_by_side":
        seconds, cpu, [payload] = run_process([*train_cmd, "--seeds", ",".join(map(str, seeds)), "--log-dir",
                                               str(root)])
        runs = payload["runs"]
    elif way == "processes":
        seconds, cpu, runs = 0.0, 0.0, []
        for seed in seeds:
            took, used, [result] = run_process([*train_cmd, "--seed", str(seed), "--log-dir",
                                                str(root / f"seed{seed}")])
            seconds, cpu = seconds + took, cpu + used
            runs.append(result)
    else:  # in_process: this script's inner mode calls gpurl.train.cli.main once per seed
        seconds, cpu, runs = run_process([sys.executable, __file__, "--inner", str(root), "--seeds",
                                          ",".join(map(str, seeds)), "--", *train])
    return {"wall_seconds": seconds, "cpu_seconds": cpu, "runs": runs,
            "train_seconds": [round(run["train_seconds"], 2) for run in runs]}


def inner(root: Path, seeds: list[int], train: list[str]) -> None:
    """Three runs one after another in this process, as a user's script calling gpurl train would."""
    from gpurl.train.cli import main

    for seed in seeds:
        main([*train, "--seed", str(seed), "--log-dir", str(root / f"seed{seed}")])


def finals(runs: list[dict]) -> list[dict]:
    return [{k: v for k, v in sorted(r.items()) if k.endswith("_final")} for r in runs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--repeats", type=int, default=2, help="rounds over the three ways (alternating order)")
    parser.add_argument("--inner", default=None, help=argparse.SUPPRESS)
    parser.add_argument("train", nargs="*", help="gpurl train flags after --; default: " + " ".join(DEFAULT_TRAIN))
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    train = args.train or DEFAULT_TRAIN
    if args.inner:
        inner(Path(args.inner), seeds, train)
        return

    print(f"config: gpurl train {' '.join(train)}; seeds {seeds}; {args.repeats} rounds", flush=True)
    measured: dict[str, list[dict]] = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory(prefix="gpurl-seeds-") as tmp:
        tmp = Path(tmp)
        warm, _, _ = run_process([sys.executable, "-m", "gpurl.train", *train, "--seed", str(seeds[0]),
                               "--log-dir", str(tmp / "warm-up")])
        print(f"warm-up run (fills the compile caches): {warm:.1f} s", flush=True)
        for round_ in range(args.repeats):
            for way in (WAYS if round_ % 2 == 0 else WAYS[::-1]):
                done = one_way(way, train, seeds, tmp / f"{way}-{round_}")
                measured[way].append(done)
                print(f"round {round_ + 1} {way}: {done['wall_seconds']:.1f} s wall, {done['cpu_seconds']:.1f} s CPU; "
                      f"training loop of each seed {done['train_seconds']} s", flush=True)

    machine = measured["side_by_side"][0]["runs"][0].get("machine") or describe_machine(torch.device("cpu"))
    print(f"machine (of the sweep's first seed): {machine}")
    env_steps = sum(r["env_steps"] for r in measured["side_by_side"][0]["runs"])
    summary = {}
    for way, rounds in measured.items():
        wall = statistics.median(r["wall_seconds"] for r in rounds)
        summary[way] = {
            "wall_seconds": [round(r["wall_seconds"], 2) for r in rounds], "median_wall_seconds": round(wall, 2),
            "cpu_seconds": [round(r["cpu_seconds"], 2) for r in rounds],
            "median_cpu_seconds": round(statistics.median(r["cpu_seconds"] for r in rounds), 2),
            "env_steps": env_steps, "env_steps_per_s": env_steps / wall,
            "train_loop_seconds": [r["train_seconds"] for r in rounds],
            "median_train_loop_seconds": statistics.median(sum(r["train_seconds"]) for r in rounds),
            "finals": finals(rounds[0]["runs"]),
        }
    base = summary["side_by_side"]["median_wall_seconds"]
    ratios = {f"{way}_over_side_by_side": summary[way]["median_wall_seconds"] / base for way in WAYS[1:]}
    same = all(finals(r["runs"]) == summary["side_by_side"]["finals"] for rounds in measured.values() for r in rounds)
    ratios.update({f"{way}_cpu_over_side_by_side": summary[way]["median_cpu_seconds"]
                   / summary["side_by_side"]["median_cpu_seconds"] for way in WAYS[1:]})
    print(f"\n{'way':<14}{'wall s':>8}{'CPU s':>8}{'env-steps/s':>13}{'train loop s':>14}{'wall x sweep':>14}"
          f"{'CPU x sweep':>13}   (medians over rounds)")
    for way in WAYS:
        s = summary[way]
        print(f"{way:<14}{s['median_wall_seconds']:>8.1f}{s['median_cpu_seconds']:>8.1f}{s['env_steps_per_s']:>13.4g}"
              f"{s['median_train_loop_seconds']:>14.2f}{s['median_wall_seconds'] / base:>14.2f}"
              f"{s['median_cpu_seconds'] / summary['side_by_side']['median_cpu_seconds']:>13.2f}")
    print(f"every way gave each seed the same final returns: {same}")
    print_result({"benchmark": "seeds", "machine": machine, "train_args": train, "seeds": seeds,
                  "repeats": args.repeats, "warm_up_seconds": round(warm, 2), "ways": summary, "ratios": ratios,
                  "same_final_returns": same})


if __name__ == "__main__":
    main()
