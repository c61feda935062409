#!/usr/bin/env python
"""Run the test tiers (DESIGN.md "Test tiers"), each in its own pytest process, and summarise.

    python tests/run_tiers.py                     # cpu, sim, compile, gpu
    python tests/run_tiers.py --tiers cpu,sim -x  # a selection; unknown args go to every pytest
    python tests/run_tiers.py --workers 1         # one pytest process per tier (no pytest-xdist)

Tiers run in separate processes because the simulator switches (NUMBA_ENABLE_CUDASIM, TRITON_INTERPRET)
are read once at import: the sim tier sets both, every other tier runs with both removed. A tier that
collects no tests (pytest exit 5) fails: every tier must have tests (gpu tests skip without CUDA, they do
not disappear); ``--allow-empty`` relaxes that for ad-hoc ``-k`` selections. Exits non-zero when any
tier failed. The last line is the plain total over all tiers, ``tests: N passed, N failed, N skipped``
(read from each tier's JUnit XML), so a CI log ends on what ran in every tier, not on the gpu tier's
skips.

The cpu, sim and compile tiers spread their test files over ``--workers`` pytest-xdist processes (default:
one per CPU, at most 4). Every test runs on one torch thread (tests/conftest.py) and most of a tier's time
is single-threaded compilation (Numba, Inductor, NVVM), so two workers on two vCPUs nearly halve it. Files
stay whole on one worker (``--dist loadfile``): a module's compiled fixtures are built once. In the cpu
tier workers take files in collection order, where tests/conftest.py puts the longest first (``LONG_FILES``) and
those whose time is compiles other files make anyway last (``LAST_FILES``). The gpu tier
runs in one process: its tests share one device and some of them time it.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TIERS = ("cpu", "sim", "compile", "gpu")
#: The order the tiers run in. The gpu tier goes first: without CUDA its pytest run closes on "N skipped"
#: and nothing passed, and a CI log whose last pytest summary is that reads as a run that tested nothing.
RUN_ORDER = ("gpu", "cpu", "sim", "compile")
SIMULATOR_ENV = {"NUMBA_ENABLE_CUDASIM": "1", "TRITON_INTERPRET": "1"}
NO_TESTS_COLLECTED = 5
#: Tiers whose tests are spread over pytest-xdist workers.
PARALLEL_TIERS = ("cpu", "sim", "compile")
MAX_DEFAULT_WORKERS = 4


def tier_env(tier: str) -> dict[str, str]:
    env = dict(os.environ)
    # Compiled kernels are cached across runs; defaults would land in site-packages / $HOME.
    env.setdefault("TRITON_CACHE_DIR", str(REPO / ".cache" / "triton"))
    env.setdefault("NUMBA_CACHE_DIR", str(REPO / ".cache" / "numba"))
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(REPO / ".cache" / "inductor"))
    for name in SIMULATOR_ENV:
        env.pop(name, None)
    if tier == "sim":
        env.update(SIMULATOR_ENV)
    return env


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], allow_abbrev=False,
        epilog="Any other arguments (-x, -k EXPR, -v, test paths) are passed to every tier's pytest.",
    )
    parser.add_argument("--tiers", default=",".join(TIERS),
                        help=f"comma-separated subset of {','.join(TIERS)} (run in the fixed order "
                             f"{','.join(RUN_ORDER)})")
    parser.add_argument("--workers", type=int, default=min(os.cpu_count() or 1, MAX_DEFAULT_WORKERS),
                        help="pytest-xdist processes for the cpu, sim and compile tiers "
                             "(default: one per CPU, at most %(default)s here; 1 runs each tier in one process)")
    parser.add_argument("--allow-empty", action="store_true",
                        help="count a tier that collects no tests (pytest exit 5) as passed")
    args, pytest_args = parser.parse_known_args(argv)
    chosen = [t.strip() for t in args.tiers.split(",") if t.strip()]
    unknown = sorted(set(chosen) - set(TIERS))
    if unknown or not chosen:
        parser.error(f"--tiers takes names from {', '.join(TIERS)}; got {args.tiers!r}")
    if args.workers < 1:
        parser.error(f"--workers must be at least 1; got {args.workers}")
    args.tiers = [t for t in RUN_ORDER if t in chosen]
    return args, pytest_args


def junit_counts(path: Path) -> dict[str, int]:
    """passed/failed/skipped of one pytest run from its JUnit XML (errors count as failed)."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    if not path.exists():
        return counts
    for suite in ET.parse(path).getroot().iter("testsuite"):
        tests, skipped = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
        failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        counts["passed"] += tests - skipped - failed
        counts["failed"] += failed
        counts["skipped"] += skipped
    return counts


def worker_args(tier: str, workers: int) -> list[str]:
    if workers == 1 or tier not in PARALLEL_TIERS:
        return []
    # The cpu tier in collection order (tests/conftest.py puts its longest files first); the others in
    # xdist's order, the files with the most tests first.
    return ["-n", str(workers), "--dist", "loadfile", *(["--no-loadscope-reorder"] if tier == "cpu" else [])]


def run_tier(tier: str, pytest_args: list[str], junit: Path, workers: int) -> tuple[int, float]:
    cmd = [sys.executable, "-m", "pytest", "-m", tier, f"--junitxml={junit}",
           *worker_args(tier, workers), *pytest_args]
    switches = " ".join(f"{k}=1" for k in SIMULATOR_ENV) + " " if tier == "sim" else ""
    print(f"\n===== tier {tier}: {switches}python {' '.join(cmd[1:])}", flush=True)
    start = time.perf_counter()
    code = subprocess.call(cmd, cwd=REPO, env=tier_env(tier))
    return code, time.perf_counter() - start


def verdict(code: int, allow_empty: bool) -> str:
    if code == 0 or (code == NO_TESTS_COLLECTED and allow_empty):
        return "passed"
    return {1: "FAILED", 2: "INTERRUPTED", 3: "INTERNAL ERROR", 4: "USAGE ERROR",
            NO_TESTS_COLLECTED: "NO TESTS"}.get(code, "FAILED")


def main(argv: list[str]) -> int:
    args, pytest_args = parse_args(argv)
    results = []
    totals = {"passed": 0, "failed": 0, "skipped": 0}
    with tempfile.TemporaryDirectory(prefix="gpurl-tiers-") as tmp:
        for tier in args.tiers:
            junit = Path(tmp) / f"{tier}.xml"
            code, seconds = run_tier(tier, pytest_args, junit, args.workers)
            results.append((tier, code, seconds))
            for key, n in junit_counts(junit).items():
                totals[key] += n
            if code == 2:  # Ctrl-C reaches pytest too: stop instead of starting the next tier
                break

    print("\n===== tiers")
    print(f"{'tier':<8} {'exit':>4}  {'result':<14} {'seconds':>8}")
    for tier, code, seconds in results:
        print(f"{tier:<8} {code:>4}  {verdict(code, args.allow_empty):<14} {seconds:>8.1f}")
    failed = [t for t, code, _ in results if verdict(code, args.allow_empty) != "passed"]
    skipped = [t for t in args.tiers if t not in {r[0] for r in results}]
    print(f"total {sum(s for _, _, s in results):.1f} s; "
          + (f"failed: {', '.join(failed)}" if failed else "all passed")
          + (f"; not run: {', '.join(skipped)}" if skipped else ""))
    print(f"tests: {totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped", flush=True)
    return 1 if failed or skipped else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
