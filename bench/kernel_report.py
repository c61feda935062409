#!/usr/bin/env python
"""GPU readiness on paper: how close each kernel should come to an H100, from sm_90 compiles on a CPU machine.

    python bench/kernel_report.py                          # every configuration (about 2-3 min on 2 vCPUs)
    python bench/kernel_report.py --configs tag-10v100 --seconds 1

For every env kernel (recorded from the env's own reset and step, see bench/kernel_inventory.py) and every
Triton kernel at the named configurations (tag-10v100 at 1000 envs, simple_tag 3v1v2 at 4096 envs, grid-4
at 2000 envs; the fused actor at 1e5 rows for each preset's policy, and the fused GRU step of that
policy made recurrent; GAE over each preset's rollout), it prints:

- sm_90 registers, spills and shared memory: ``ptxas -v`` (CUDA toolkit) on the PTX the GPU build would
  load; Triton's dynamic shared memory from its compile;
- theoretical occupancy at the launch geometry (env kernels: gpurl.kernels.program.launch_geometry, and
  the share of a block's threads that hold an agent; Triton: the launcher's grid and warps):
  gpurl.kernels.occupancy, the CUDA occupancy calculator's rules;
- bytes per launch, and the H100 bytes-bound rate in agent-steps/s at 3.35 TB/s (the SXM's HBM3);
- next to it, the CPU rate of the same configuration measured in this run (the CPU build of the env;
  the torch definition for the actor and GAE). CPU numbers are CPU numbers, never GPU figures.

Traffic model (bytes per launch): every distinct array argument is read once in full, and every array
the step writes is written once in full. "Written" is observed, not declared: the arrays (matched by
their argument path) whose contents change over a few steps of the CPU build; an array only the CUDA
build has counts as written. It ignores cache reuse and re-reads (neighbour reads of positions, the
k-nearest scratch read per phase), counts write-only arrays (obs) as read too, and misses writes of
unchanged values (flags) and work outside the kernels (torch copies of actions): a rough figure for
"how fast could this be if memory were the only limit". Ends with ``RESULT {json}``.
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kernel_inventory as inv  # noqa: E402
from _common import describe_machine, print_result  # noqa: E402

import gpurl  # noqa: E402
from gpurl.kernels.aot import find_ptxas  # noqa: E402
from gpurl.kernels.occupancy import SM90, occupancy  # noqa: E402
from gpurl.kernels.program import block_size  # noqa: E402


def versions(ptxas: str | None) -> dict:
    import numba
    import triton

    out = {"python": platform.python_version(), "torch": torch.__version__, "numba": numba.__version__,
           "triton": triton.__version__, "numpy": np.__version__}
    try:
        from importlib.metadata import version

        out["numba_cuda"] = version("numba-cuda")
    except Exception:  # noqa: BLE001 - a missing distribution name is not an error here
        pass
    if ptxas:
        done = subprocess.run([ptxas, "--version"], capture_output=True, text=True)
        out["ptxas"] = done.stdout.strip().splitlines()[-1] if done.returncode == 0 else "?"
    return out


# ---- CPU measurements -------------------------------------------------------------------------------------

def time_loop(fn, seconds: float, repeats: int = 3) -> tuple[float, int]:
    """(best seconds per call, calls per repeat) of ``fn`` after one warm-up call; the best of
    ``repeats`` because a shared machine's neighbours only ever add time."""
    start = time.perf_counter()
    fn()
    estimate = max(time.perf_counter() - start, 1e-6)
    calls = max(3, int(seconds / repeats / estimate))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best, calls


def cpu_env(config: inv.EnvConfig, seconds: float) -> dict:
    """The CPU build of ``config``: agent-steps/s of env.step (random actions from a pool, autoreset on,
    validate=False) and the argument paths its step launches write (changed over 3 steps)."""
    env = gpurl.make(config.env, num_envs=config.num_envs, device="cpu", seed=0, validate=False, **config.params)
    gen = torch.Generator().manual_seed(1)
    pool = [inv.random_actions(env, gen) for _ in range(8)]
    with inv.recording(run_kernels=True) as start:
        start("reset")
        env.reset()
        launches = start("step")
        env.step(pool[0])  # compiles the CPU build
    # The env's arrays are allocated once, so a reset's launch names the buffers its steps use too (a CPU
    # step may skip EnvKernel.launch once its build is warm: DirectLaunch); a step's own arguments win.
    step_arrays = {}
    for launch in sorted(launches, key=lambda x: x.phase != "step"):
        for path, a in inv.distinct_arrays(launch.args).items():
            step_arrays.setdefault(path, a)
    for t in range(5):
        env.step(pool[t % len(pool)])
    before = {path: a.copy() for path, a in step_arrays.items()}
    for t in range(3):
        env.step(pool[t % len(pool)])
    written = {path for path, a in step_arrays.items() if not np.array_equal(a, before[path])}
    counter = iter(range(1 << 62))
    per_step, calls = time_loop(lambda: env.step(pool[next(counter) % len(pool)]), seconds)
    agents = config.num_envs * env.num_agents
    return dict(paths=set(step_arrays), written=written, ms_per_step=per_step * 1e3, steps_timed=calls,
                agent_steps_per_s=agents / per_step)


def cpu_actor(launch: inv.TritonLaunch, backend: str, seconds: float) -> dict:
    """Rows/s of the torch definition of acting (gpurl.algos.acting.Acting, ``backend``) on the CPU, with
    the same policy and rows as the fused kernel's launch."""
    from gpurl.algos.acting import Acting
    from gpurl.fusion.counter_rng import seed_tensor

    policy, rows = launch.extra["policy"], launch.items
    heads = launch.constexprs["HEADS"]
    x = torch.randn(rows, 1, policy.in_dim, generator=torch.Generator().manual_seed(2))
    value = torch.zeros(rows, 1) if policy.critic is not None else None
    outs = (torch.zeros(rows, 1, heads, dtype=torch.int64), torch.zeros(rows, 1), value)
    # A recurrent policy carries its state from one slot to the next: [2, rows, 1, H], none starting.
    states = torch.zeros(2, rows, 1, policy.hidden_size)
    hidden = {"g": (states[0], torch.zeros(rows, dtype=torch.bool), states[1])} if policy.recurrent else None
    acting = Acting({"g": policy}, {"g": 0}, backend, seed_tensor(0, torch.device("cpu")), 0, 1)
    step = torch.zeros(1, dtype=torch.int64)
    per_call, calls = time_loop(lambda: acting({"g": x}, step, {"g": outs}, hidden=hidden), seconds)
    return dict(backend=backend, ms_per_call=per_call * 1e3, calls_timed=calls, agent_steps_per_s=rows / per_call)


def cpu_gae(launch: inv.TritonLaunch, seconds: float) -> dict:
    """T*E*N / s of gae_ref (what the gpurl::gae op runs on the CPU) at the launch's shapes."""
    from gpurl.fusion import gae_ref

    T, E, N = launch.extra["T"], launch.extra["E"], launch.extra["N"]
    g = torch.Generator().manual_seed(3)
    r, v, fv = torch.randn(T, E, N, generator=g), torch.randn(T + 1, E, N, generator=g), torch.randn(T, E, N, generator=g)
    ends = torch.rand(T, E, generator=g)
    per_call, calls = time_loop(lambda: gae_ref(r, v, fv, ends < 0.01, (ends >= 0.01) & (ends < 0.02), 0.99, 0.95),
                                seconds)
    return dict(backend="gae_ref (torch)", ms_per_call=per_call * 1e3, calls_timed=calls,
                agent_steps_per_s=launch.items / per_call)


# ---- rows ---------------------------------------------------------------------------------------------------

def kernel_row(config: str, kernel: str, phase: str, blocks: int, threads: int, res: inv.Resources,
               bytes_read: int, bytes_written: int, items: int, detail: str = "", lanes_busy: float = 1.0) -> dict:
    occ = occupancy(threads, res.registers, res.static_shared + res.dynamic_shared)
    moved = bytes_read + bytes_written
    return dict(config=config, kernel=kernel, phase=phase, detail=detail, grid=blocks, block=threads,
                lanes_busy=lanes_busy,
                registers=res.registers, spill_stores=res.spill_stores, spill_loads=res.spill_loads,
                stack_frame=res.stack_frame, static_shared=res.static_shared, dynamic_shared=res.dynamic_shared,
                arch=res.arch, blocks_per_sm=occ.blocks_per_sm, occupancy=occ.occupancy, limiter="+".join(occ.limiter),
                waves=blocks / (inv.H100_SMS * occ.blocks_per_sm) if occ.blocks_per_sm else None,
                bytes_read=bytes_read, bytes_written=bytes_written, agent_steps=items,
                h100_agent_steps_per_s=items * inv.H100_BYTES_PER_S / moved if moved else None,
                problems=res.problems(threads, kernel))  # a spill within its allowance: in the spill columns only


def env_rows(config: inv.EnvConfig, cpu: dict, ptxas: str | None) -> tuple[list[dict], list[str], object]:
    env, launches = inv.record_launches(config)
    rows, notes = [], []
    agents = config.num_envs * env.num_agents
    for launch in launches:
        arrays = inv.distinct_arrays(launch.args)
        read = sum(a.nbytes for a in arrays.values())
        unknown = sorted(p for p in arrays if p not in cpu["paths"])
        if unknown and launch.phase == "step":
            notes.append(f"{config.name} {launch.kernel.name}: counted as written (no CPU counterpart): "
                         + ", ".join(unknown))
        written = sum(a.nbytes for p, a in arrays.items() if p in cpu["written"] or p not in cpu["paths"])
        if launch.phase == "reset":
            written = read  # a reset rewrites the state it is given (a bound, not observed)
        rows.append(kernel_row(config.name, launch.kernel.name, launch.phase, launch.blocks, launch.threads,
                               inv.launch_resources(launch, ptxas), read, written,
                               agents if launch.phase == "step" else 0, lanes_busy=launch.lanes_busy))
    cuda_c = inv.cuda_c_kernels().get(config.env)
    if cuda_c is not None:
        step = [r for r in rows if r["phase"] == "step"]
        rows.append(kernel_row(config.name, cuda_c[1], "step (CUDA C)", config.num_envs, block_size(env.num_agents),
                               inv.cuda_c_resources(*cuda_c, ptxas), sum(r["bytes_read"] for r in step),
                               sum(r["bytes_written"] for r in step), agents,
                               "kernel_source='cuda_c': replaces the step launches, same buffers"))
    return rows, notes, env


def triton_rows(config: inv.EnvConfig, env, args, ptxas: str | None) -> list[dict]:
    rows = []
    for launch in inv.triton_launches(config, env):
        row = kernel_row(config.name, launch.name, "act" if "actor" in launch.name else "learn", launch.programs,
                         launch.threads, inv.triton_resources(launch, ptxas), launch.bytes_read,
                         launch.bytes_written, launch.items, launch.detail)
        # The PPO family's actors are timed against their torch definition here; the value-based and Box
        # actors' CPU backends are bench/kernels.py's (--q-actions, --box-actions).
        if launch.name in ("actor_fused_kernel", "gru_actor_fused_kernel"):
            row["cpu"] = cpu_actor(launch, args.cpu_actor, args.seconds)
        elif launch.name == "gae_fused_kernel":
            row["cpu"] = cpu_gae(launch, args.seconds)
        rows.append(row)
    return rows


# ---- printing ---------------------------------------------------------------------------------------------

def fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000


def print_kernel_table(rows: list[dict]) -> None:
    head = (f"{'config':17s} {'kernel':19s} {'phase':13s} {'grid x block':>13s} {'busy':>5s} {'regs':>4s} {'spill st/ld B':>13s} "
            f"{'smem st/dyn':>12s} {'blk/SM':>6s} {'occ':>5s} {'limiter':17s} {'waves':>5s} {'read':>9s} {'written':>9s} "
            f"{'H100 bound':>10s}")
    print(head)
    print("-" * len(head))
    for r in rows:
        bound = f"{r['h100_agent_steps_per_s']:.3g}" if r["h100_agent_steps_per_s"] and r["agent_steps"] else "-"
        print(f"{r['config']:17s} {r['kernel']:19s} {r['phase']:13s} {r['grid']:>6d} x {r['block']:<4d} {r['lanes_busy']:5.0%} "
              f"{r['registers']:4d} {r['spill_stores']:>6d}/{r['spill_loads']:<6d} "
              f"{r['static_shared']:>5d}/{r['dynamic_shared']:<6d} {r['blocks_per_sm']:6d} {r['occupancy']:5.0%} "
              f"{r['limiter']:17s} {r['waves'] or 0:5.2f} {fmt_bytes(r['bytes_read']):>9s} {fmt_bytes(r['bytes_written']):>9s} {bound:>10s}")
        if r["detail"]:
            print(f"{'':17s}   {r['detail']}")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", default=",".join(inv.ENV_CONFIGS),
                        help=f"comma-separated of {list(inv.ENV_CONFIGS)}")
    parser.add_argument("--seconds", type=float, default=3.0, help="CPU timing per measurement (3 repeats)")
    parser.add_argument("--cpu-actor", default="compiled", choices=("compiled", "eager"),
                        help="torch backend of the CPU actor timing: compiled (torch.compile, the CPU trainer's "
                             "default; ~1 min to compile per policy) or eager")
    args = parser.parse_args(argv)
    names = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in names if c not in inv.ENV_CONFIGS]
    if unknown:
        raise SystemExit(f"unknown config(s) {unknown}; choose from {list(inv.ENV_CONFIGS)}")
    # Two vCPUs: torch's threads fight Numba's (the env step); one torch thread, as in env_throughput.py.
    torch.set_num_threads(1)
    ptxas = find_ptxas()
    if ptxas is None:
        raise SystemExit("no ptxas: install the CUDA toolkit or set GPURL_PTXAS")
    machine = describe_machine(torch.device("cpu"))
    load_start = os.getloadavg()[0]
    vers = versions(ptxas)
    print("gpurl kernel report: sm_90 resources and H100 bytes-bound rates (compiled here, no GPU), "
          "next to CPU rates measured in this run")
    print("machine (CPU timings): " + ", ".join(f"{k}={v}" for k, v in machine.items())
          + f", load average at start {os.getloadavg()[0]:.2f}")
    print("versions: " + ", ".join(f"{k}={v}" for k, v in vers.items()) + f", ptxas at {ptxas}")
    print(f"target: sm_90 (H100): {SM90.registers_per_sm} regs/SM, {SM90.max_threads_per_sm} threads/SM, "
          f"{SM90.max_blocks_per_sm} blocks/SM, {SM90.shared_per_sm // 1024} KiB shared/SM; "
          f"HBM {inv.H100_BYTES_PER_S / 1e12:.2f} TB/s")
    for name in names:
        c = inv.ENV_CONFIGS[name]
        print(f"config {name}: {c.description}; env {c.env}({', '.join(f'{k}={v}' for k, v in c.params.items())}), "
              f"num_envs={c.num_envs}; policy/rollout of training preset {c.preset!r}")
    print()
    rows, notes, summary = [], [], {}
    for name in names:
        config = inv.ENV_CONFIGS[name]
        cpu = cpu_env(config, args.seconds)
        env_part, env_notes, env = env_rows(config, cpu, ptxas)
        trit = triton_rows(config, env, args, ptxas)
        rows += env_part + trit
        notes += env_notes
        step = [r for r in env_part if r["phase"] == "step"]
        moved = sum(r["bytes_read"] + r["bytes_written"] for r in step)
        agents = config.num_envs * env.num_agents
        summary[name] = dict(
            env=config.env, num_envs=config.num_envs, num_agents=env.num_agents, agents_per_step=agents,
            step_kernels=[r["kernel"] for r in step], bytes_per_step=moved, bytes_per_agent_step=moved / agents,
            h100_bound_agent_steps_per_s=agents * inv.H100_BYTES_PER_S / moved,
            cpu_agent_steps_per_s=cpu["agent_steps_per_s"], cpu_ms_per_step=cpu["ms_per_step"],
            cpu_steps_timed=cpu["steps_timed"], written_arrays=sorted(cpu["written"]),
            triton={f"{r['kernel']} {r['detail']}": dict(
                bytes=r["bytes_read"] + r["bytes_written"], h100_bound_agent_steps_per_s=r["h100_agent_steps_per_s"],
                # the Q and Box actors are timed on the CPU by bench/kernels.py, not here
                **({"cpu_agent_steps_per_s": r["cpu"]["agent_steps_per_s"], "cpu_backend": r["cpu"]["backend"]}
                   if "cpu" in r else {})) for r in trit})
    print_kernel_table(rows)
    print("\ngrid x block: blocks x threads per block; busy: threads of a block that hold an agent; "
          "smem st/dyn: static / dynamic shared bytes per block; "
          "occ: theoretical occupancy (resident warps / 64); waves: grid / (132 SMs x blocks per SM), under 1 "
          "leaves SMs idle; H100 bound: agent-steps/s if the launch moved only "
          "its bytes at 3.35 TB/s (actor: rows/s; GAE: T*E*N/s)")
    print("\nper configuration (env step = every step launch; CPU = this machine's CPU build, measured now):")
    print(f"{'config':17s} {'agents/step':>11s} {'bytes/step':>10s} {'B/agent-step':>12s} "
          f"{'H100 bound agent-steps/s':>24s} {'CPU agent-steps/s':>17s} {'bound/CPU':>9s}")
    for name, s in summary.items():
        print(f"{name:17s} {s['agents_per_step']:11d} {fmt_bytes(s['bytes_per_step']):>10s} "
              f"{s['bytes_per_agent_step']:12.1f} {s['h100_bound_agent_steps_per_s']:24.3g} "
              f"{s['cpu_agent_steps_per_s']:17.3g} {s['h100_bound_agent_steps_per_s'] / s['cpu_agent_steps_per_s']:8.0f}x")
        for label, t in s["triton"].items():
            cpu_rate = (f"CPU ({t['cpu_backend']}) {t['cpu_agent_steps_per_s']:.3g}/s" if "cpu_backend" in t
                        else "CPU: bench/kernels.py")
            print(f"  {label}: {fmt_bytes(t['bytes'])}, H100 bound {t['h100_bound_agent_steps_per_s']:.3g}/s, {cpu_rate}")
    problems = [f"{r['config']} {r['kernel']} ({r['phase']}): {'; '.join(r['problems'])}" for r in rows if r["problems"]]
    machine["numba_threading_layer"] = describe_machine(torch.device("cpu")).get("numba_threading_layer")
    machine["load_average_start_end"] = [load_start, os.getloadavg()[0]]
    print(f"\nload average (1 min) at start {load_start:.2f}, at end {os.getloadavg()[0]:.2f} "
          f"(CPU rates are noisy when other processes run)")
    print("\nproblems (spills, per-block limits): " + ("none" if not problems else ""))
    for p in problems:
        print("  " + p)
    for n in notes:
        print("note: " + n)
    payload = dict(bench="kernel_report", device="cpu (no GPU: compiled for sm_90, not run)", machine=machine,
                   versions=vers, h100_bytes_per_s=inv.H100_BYTES_PER_S, configs=summary,
                   kernels=[{k: v for k, v in r.items() if k != "cpu"} | ({"cpu": r["cpu"]} if "cpu" in r else {})
                            for r in rows], problems=problems,
                   settings=dict(seconds=args.seconds, cpu_actor=args.cpu_actor, actor_rows=inv.ACTOR_ROWS))
    print_result(payload)
    return payload


if __name__ == "__main__":
    main()
