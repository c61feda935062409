"""How long a first run waits for an env's CPU build: a cold compile, with and without each of gpurl's compile
shortcuts.

    python bench/build_time.py                                   # simple_tag, tag_continuous, simple_world_comm
    python bench/build_time.py --envs simple_spread --rounds 3

Each measurement is a fresh Python process that makes the env (4 envs, CPU) and resets it, with gpurl's build
cache off (``GPURL_CACHE_DIR=off``), so the reset compiles the build: what a user's first run waits for. The
process reports the seconds from ``gpurl.make`` to the end of the reset (the compile, the address-table
wrapper, the first launch). Three modes rotate, round by round:

- ``gpurl``: gpurl as it is;
- ``per-block``: without the one-copy inlining (:mod:`gpurl.kernels.inline_copies`: Numba's inliner copies
  each callee's IR with one memo; here its own per-block copies);
- ``wrapped-callees``: the functions the driver calls compiled with Numba's wrappers for calls from Python and
  C (``gpurl.kernels.program.CALLEE_OPTIONS``), which the driver does not use.

Per env: the median seconds of each mode, and gpurl's over each other mode's. Every mode compiles the same
machine code (tests/test_inline_copies.py, tests/test_kernel_source.py). Ends with a ``RESULT {json}`` line.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

import numba
import torch

from _common import describe_machine, print_result

MODES = ("gpurl", "per-block", "wrapped-callees")
_CHILD = """
import json, sys, time
if sys.argv[2] == "per-block":
    from gpurl.kernels import inline_copies
    inline_copies._one_memo_inline_ir = None  # as if the installed Numba's inliner were not the expected one
if sys.argv[2] == "wrapped-callees":
    from gpurl.kernels import program
    program.CALLEE_OPTIONS = {"_nrt": False}  # Numba's defaults: both wrappers
import gpurl
start = time.perf_counter()
env = gpurl.make(sys.argv[1], num_envs=4, device="cpu")
env.reset()
print(json.dumps({"seconds": time.perf_counter() - start}))
"""


def one_build(env: str, mode: str) -> float:
    """Seconds from make to the end of the first reset of ``env`` in a fresh process, the build cache off."""
    done = subprocess.run([sys.executable, "-c", _CHILD, env, mode], capture_output=True, text=True,
                          env={**os.environ, "GPURL_CACHE_DIR": "off"})
    if done.returncode != 0:
        raise RuntimeError(f"{env} ({mode}) failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default="simple_tag,tag_continuous,simple_world_comm",
                        help="comma-separated registered env names (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=2, help="builds of each env in each mode (default: %(default)s)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1; got {args.rounds}")
    envs = [name.strip() for name in args.envs.split(",") if name.strip()]
    machine = describe_machine(torch.device("cpu"))
    print(f"CPU builds, cold (GPURL_CACHE_DIR=off), 4 envs, {args.rounds} rounds, the modes alternating; "
          f"{os.cpu_count()} CPUs; {json.dumps(machine)}", flush=True)
    rows = []
    for env in envs:
        seconds: dict[str, list[float]] = {mode: [] for mode in MODES}
        for round_ in range(args.rounds):
            turn = round_ % len(MODES)
            for mode in MODES[turn:] + MODES[:turn]:
                seconds[mode].append(one_build(env, mode))
                print(f"  {env} {mode}: {seconds[mode][-1]:.1f} s", flush=True)
        median = {mode: statistics.median(values) for mode, values in seconds.items()}
        row = {"env": env, **{f"{mode.replace('-', '_')}_s": round(median[mode], 2) for mode in MODES}}
        for mode in MODES[1:]:
            row[f"gpurl_over_{mode.replace('-', '_')}"] = round(median["gpurl"] / median[mode], 3)
        print(f"{env}: " + ", ".join(f"{mode} {median[mode]:.1f} s" for mode in MODES) + "; "
              + ", ".join(f"gpurl / {mode} {median['gpurl'] / median[mode]:.3f}" for mode in MODES[1:]), flush=True)
        rows.append(row)
    print_result({"bench": "build_time", "device": "cpu", "device_name": machine["device_name"],
                  "numba": numba.__version__, "rounds": args.rounds, "rows": rows})


if __name__ == "__main__":
    main()
