#!/usr/bin/env python
"""How much longer training takes beside other busy processes, under each thread policy: the training
phases (rollout and update, seconds per iteration) alone and beside ``--busy`` busy loops
(``while True: pass``, each its own process, started and killed here), alternating over ``--rounds``.

    python bench/contention.py                         # GPURL_THREADS=off (as before the policy) and auto
    python bench/contention.py --modes off,auto,1 --rounds 7 --iters 4

A mode is a ``GPURL_THREADS`` value (:mod:`gpurl.train.threads`), optionally followed by environment
variables for its process, ``+VAR=VALUE`` each (``auto+OMP_WAIT_POLICY=PASSIVE``: the policy with
OpenMP's idle threads sleeping at once). Thread settings are process-wide, so every mode trains in a
process of its own, set up as the ``gpurl train`` entry point sets itself up (``configure_process``,
then ``adapt_threads`` before each iteration as the run loop calls it), and keeps its trainer between
measurements; the modes take turns, so machine noise hits each alike. A measurement is ``--iters``
timed iterations led by ``--lead`` untimed ones (in which a load-following policy sees the new load
and, the first time, compiles the graphs of its new pool size),
all after ``--warmup`` untimed iterations at the start (compilation). The slowdown of a mode is the
median over rounds of loaded / quiet seconds per iteration. A fair share beside N busy loops on C
CPUs (N >= C) is about (N + C) / C times the quiet time of a process that uses all C: 2x for two
loops on two CPUs.

Ends with one line ``RESULT {json}``: machine, config, the background load average, and per mode its
thread report, median quiet and loaded seconds per iteration (rollout and update apart too) and the
slowdown.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modes", default="off,auto", help="comma-separated GPURL_THREADS values, one process each")
    ap.add_argument("--rounds", type=int, default=5, help="quiet + loaded measurements per mode")
    ap.add_argument("--iters", type=int, default=3, help="timed iterations per measurement")
    ap.add_argument("--warmup", type=int, default=2, help="untimed iterations first (compilation)")
    ap.add_argument("--busy", type=int, default=2, help="busy-loop processes of the loaded measurements")
    ap.add_argument("--lead", type=int, default=1,
                    help="untimed iterations at the start of each measurement (a load-following policy sees the "
                         "new load in them)")
    ap.add_argument("--settle", type=float, default=0.5, help="seconds between starting the loops and timing")
    ap.add_argument("--preset", default="tag-small", help="training preset (gpurl train --preset)")
    ap.add_argument("--num-envs", type=int, default=None, help="override the preset's num_envs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # one mode's trainer process
    return ap.parse_args(argv)


# ---- one mode's process: a trainer that times iterations on request ------------------------------

def child(args) -> None:
    """Started with GPURL_THREADS set; answers each line ``N`` on stdin with N timed iterations."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import tempfile

    import torch

    from gpurl.train import Trainer, build_config
    from gpurl.train.process import configure_process
    from gpurl.train.threads import adapt_threads

    threads = configure_process(0, torch.device("cpu"))
    overrides = {"num_envs": args.num_envs} if args.num_envs else {}
    cfg = build_config(args.preset, iters=10**6, eval_episodes=0, device="cpu", seed=args.seed,
                       log_dir=tempfile.mkdtemp(prefix="gpurl-contention-"), **overrides)
    trainer = Trainer(cfg)
    for _ in range(args.warmup):
        trainer.iterate()
    trainer.timer.read()
    print("READY " + json.dumps({"threads": threads, "config": cfg.to_dict()}), flush=True)
    for line in sys.stdin:
        lead, timed = (int(x) for x in line.split())
        seconds, threads = [], []
        for i in range(lead + timed):
            adapt_threads()  # as the run loop does between iterations (gpurl.train.run)
            t0 = time.perf_counter()
            trainer.iterate()
            if i == lead - 1:
                trainer.timer.read()  # the lead iterations are not timed
            elif i >= lead:
                seconds.append(time.perf_counter() - t0)
                threads.append(torch.get_num_threads())
        print(json.dumps({"seconds": seconds, "threads": threads, "phases": trainer.timer.read()}), flush=True)


# ---- the parent: modes in turn, quiet and loaded ---------------------------------------------------

ROLLOUT, UPDATE = ("act", "env", "bookkeeping"), ("advantages", "learn")


class Mode:
    def __init__(self, name: str, args):
        cmd = [sys.executable, __file__, "--child", "--preset", args.preset, "--warmup", str(args.warmup),
               "--seed", str(args.seed)] + (["--num-envs", str(args.num_envs)] if args.num_envs else [])
        setting, *assignments = name.split("+")
        env = {**os.environ, "GPURL_THREADS": setting}
        for assignment in assignments:
            var, sep, value = assignment.partition("=")
            if not sep or not var:
                raise SystemExit(f"mode {name!r}: expected GPURL_THREADS_VALUE[+VAR=VALUE...], got {assignment!r}")
            env[var] = value
        self.name = name
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.samples: dict[str, list[dict]] = {"quiet": [], "loaded": []}
        line = self._line()
        while not line.startswith("READY "):
            line = self._line()
        self.ready = json.loads(line.removeprefix("READY "))

    def _line(self) -> str:
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"mode {self.name}: its process exited ({self.proc.wait()})")
        return line

    def measure(self, lead: int, iters: int, kind: str) -> dict:
        self.proc.stdin.write(f"{lead} {iters}\n")
        self.proc.stdin.flush()
        got = json.loads(self._line())
        per_iter = lambda names: sum(got["phases"].get(n, 0.0) for n in names) / iters  # noqa: E731
        sample = {"iteration": sum(got["seconds"]) / iters, "rollout": per_iter(ROLLOUT), "update": per_iter(UPDATE),
                  "threads": got["threads"]}
        self.samples[kind].append(sample)
        return sample

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)

    def summary(self) -> dict:
        med = lambda kind, key: statistics.median(s[key] for s in self.samples[kind])  # noqa: E731
        ratios = [lo["iteration"] / q["iteration"] for q, lo in zip(self.samples["quiet"], self.samples["loaded"])]
        return {"threads": self.ready["threads"],
                **{f"{kind}_{key}_s": round(med(kind, key), 4) for kind in ("quiet", "loaded")
                   for key in ("iteration", "rollout", "update")},
                "slowdown": round(statistics.median(ratios), 3), "slowdown_per_round": [round(r, 3) for r in ratios],
                **{f"{kind}_threads": sorted({t for s in self.samples[kind] for t in s["threads"]})
                   for kind in ("quiet", "loaded")}}


def busy_loops(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.child:
        child(args)
        return {}
    names = [m.strip() for m in args.modes.split(",") if m.strip()]
    load_start = os.getloadavg()
    modes: list[Mode] = []
    try:
        for name in names:  # one at a time: their compilations would compete
            modes.append(Mode(name, args))
            print(f"{name}: ready, {modes[-1].ready['threads']}", flush=True)
        for r in range(args.rounds):
            for mode in (modes if r % 2 == 0 else modes[::-1]):
                quiet = mode.measure(args.lead, args.iters, "quiet")
                loops = busy_loops(args.busy)
                try:
                    time.sleep(args.settle)
                    loaded = mode.measure(args.lead, args.iters, "loaded")
                finally:
                    stop(loops)
                print(f"round {r} {mode.name}: quiet {quiet['iteration']:.3f} s/iter (threads {quiet['threads']}), "
                      f"beside {args.busy} busy loops {loaded['iteration']:.3f} s/iter (threads {loaded['threads']}; "
                      f"{loaded['iteration'] / quiet['iteration']:.2f}x)", flush=True)
    finally:
        for mode in modes:
            mode.close()

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import torch

    from gpurl.train.machine import describe_machine
    from gpurl.train.threads import describe

    summaries = {m.name: m.summary() for m in modes}
    machine = describe_machine(torch.device("cpu"))
    for key in ("thread_policy", "torch_threads", "numba_threads", "numba_threading_layer", "omp_wait_policy"):
        machine.pop(key, None)  # this process trains nothing: each mode's own report is below
    print(f"machine: {machine}")
    config = modes[0].ready["config"]
    print(f"config: preset={args.preset} {config['num_envs']} envs, rollout_len {config['rollout_len']}; "
          f"{args.iters} iterations per measurement, {args.rounds} rounds, "
          f"{args.busy} busy loops; {args.lead} untimed lead iteration(s) per measurement; load average at start "
          f"{load_start[0]:.2f}")
    for name, s in summaries.items():
        print(f"{name}: {describe(s['threads'])}\n"
              f"    quiet {s['quiet_iteration_s']:.3f} s/iter (rollout {s['quiet_rollout_s']:.3f}, update "
              f"{s['quiet_update_s']:.3f}; threads {s['quiet_threads']}), beside the loops "
              f"{s['loaded_iteration_s']:.3f} (rollout {s['loaded_rollout_s']:.3f}, update {s['loaded_update_s']:.3f}; "
              f"threads {s['loaded_threads']}): slowdown {s['slowdown']:.2f}x (median of rounds)")
    result = {"device": "cpu", "machine": machine, "preset": args.preset, "num_envs": config["num_envs"],
              "rollout_len": config["rollout_len"], "iters": args.iters, "lead": args.lead, "rounds": args.rounds,
              "busy": args.busy, "loadavg_start": [round(x, 2) for x in load_start], "modes": summaries}
    print("RESULT " + json.dumps(result, sort_keys=True), flush=True)
    return result


if __name__ == "__main__":
    main()
