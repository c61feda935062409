#!/usr/bin/env python
"""Env throughput of tag_continuous: env-steps/s and agent-steps/s over num_envs.

Configurations: "tag-10v100" (the literature's benchmark: 10 taggers, 100 runners, k=10 partial obs)
and "tag-5x1000" (5 taggers, 1000 runners). Random actions are drawn on the device up front (a pool
of tensors cycled through, so the timing is the env alone), autoreset is on, the action range check
is off (``validate=False``, as in training). Each cell warms up (compiles, leaves the synchronised
start), then times whole steps with a device sync at both ends; the best of several repeats is kept
because neighbours on a shared machine only ever add time. ``--phases`` also splits one step into
its kernel phases. The last line is ``RESULT {json}`` with every row. CPU figures are CPU
figures: never compare them with GPU numbers.

    python bench/env_throughput.py                       # default table (a few minutes on 2 vCPUs)
    python bench/env_throughput.py --sizes 1000 --configs tag-10v100 --phases
"""
from __future__ import annotations

import argparse
import time

import torch

import gpurl
from gpurl.envs import resolve_device
from gpurl.envs.tag_continuous import TAG_5V1000, TAG_10V100

from _common import describe_machine, print_result, sync
from phase_timing import action_pool, time_phases

CONFIGS = {
    "tag-10v100": TAG_10V100,
    "tag-10v100-all-alive": {**TAG_10V100, "tagging_distance": 0.0},  # worst case: nobody leaves
    "tag-5x1000": TAG_5V1000,
}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda if usable, else cpu)")
    ap.add_argument("--sizes", default="1,16,100,1000,4096", help="comma-separated num_envs")
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated of {list(CONFIGS)}")
    ap.add_argument("--agent-steps", type=float, default=2e6,
                    help="agent-steps per timed repeat (sets the step count of each cell)")
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats per cell (best is kept)")
    ap.add_argument("--warmup", type=int, default=100,
                    help="untimed steps per cell after compiling (fewer for big cells: see --warmup-agent-steps)")
    ap.add_argument("--warmup-agent-steps", type=float, default=2e7,
                    help="cap on warm-up work per cell, in agent-steps (at least 10 steps)")
    ap.add_argument("--max-agents", type=float, default=None,
                    help="skip cells with more agents than this (default: 1.1e6 on a CPU, where "
                         "4096 x 1005 takes seconds per step; no limit on a GPU)")
    ap.add_argument("--phases", action="store_true", help="also time each kernel phase (see --phases-envs)")
    ap.add_argument("--phases-envs", type=int, default=1000, help="num_envs of the phase split")
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


def time_steps(env, actions, steps: int, repeats: int) -> float:
    """Best seconds per step over ``repeats`` runs of ``steps`` steps."""
    best = float("inf")
    for _ in range(repeats):
        sync(env.device)
        start = time.perf_counter()
        for t in range(steps):
            env.step(actions[t % len(actions)])
        sync(env.device)
        best = min(best, (time.perf_counter() - start) / steps)
    return best


def bench_cell(name: str, num_envs: int, args, device) -> dict:
    env = gpurl.make("tag_continuous", num_envs=num_envs, device=device, seed=args.seed, validate=False,
                     **CONFIGS[name])
    env.reset()
    actions = action_pool(env, 8, args.seed)
    agents = num_envs * env.num_agents
    for t in range(max(10, min(args.warmup, int(args.warmup_agent_steps / agents)))):
        env.step(actions[t % len(actions)])
    steps = max(3, min(500, int(args.agent_steps / agents)))
    per_step = time_steps(env, actions, steps, args.repeats)
    alive = float(env.state.alive.float().mean())  # host-ok: after timing
    return dict(config=name, num_envs=num_envs, num_agents=env.num_agents, steps=steps,
                ms_per_step=per_step * 1e3, env_steps_per_s=num_envs / per_step,
                agent_steps_per_s=agents / per_step, alive_fraction=alive)


def main():
    args = parse_args()
    device = resolve_device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(1)  # torch only draws the action pool; Numba's threads do the stepping
    sizes = [int(s) for s in args.sizes.split(",")]
    configs = [c.strip() for c in args.configs.split(",")]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        raise SystemExit(f"unknown config(s) {unknown}; choose from {list(CONFIGS)}")
    if args.max_agents is None:
        args.max_agents = 1.1e6 if device.type == "cpu" else float("inf")
    machine = describe_machine(device)
    print("env throughput of tag_continuous (random actions from a device-side pool, autoreset on, "
          "validate=False, best of repeats after warm-up)")
    print("machine: " + ", ".join(f"{k}={v}" for k, v in machine.items()))
    print(f"{'config':22s} {'num_envs':>8s} {'agents':>8s} {'steps':>6s} {'ms/step':>9s} "
          f"{'env-steps/s':>12s} {'agent-steps/s':>14s} {'alive':>6s}")
    rows = []
    for name in configs:
        n_agents = CONFIGS[name]["num_taggers"] + CONFIGS[name]["num_runners"]
        for num_envs in sizes:
            if num_envs * n_agents > args.max_agents:
                print(f"{name:22s} {num_envs:8d}   skipped: {num_envs * n_agents} agents > --max-agents")
                continue
            r = bench_cell(name, num_envs, args, device)
            rows.append(r)
            print(f"{name:22s} {num_envs:8d} {r['num_agents']:8d} {r['steps']:6d} {r['ms_per_step']:9.3f} "
                  f"{r['env_steps_per_s']:12,.0f} {r['agent_steps_per_s']:14,.0f} {r['alive_fraction']:6.2f}",
                  flush=True)
    phases = None
    if args.phases:
        phases = time_phases(configs[0], CONFIGS[configs[0]], args.phases_envs, args, device)
    machine["numba_threading_layer"] = describe_machine(device).get("numba_threading_layer")
    print_result({"bench": "env_throughput", "machine": machine, "rows": rows, "phases": phases,
                  "settings": {"agent_steps_per_repeat": args.agent_steps, "repeats": args.repeats,
                               "warmup": args.warmup, "warmup_agent_steps": args.warmup_agent_steps,
                               "max_agents": args.max_agents}})


if __name__ == "__main__":
    main()
