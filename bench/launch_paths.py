#!/usr/bin/env python
"""A CPU step's two launch paths side by side: an env's own arrays passed as a named tuple (Numba unboxes
each array) or as one address table (gpurl/kernels/address_table.py, the default).

Two envs of each scenario in one process, one of them unpinned (plain launches), take turns: best of
``--repeats`` x ``--steps`` steps each, random Discrete actions from a pool drawn before timing, validate
off, ``global_state=False`` (as bench/peers.py steps gpurl). The last line is ``RESULT {json}``.

    python bench/launch_paths.py                               # simple, simple_tag at 1 and 4096 envs
    python bench/launch_paths.py --scenarios simple --num-envs 4096 --repeats 9
"""
from __future__ import annotations

import argparse
import time

import torch

import gpurl

from _common import describe_machine, print_result

POOL = 8


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", default="simple,simple_tag", help="comma-separated registered envs")
    ap.add_argument("--num-envs", default="1,4096", help="comma-separated num_envs")
    ap.add_argument("--steps", type=int, default=300, help="steps per timed turn")
    ap.add_argument("--repeats", type=int, default=7, help="turns per path (the best is kept)")
    return ap.parse_args(argv)


def make(name: str, num_envs: int, table: bool):
    env = gpurl.make(name, num_envs=num_envs, seed=0, validate=False, global_state=False, device="cpu")
    if not table:
        env._direct.pin(None)  # every launch passes the named tuple
    env.reset()
    return env


def measure(name: str, num_envs: int, steps: int, repeats: int) -> dict:
    envs = {"table": make(name, num_envs, True), "plain": make(name, num_envs, False)}
    gen = torch.Generator().manual_seed(0)
    groups = list(envs["table"].groups.values())
    pool = [torch.cat([torch.randint(0, g.action_space.n, (num_envs, g.agents.stop - g.agents.start),
                                     generator=gen) for g in groups], dim=1) for _ in range(POOL)]
    for env in envs.values():  # compiles, warms
        for t in range(50):
            env.step(pool[t % POOL])
    best = {path: float("inf") for path in envs}
    for _ in range(repeats):
        for path, env in envs.items():
            start = time.perf_counter()
            for t in range(steps):
                env.step(pool[t % POOL])
            best[path] = min(best[path], (time.perf_counter() - start) / steps)
    return {"env": name, "num_envs": num_envs, "table_us": best["table"] * 1e6, "plain_us": best["plain"] * 1e6,
            "plain_over_table": best["plain"] / best["table"]}


def main(argv=None) -> dict:
    args = parse_args(argv)
    machine = describe_machine(torch.device("cpu"))
    print("CPU launch paths, side by side: " + ", ".join(f"{k}={v}" for k, v in machine.items()))
    print(f"settings: steps={args.steps} repeats={args.repeats} (best kept), validate=False, global_state=False")
    rows = []
    for name in args.scenarios.split(","):
        for num_envs in (int(n) for n in args.num_envs.split(",")):
            row = measure(name, num_envs, args.steps, args.repeats)
            rows.append(row)
            print(f"  {name:24s} {num_envs:6d} envs: table {row['table_us']:8.2f} us, plain {row['plain_us']:8.2f} us, "
                  f"plain / table {row['plain_over_table']:.3f}")
    payload = {"bench": "launch_paths", "machine": machine, "rows": rows,
               "settings": {"steps": args.steps, "repeats": args.repeats}}
    print_result(payload)
    return payload


if __name__ == "__main__":
    main()
