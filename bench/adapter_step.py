#!/usr/bin/env python
"""Host time per step of gpurl's Gymnasium and PettingZoo adapters, beside the env's own ``env.step``.

    python bench/adapter_step.py                                      # simple_tag, 1 and 64 envs, this machine
    python bench/adapter_step.py --device cuda --num-envs 1,4096 --steps 2000

A user who steps a gpurl env through an adapter pays the adapter's own work on top of ``env.step``: checking
and moving the actions, the other groups' actions, and bringing the outputs to the host as numpy. For each
size this times, in alternating rounds (best kept), ``env.step`` on a ready action tensor,
``GymVectorEnv.step`` (the adversary group; the good agent acts at random) and, at one env, PettingZoo's
``ParallelEnv.step`` (a dict of actions; its episodes are reset when they end, outside the timing). Each
figure is microseconds per step, synchronised (the outputs are on the host when a step returns); the
ratios to ``env.step`` in the same run are what compare across machines. Ends with ``RESULT {json}``.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from _common import describe_machine, print_result, sync

import gpurl
from gpurl.envs.adapters.gym_vector import GymVectorEnv
from gpurl.envs.adapters.parallel import ParallelEnv


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--scenario", default="simple_tag")
    parser.add_argument("--num-envs", default="1,64", help="comma-separated sizes")
    parser.add_argument("--steps", type=int, default=2000, help="steps per timed round")
    parser.add_argument("--rounds", type=int, default=3)
    return parser.parse_args(argv)


def per_step_us(step, steps: int, device: torch.device) -> float:
    sync(device)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync(device)
    return (time.perf_counter() - start) / steps * 1e6


def sides(scenario: str, num_envs: int, device: torch.device) -> dict:
    """{side: a no-argument step} for one size, each on an env of its own, warmed up."""
    def make(autoreset=True):
        return gpurl.make(scenario, num_envs=num_envs, device=device, seed=0, validate=False, autoreset=autoreset)

    env = make()
    env.reset()
    actions = torch.zeros(num_envs, env.num_agents, env.action_dims, dtype=torch.int64, device=device)
    out = {"env.step": lambda: env.step(actions)}
    gym = GymVectorEnv(make(), group="adversary")
    gym.reset(seed=0)
    gym_actions = np.zeros(gym.num_envs, dtype=np.int64)
    out["GymVectorEnv.step"] = lambda: gym.step(gym_actions)
    if num_envs == 1:
        par = ParallelEnv(make(autoreset=False))
        par.reset(seed=0)
        par_actions = {agent: 0 for agent in par.possible_agents}

        def parallel_step():
            if not par.agents:
                par.reset()
            par.step(par_actions)
        out["ParallelEnv.step"] = parallel_step
    for step in out.values():
        for _ in range(50):
            step()
    return out


def main(argv=None) -> dict:
    args = parse_args(argv)
    device = torch.device(args.device)
    sizes = [int(n) for n in args.num_envs.split(",") if n]
    machine = describe_machine(device)
    print("adapter host time per step (us, synchronised; best of rounds), " + args.scenario)
    print("machine: " + ", ".join(f"{k}={v}" for k, v in machine.items()))
    rows = []
    for num_envs in sizes:
        steps = sides(args.scenario, num_envs, device)
        best = {side: float("inf") for side in steps}
        for _ in range(args.rounds):  # alternating: a slow spell of this machine hits every side alike
            for side, step in steps.items():
                best[side] = min(best[side], per_step_us(step, args.steps, device))
        row = {"num_envs": num_envs, "us_per_step": best,
               "over_env_step": {side: best[side] / best["env.step"] for side in best if side != "env.step"}}
        rows.append(row)
        print(f"  {num_envs:6d} envs: " + ", ".join(f"{side} {us:.1f}" for side, us in best.items())
              + "; over env.step: " + ", ".join(f"{side} {r:.2f}x" for side, r in row["over_env_step"].items()))
    payload = {"bench": "adapter_step", "machine": machine, "scenario": args.scenario, "steps": args.steps,
               "rounds": args.rounds, "rows": rows}
    print_result(payload)
    return payload


if __name__ == "__main__":
    main()
