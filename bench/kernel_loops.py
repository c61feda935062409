#!/usr/bin/env python
"""The loops of each env kernel's sm_90 machine code, with the CUDA builds' counted range loops and without.

    python bench/kernel_loops.py                                  # tag-10v100 and simple_tag 3v1v2
    python bench/kernel_loops.py --configs tag-10v100 --top 12

A CUDA build compiles each ``for j in range(...)`` of an env's source as a counted while loop
(gpurl.kernels.counted_loops); ``counted_loops.ENABLED = False`` compiles them as Numba lowers ``range``.
For each configuration of bench/kernel_inventory.py this compiles the env's step and reset kernels both ways,
each in a process of its own (a build is cached per process), assembles them with ptxas for sm_90 and reads
the machine code (cuobjdump): instructions in all, registers, and every innermost loop that reads global
memory, with its instructions per load. Innermost loops are where an env kernel spends its time (a pass over
the env's agents per agent); the sum over them of instructions per load is a static figure, not a run time:
a GPU run (bench/env_throughput.py, bench/env_vs_ref.py) says what it buys. No GPU is needed; CUDA toolkit
ptxas and a cuobjdump (the toolkit's or Triton's) are. Ends with ``RESULT {json}``.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from _common import describe_machine, print_result  # noqa: E402

VARIANTS = ("counted", "range")
DEFAULT_CONFIGS = "tag-10v100,simple-tag-3v1v2"


def measure(configs: list[str], variant: str) -> list[dict]:
    """Rows of one variant, in this process: one per (config, phase) kernel."""
    import kernel_inventory as inv

    from gpurl.kernels import counted_loops
    from gpurl.kernels.aot import (assemble_sm90, cached_ptx_sm90, find_ptxas, sass_instructions, sass_loops,
                                   sass_sm90)

    counted_loops.ENABLED = variant == "counted"
    ptxas = find_ptxas()
    rows = []
    for config in configs:
        _, launches = inv.record_launches(inv.ENV_KERNEL_CONFIGS[config])
        compiled: dict[str, dict] = {}  # one kernel may serve both the reset and the step
        for launch in launches:
            ptx = cached_ptx_sm90(launch.kernel, launch.args, launch.constants)
            if ptx in compiled:
                compiled[ptx]["phase"] += "+" + launch.phase
                continue
            sass = sass_sm90(assemble_sm90(ptx, ptxas))
            loops = sass_loops(sass)
            innermost = [loop for loop in loops if loop.loads and not any(loop.contains(o) for o in loops)]
            rows.append(compiled.setdefault(ptx, dict(
                config=config, phase=launch.phase, kernel=launch.kernel.name,
                instructions=len(sass_instructions(sass)),
                registers=inv.launch_resources(launch, ptxas).registers,
                loops=[dict(instructions=len(loop.instructions), loads=loop.loads) for loop in innermost],
            )))
    return rows


def per_load(loops: list[dict]) -> float:
    return sum(loop["instructions"] for loop in loops) / max(sum(loop["loads"] for loop in loops), 1)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", default=DEFAULT_CONFIGS, help="bench/kernel_inventory.py configurations")
    parser.add_argument("--top", type=int, default=8, help="the largest innermost loops listed per kernel")
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)  # a child process's one variant
    args = parser.parse_args(argv)
    configs = [c for c in args.configs.split(",") if c]
    if args.variant:
        print(json.dumps(measure(configs, args.variant)))
        return {}

    print("sm_90 machine code of env kernels: range loops counted (gpurl's CUDA builds) vs as Numba lowers range")
    print("machine: " + ", ".join(f"{k}={v}" for k, v in describe_machine(torch.device("cpu")).items()))
    results = {}
    for variant in VARIANTS:
        done = subprocess.run([sys.executable, __file__, "--variant", variant, "--configs", ",".join(configs)],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"the {variant} variant failed:\n{done.stderr[-4000:]}")
        results[variant] = json.loads(done.stdout.strip().splitlines()[-1])
    rows = []
    for counted, plain in zip(results["counted"], results["range"]):
        row = dict(config=counted["config"], phase=counted["phase"], kernel=counted["kernel"],
                   instructions={v: r["instructions"] for v, r in (("counted", counted), ("range", plain))},
                   registers={v: r["registers"] for v, r in (("counted", counted), ("range", plain))},
                   per_load={v: round(per_load(r["loops"]), 2) for v, r in (("counted", counted), ("range", plain))},
                   loops={v: r["loops"] for v, r in (("counted", counted), ("range", plain))})
        rows.append(row)
        change = {key: f"{row[key]['range']} -> {row[key]['counted']}"
                  for key in ("instructions", "registers", "per_load")}
        print(f"\n{row['config']} {row['phase']} ({row['kernel']}): instructions {change['instructions']}, "
              f"registers {change['registers']}, innermost loops' instructions per load {change['per_load']}")
        for variant in ("range", "counted"):
            largest = sorted(row["loops"][variant], key=lambda loop: -loop["loads"])[:args.top]
            print(f"  {variant:8s} innermost loops (instructions/loads): "
                  + ", ".join(f"{loop['instructions']}/{loop['loads']}" for loop in largest))
    payload = {"bench": "kernel_loops", "machine": describe_machine(torch.device("cpu")), "configs": configs,
               "rows": [{k: v for k, v in row.items() if k != "loops"} for row in rows]}
    print_result(payload)
    return payload


if __name__ == "__main__":
    main()
