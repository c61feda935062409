#!/usr/bin/env python
"""An env step's two launch paths side by side, per call from Python.

- CPU: an env's own arrays passed as one address table (gpurl/kernels/address_table.py, the default) or as
  a named tuple (``plain``: Numba unboxes each array).
- CUDA: the prepared launch (gpurl/kernels/prepared_launch.py, the default: parameters marshalled once,
  ``cuLaunchKernel`` directly) or numba-cuda's ordinary launch (``plain``: typing and marshalling of every
  argument at every call). A scenario ``NAME:cuda_c`` (``tag_gridworld:cuda_c``) is the env's CUDA C build:
  prepared the same way, or ``plain``: CuPy's launch, which checks and packs every argument at every call. Both the host time to issue a step (no synchronisation in the loop: what a step
  loop pays when the GPU keeps up) and the synchronised time per step (host issue and GPU work together).

Two envs of each scenario in one process, one of them on the plain path, take turns: best of
``--repeats`` x ``--steps`` steps each, random Discrete actions from a pool drawn before timing, validate
off, ``global_state=False`` (as bench/peers.py steps gpurl). The last line is ``RESULT {json}``.

    python bench/launch_paths.py                               # simple, simple_tag at 1 and 4096 envs
    python bench/launch_paths.py --scenarios simple --num-envs 4096 --repeats 9
    python bench/launch_paths.py --device cuda --num-envs 1,4096,65536
    python bench/launch_paths.py --device cuda --scenarios tag_gridworld,tag_gridworld:cuda_c --num-envs 1,2000
"""
from __future__ import annotations

import argparse
import time

import torch

import gpurl

from gpurl.envs import resolve_device
from gpurl.envs.launch_path import DirectLauncher, DispatchLauncher, PreparedLauncher
from gpurl.envs.tag_gridworld.cuda_c import GridCudaC

from _common import describe_machine, print_result, sync

POOL = 8


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", default="simple,simple_tag", help="comma-separated registered envs")
    ap.add_argument("--num-envs", default="1,4096", help="comma-separated num_envs")
    ap.add_argument("--steps", type=int, default=300, help="steps per timed turn")
    ap.add_argument("--repeats", type=int, default=7, help="turns per path (the best is kept)")
    ap.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N")
    return ap.parse_args(argv)


def make(scenario: str, num_envs: int, device: torch.device, plain: bool):
    """The env of ``scenario`` (``NAME`` or ``NAME:cuda_c``), on its plain launch path when ``plain``."""
    name, _, language = scenario.partition(":")
    extra = {"kernel_source": "cuda_c"} if language == "cuda_c" else {}
    env = gpurl.make(name, num_envs=num_envs, seed=0, validate=False, global_state=False, device=device, **extra)
    if plain and isinstance(env.launcher, DirectLauncher):
        env.launcher.direct.pin(None)  # every CPU launch passes the named tuple
    if plain and isinstance(env.launcher, PreparedLauncher):
        env.launcher = DispatchLauncher(env)  # every CUDA launch goes through numba-cuda's dispatch
    if plain and isinstance(env.launcher, GridCudaC):
        env.launcher = GridCudaC(env, env.launcher.module, prepare=False)  # CuPy's launch at every call
    env.reset()
    return env


def timed(env, pool: list, steps: int, device: torch.device) -> tuple[float, float]:
    """(host seconds to issue ``steps`` steps, seconds until they have run), per step."""
    sync(device)
    start = time.perf_counter()
    for t in range(steps):
        env.step(pool[t % POOL])
    issued = time.perf_counter()
    sync(device)
    return (issued - start) / steps, (time.perf_counter() - start) / steps


def measure(name: str, num_envs: int, steps: int, repeats: int, device: torch.device, fast: str) -> dict:
    envs = {fast: make(name, num_envs, device, False), "plain": make(name, num_envs, device, True)}
    gen = torch.Generator().manual_seed(0)
    groups = list(envs[fast].groups.values())
    pool = [torch.cat([torch.randint(0, g.action_space.n, (num_envs, g.agents.stop - g.agents.start),
                                     generator=gen) for g in groups], dim=1).to(device) for _ in range(POOL)]
    for env in envs.values():  # compiles, warms
        timed(env, pool, 50, device)
    host = {path: float("inf") for path in envs}
    wall = dict(host)
    for _ in range(repeats):
        for path, env in envs.items():
            h, w = timed(env, pool, steps, device)
            host[path], wall[path] = min(host[path], h), min(wall[path], w)
    row = {"env": name, "num_envs": num_envs}
    for path in envs:
        row[f"{path}_us"], row[f"{path}_synced_us"] = host[path] * 1e6, wall[path] * 1e6
    row[f"plain_over_{fast}"] = host["plain"] / host[fast]
    row[f"plain_over_{fast}_synced"] = wall["plain"] / wall[fast]
    return row


def main(argv=None) -> dict:
    args = parse_args(argv)
    device = resolve_device(args.device)
    fast = "prepared" if device.type == "cuda" else "table"
    machine = describe_machine(device)
    print(f"{device.type.upper()} launch paths, side by side: " + ", ".join(f"{k}={v}" for k, v in machine.items()))
    print(f"settings: steps={args.steps} repeats={args.repeats} (best kept), validate=False, global_state=False; "
          "us per step: host time to issue it / synchronised (issue and run)")
    rows = []
    for name in args.scenarios.split(","):
        for num_envs in (int(n) for n in args.num_envs.split(",")):
            row = measure(name, num_envs, args.steps, args.repeats, device, fast)
            rows.append(row)
            print(f"  {name:24s} {num_envs:6d} envs: {fast} {row[f'{fast}_us']:8.2f} / {row[f'{fast}_synced_us']:8.2f} us, "
                  f"plain {row['plain_us']:8.2f} / {row['plain_synced_us']:8.2f} us, plain / {fast} "
                  f"{row[f'plain_over_{fast}']:.2f} / {row[f'plain_over_{fast}_synced']:.2f}")
    payload = {"bench": "launch_paths", "device": str(device), "machine": machine, "rows": rows,
               "settings": {"steps": args.steps, "repeats": args.repeats}}
    print_result(payload)
    return payload


if __name__ == "__main__":
    main()
