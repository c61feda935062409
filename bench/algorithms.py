#!/usr/bin/env python
"""Every registered algorithm on its default task, for a fixed budget of env steps, the same seeds, next
to a uniformly random policy measured in the same run: does each one learn, and at what speed?

    python bench/algorithms.py                         # every task, seeds 0,1,2 (CPU, tens of minutes)
    python bench/algorithms.py --seeds 0 --only ppo,mappo --budget-scale 0.25

Tasks (``TASKS``): ``ppo``, ``a2c`` and ``mappo`` train simple_tag's three adversaries (a team sharing one
reward) against uniformly random good agents, from the ``simple-tag`` / ``simple-tag-mappo`` presets;
``ppo-gru`` and ``mappo-gru`` do the same with a GRU actor. ``mappo-spread`` and ``mappo-speaker-listener``
train every agent of mpe2's cooperative simple_spread and simple_speaker_listener (the ``simple-spread`` and
``simple-speaker-listener`` presets; one team reward, reported for the ``agent`` / ``listener`` group).
``iql-spread``, ``vdn-spread`` and ``qmix-spread`` train simple_spread's team with the value-based
algorithms (the ``simple-spread-iql``/``-vdn``/``-qmix`` presets), beside ``ippo-spread`` (independent PPO,
``simple-spread-ippo``) on the same budget; they also report transitions/s into
the replay buffer and updates/s. ``<algo>-spread-box`` and ``<algo>-tag-box`` train MADDPG, IDDPG, MATD3,
MASAC and ISAC with mpe2's continuous actions (simple_spread's team; simple_tag's adversaries against random
prey) from the ``simple-spread-<algo>`` / ``simple-tag-<algo>`` presets, beside MAPPO with continuous actions
on the same budget (``mappo-spread-box``, ``mappo-tag-box``). The Tag rows ask whether a recurrent policy
replaces ``frame_stack``: tag-small (taggers and runners both learn) with two stacked frames, with one
frame, and with a GRU and one frame (``tag-small-gru``). Each task reports its ``group``'s mean return
per episode, random and after training (each run's own evaluation episodes, new seeds).

Prints a table per task (seed means and spreads) and ends with
``RESULT {"algos": {name: {"task", "group", "return_random", "return_final", "env_steps", "seconds",
"agent_steps_per_s", "seconds_per_iteration", "seeds": [...]}}}`` (seed means; per-seed figures under
"seeds").
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch

from _common import describe_machine, print_result
from gpurl.train import build_config
from gpurl.train.process import configure_process
from gpurl.train.run import train

ADVERSARIES = dict(train_groups=("adversary",), iters=60)
CONTINUOUS = {"continuous_actions": True}
BOX_ALGOS = ("maddpg", "iddpg", "matd3", "masac", "isac")
#: name -> (preset, config values over it, the group whose return is reported)
TASKS = {
    "ppo": ("simple-tag", dict(ADVERSARIES), "adversary"),
    # A2C takes one gradient step per rollout: short rollouts of fewer envs give it as many env steps
    # in 20 times as many updates.
    "a2c": ("simple-tag", dict(ADVERSARIES, algo="a2c", num_envs=64, rollout_len=10, iters=1200, lr=2e-3), "adversary"),
    # The MAPPO presets run 64 envs (the others 256): four times the iterations make the same budget.
    "mappo": ("simple-tag-mappo", dict(ADVERSARIES, iters=240), "adversary"),
    "ppo-gru": ("simple-tag", dict(ADVERSARIES, recurrent="gru"), "adversary"),
    "mappo-gru": ("simple-tag-mappo", dict(ADVERSARIES, iters=240, recurrent="gru"), "adversary"),
    "mappo-spread": ("simple-spread", dict(iters=240), "agent"),
    "mappo-speaker-listener": ("simple-speaker-listener", dict(iters=240), "listener"),
    "ppo-tag-2frames": ("tag-small", dict(iters=80), "tagger"),
    "ppo-tag-1frame": ("tag-small", dict(iters=80, frame_stack=1), "tagger"),
    "ppo-tag-gru": ("tag-small-gru", dict(iters=80), "tagger"),
    # The value-based family on simple_spread (one team reward), beside independent PPO with the same
    # budget, each from its preset (the learning-parity pairs' configurations).
    "ippo-spread": ("simple-spread-ippo", dict(iters=60), "agent"),
    **{f"{q}-spread": (f"simple-spread-{q}", dict(iters=60), "agent") for q in ("iql", "vdn", "qmix")},
    # The off-policy actor-critics for Box actions (mpe2's continuous_actions) from their presets, 96k env steps,
    # beside MAPPO with continuous actions on the same budget (its presets' 64 envs x 50 steps, 30 iterations).
    "mappo-spread-box": ("simple-spread", dict(iters=30, env_params=CONTINUOUS), "agent"),
    "mappo-tag-box": ("simple-tag-mappo", dict(ADVERSARIES, iters=30, env_params=CONTINUOUS), "adversary"),
    **{f"{algo}-spread-box": (f"simple-spread-{algo}", dict(iters=60), "agent") for algo in BOX_ALGOS},
    **{f"{algo}-tag-box": (f"simple-tag-{algo}", dict(iters=60), "adversary") for algo in BOX_ALGOS},
}


def run_task(name: str, seed: int, scale: float, threads: int) -> dict:
    preset, values, group = TASKS[name]
    values = dict(values)
    values["iters"] = max(2, round(values["iters"] * scale))
    with tempfile.TemporaryDirectory() as log_dir:
        cfg = build_config(preset, **values, seed=seed, device="cpu", log_dir=log_dir, eval_episodes=256,
                           progress=False, checkpoint_every=0, torch_threads=threads)
        t0 = time.perf_counter()
        result = train(cfg, say=lambda *a, **k: None)
        seconds = time.perf_counter() - t0
    row = {"task": f"{preset} " + " ".join(f"{k}={v}" for k, v in sorted(values.items())), "group": group,
           "return_random": result[f"return_{group}_random"], "return_final": result[f"return_{group}_final"],
           "env_steps": result["env_steps"], "seconds": seconds, "agent_steps_per_s": result["agent_steps_per_s"],
           "seconds_per_iteration": result["train_seconds"] / max(1, result["timed_iterations"])}
    phases, iterations = result["phase_seconds"], result["timed_iterations"]
    if "replay" in phases:  # off-policy: transitions into the buffer, and updates, per second of their phase
        row["transitions_per_s"] = iterations * cfg.num_envs * cfg.rollout_len / max(phases["replay"], 1e-9)
        row["updates_per_s"] = iterations * cfg.algo_params.q_updates / max(phases.get("learn", 0.0), 1e-9)
    return row


def mean_row(rows: list[dict]) -> dict:
    out = {k: rows[0][k] for k in ("task", "group")}
    for key in ("return_random", "return_final", "env_steps", "seconds", "agent_steps_per_s", "seconds_per_iteration"):
        out[key] = statistics.fmean(r[key] for r in rows)
    out["return_final_std"] = statistics.pstdev(r["return_final"] for r in rows)
    for key in ("transitions_per_s", "updates_per_s"):
        if key in rows[0]:
            out[key] = statistics.fmean(r[key] for r in rows)
    out["seeds"] = rows
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    parser.add_argument("--only", default=",".join(TASKS), help=f"comma-separated tasks of {','.join(TASKS)}")
    parser.add_argument("--budget-scale", type=float, default=1.0, help="multiply every task's iterations")
    parser.add_argument("--threads", type=int, default=0, help="torch/Numba threads (0: the thread policy)")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = sorted(set(names) - set(TASKS))
    if unknown:
        parser.error(f"unknown task(s) {unknown}; tasks: {list(TASKS)}")
    configure_process(args.threads, torch.device("cpu"))
    print(f"machine: {describe_machine(torch.device('cpu'))}")
    print(f"seeds {seeds}, budget scale {args.budget_scale}; eval 256 episodes random and trained per run")
    algos = {}
    for name in names:
        rows = []
        for seed in seeds:
            row = run_task(name, seed, args.budget_scale, args.threads)
            print(f"  {name} seed {seed}: return {row['return_random']:.2f} random -> {row['return_final']:.2f} "
                  f"trained, {row['env_steps']} env steps in {row['seconds']:.0f} s "
                  f"({row['seconds_per_iteration']:.2f} s/iteration)", flush=True)
            rows.append(row)
        algos[name] = mean_row(rows)
    print(f"\n{'task':<24}{'group':<11}{'random':>9}{'trained':>9}{'spread':>8}{'env steps':>11}"
          f"{'s/iter':>8}{'agent-steps/s':>15}")
    for name, r in algos.items():
        print(f"{name:<24}{r['group']:<11}{r['return_random']:>9.2f}{r['return_final']:>9.2f}"
              f"{r['return_final_std']:>8.2f}{r['env_steps']:>11.0f}{r['seconds_per_iteration']:>8.2f}"
              f"{r['agent_steps_per_s']:>15.4g}")
    for name, r in algos.items():
        print(f"{name}: {r['task']}")
        if "updates_per_s" in r:
            print(f"  replay: {r['transitions_per_s']:.4g} transitions/s into the buffer, "
                  f"{r['updates_per_s']:.4g} updates/s")
    print_result({"bench": "algorithms", "device": "cpu", "seeds": seeds, "budget_scale": args.budget_scale,
                  "algos": algos})


if __name__ == "__main__":
    main()
