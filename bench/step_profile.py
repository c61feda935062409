#!/usr/bin/env python
"""Where one ``env.step`` call's time goes: host time per call, device-synchronised time per call, the
kernels it launches (CUDA) and the Python functions that take the host time (cProfile).

A step loop run from Python pays a host cost per call (argument checks, views, the kernel launch). On a
CPU that is the fixed cost of a step; on CUDA the GPU work is asynchronous, so when the host cost
exceeds the GPU time a step loop runs at the host's pace (a CUDA graph replay, as gpurl's trainer uses,
does not pay it). Actions are a pool of random tensors drawn before timing, validate=False, autoreset.

    python bench/step_profile.py --env simple_tag --num-envs 4096
    python bench/step_profile.py --env simple --num-envs 1,4096 --device cuda

The last line is ``RESULT {json}``. CPU figures are CPU figures.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import torch

import gpurl
from gpurl.envs import resolve_device

from _common import describe_machine, print_result, sync

POOL = 8


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", default="simple_tag", help=f"a registered env: {gpurl.registered()}")
    ap.add_argument("--num-envs", default="4096", help="comma-separated num_envs")
    ap.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda if usable)")
    ap.add_argument("--steps", type=int, default=500, help="steps per measurement")
    ap.add_argument("--top", type=int, default=12, help="functions listed from the profile")
    return ap.parse_args(argv)


def action_pool(env, seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator(device=env.device).manual_seed(seed)
    groups = list(env.groups.values())
    return [torch.cat([torch.randint(0, g.action_space.n, (env.num_envs, g.agents.stop - g.agents.start),
                                     generator=gen, device=env.device) for g in groups], dim=1)
            for _ in range(POOL)]


def kernels_per_step(env, actions, steps: int) -> float | None:
    """CUDA kernels launched per step, as CUPTI (torch.profiler) sees them; None off-GPU."""
    if env.device.type != "cuda":
        return None
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(steps):
            env.step(actions[i % POOL])
        sync(env.device)
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return len(kernels) / steps


def measure(name: str, num_envs: int, device, steps: int, top: int, say) -> dict:
    env = gpurl.make(name, num_envs=num_envs, device=device, validate=False, global_state=False)
    env.reset()
    actions = action_pool(env)
    for i in range(20):  # compiles, warms
        env.step(actions[i % POOL])
    sync(device)
    start = time.perf_counter()
    for i in range(steps):
        env.step(actions[i % POOL])
    host = time.perf_counter() - start
    sync(device)
    wall = time.perf_counter() - start
    profiler = cProfile.Profile()
    profiler.enable()
    for i in range(steps):
        env.step(actions[i % POOL])
    profiler.disable()
    sync(device)
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(top)
    row = {"env": name, "num_envs": num_envs, "num_agents": env.num_agents, "steps": steps,
           "host_us_per_step": host / steps * 1e6, "wall_us_per_step": wall / steps * 1e6,
           "kernels_per_step": kernels_per_step(env, actions, min(steps, 50))}
    say(f"\n== {name} x {num_envs} envs on {device}: host {row['host_us_per_step']:.1f} us/step (issuing), "
        f"wall {row['wall_us_per_step']:.1f} us/step (synchronised), kernels/step {row['kernels_per_step']}")
    say("profile of the host time (cProfile adds its own overhead per call; read it as shares):")
    say("\n".join(line for line in text.getvalue().splitlines() if line.strip()))
    return row


def main(argv=None) -> dict:
    args = parse_args(argv)
    device = resolve_device(args.device)
    machine = describe_machine(device)
    print("env.step cost split: " + ", ".join(f"{k}={v}" for k, v in machine.items()))
    print(f"settings: env={args.env} num_envs={args.num_envs} steps={args.steps} validate=False global_state=False")
    rows = [measure(args.env, int(n), device, args.steps, args.top, print) for n in args.num_envs.split(",")]
    payload = {"bench": "step_profile", "machine": machine, "rows": rows}
    print_result(payload)
    return payload


if __name__ == "__main__":
    main()
