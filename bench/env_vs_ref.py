"""Env speed of this checkout against an earlier commit, side by side in one process.

    python bench/env_vs_ref.py --ref HEAD~1                      # every configuration below
    python bench/env_vs_ref.py --ref HEAD --configs tag-10v100,simple_tag-3v1v2   # the regression floor
    python bench/env_vs_ref.py --ref 69ee721 --configs simple_tag-3v1v2 --rounds 9
    python bench/env_vs_ref.py --ref ab0f2fd --also-global-state   # and this checkout's env with the state on
    python bench/env_vs_ref.py --device cuda --ref f3d03ba --configs tag-10v100 --num-envs 1000,4096   # on a GPU

The package at ``--ref`` is exported with ``git archive`` into a temporary folder and imported as
``gpurl_ref`` (its imports rewritten, its torch op namespace renamed so both register), so both versions
step the same configuration with the same actions in the same process, alternating rounds: a shared,
noisy machine slows both alike, and the ratio is what the floor is about. Reported per configuration:
median agent-steps/s of each (wall clock, all of Numba's threads) and of one thread's CPU time (steady
even when other processes compete), and new / ref. Ends with a ``RESULT {json}`` line.

``--device cuda`` steps both on the GPU (per call, each round synchronised at its end); the per-CPU-second
column then counts the host's work of issuing the steps, and the wall column is the GPU figure.
``--also-row-major-scratch`` adds this checkout's env with its per-lane scratch row-major (a CUDA build
interleaves it by lane, ``Field.lanes_interleaved``) as a further column: what the interleaving alone gives.
``--also-launch-bounds 256,4`` (repeatable) adds this checkout's env with its CUDA build under other launch bounds
(``KernelEnv.cuda_launch_bounds``: fewer registers a thread, more env-blocks an SM, perhaps spills), a column
each ("new-bounds-256x4"): what occupancy gives against what the spills cost, measured where only a GPU can.

Global state (docs/specs/global_state.md): like for like. A ``--ref`` whose envs take no ``global_state``
keyword writes none, so this checkout's env is made with ``global_state=False`` (``--global-state auto``,
the default); against a ref that takes it, both run with the env's default (on). ``--global-state on|off``
sets it for both (the ref only where it takes the keyword); ``--also-global-state`` adds this checkout's env
with the state on as a third, alternated, column ("new+state"). The setting used is printed.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from _common import describe_machine, print_result
from gpurl.envs.tag_continuous import TAG_10V100

REPO = Path(__file__).resolve().parent.parent
ROW_MAJOR = "new-row-major"  # the label of --also-row-major-scratch's column
BOUNDS_LABEL = "new-bounds-"  # + "256x4": the label of an --also-launch-bounds column
CONFIGS = {
    "tag-10v100": ("tag_continuous", 1000, TAG_10V100, 200),  # env_throughput.py's tag-10v100
    "simple_tag-3v1v2": ("simple_tag", 4096, dict(num_adversaries=3, num_good=1, num_obstacles=2), 300),
    # The issue 23 scenarios below the 20x bar, at mpe2's defaults and bench/peers.py's 4096 envs.
    "simple": ("simple", 4096, {}, 300),
    "simple_adversary": ("simple_adversary", 4096, {}, 300),
    "simple_world_comm": ("simple_world_comm", 4096, {}, 100),
}


def import_ref(ref: str, folder: Path, ref_dir: Path | None = None):
    """The package ``gpurl`` at git ``ref`` (or the copy of it in ``ref_dir/gpurl``), importable as ``gpurl_ref``."""
    if ref_dir is not None:
        shutil.copytree(ref_dir / "gpurl", folder / "gpurl")
    else:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "gpurl"], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    (folder / "gpurl").rename(folder / "gpurl_ref")
    for path in (folder / "gpurl_ref").rglob("*.py"):
        text = path.read_text()
        text = re.sub(r"\bgpurl::", "gpurlref::", text)
        text = re.sub(r"\b(from|import) gpurl\b(?!_)", r"\1 gpurl_ref", text)
        text = re.sub(r"([\"'])gpurl\.", r"\1gpurl_ref.", text)
        path.write_text(text)
    sys.path.insert(0, str(folder))
    return importlib.import_module("gpurl_ref")


def actions_for(env, count: int, seed: int) -> list[torch.Tensor]:
    """``count`` action tensors on the env's device, drawn on the CPU (the same for every device)."""
    gen = torch.Generator().manual_seed(seed)
    shape = (env.num_envs, env.num_agents, env.action_dims)
    if env.action_dtype == torch.float32:
        return [torch.rand(shape, generator=gen).to(env.device) for _ in range(count)]
    high = env._action_high.cpu().expand(shape)
    return [(torch.rand(shape, generator=gen) * high).long().to(env.device) for _ in range(count)]


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(env, actions, steps: int) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of ``steps`` steps, finished on the env's device."""
    synchronize(env.device)
    wall, cpu = time.perf_counter(), time.process_time()
    for k in range(steps):
        env.step(actions[k % len(actions)])
    synchronize(env.device)
    return time.perf_counter() - wall, time.process_time() - cpu


def takes_global_state(pkg) -> bool:
    """Whether ``pkg``'s envs take the ``global_state`` keyword (commits before it write no global state)."""
    return "global_state" in inspect.signature(pkg.envs.KernelEnv.__init__).parameters


def global_state_settings(packages: dict, setting: str, also_state: bool) -> dict:
    """{label: the ``global_state`` keyword each env is made with, None for none} (see the module docstring)."""
    ref_takes = takes_global_state(packages["ref"])
    new = {"auto": True if ref_takes else False, "on": True, "off": False}[setting]
    settings = {"ref": new if ref_takes else None, "new": new}
    if also_state and not new:
        settings["new+state"] = True
    return settings


def describe_setting(state: bool | None) -> str:
    return "no global state (the ref takes no global_state keyword)" if state is None else f"global_state={state}"


@contextlib.contextmanager
def row_major_scratch(on: bool):
    """While ``on``: this checkout's envs get row-major per-lane scratch, as before issue 42's interleaving."""
    from gpurl.kernels import fields

    before = fields.INTERLEAVE_LANES
    fields.INTERLEAVE_LANES = not on and before
    try:
        yield
    finally:
        fields.INTERLEAVE_LANES = before


@contextlib.contextmanager
def launch_bounds_of(env_class, bounds: tuple[int, ...] | None):
    """While open: envs of ``env_class`` made now get a kernel of their own built with ``bounds`` (None: the
    class's), which they keep; the class's own kernel and bounds are back on exit."""
    if bounds is None:
        yield
        return
    saved = {name: env_class.__dict__[name] for name in ("_kernel", "cuda_launch_bounds") if name in env_class.__dict__}
    if "_kernel" in env_class.__dict__:
        del env_class._kernel  # class_kernel() builds a new one, with ``bounds``
    env_class.cuda_launch_bounds = bounds
    try:
        yield
    finally:
        for name in ("_kernel", "cuda_launch_bounds"):
            if name in env_class.__dict__:
                delattr(env_class, name)
        for name, value in saved.items():
            setattr(env_class, name, value)


def bounds_label(bounds: tuple[int, ...]) -> str:
    return BOUNDS_LABEL + "x".join(str(b) for b in bounds)


def parse_bounds(text: str) -> tuple[int, ...]:
    """``"256,4"`` -> (256, 4): an --also-launch-bounds value."""
    try:
        bounds = tuple(int(b) for b in text.split(","))
    except ValueError:
        bounds = ()
    if not 1 <= len(bounds) <= 2 or min(bounds) < 1:
        raise argparse.ArgumentTypeError(f"launch bounds are THREADS[,BLOCKS_PER_SM], positive; got {text!r}")
    return bounds


def compare(packages: dict, config: str, rounds: int, seed: int, settings: dict, device: str = "cpu",
            num_envs: int | None = None, bounds: dict | None = None) -> dict:
    """One configuration (at ``num_envs`` envs, else its own count) on ``device``, alternating rounds;
    ``bounds``: {label: launch bounds} of the --also-launch-bounds columns (made after "new")."""
    name, config_envs, params, steps = CONFIGS[config]
    num_envs = num_envs or config_envs
    envs = {}
    for label, state in settings.items():
        pkg = packages["ref" if label == "ref" else "new"]
        extra = {} if state is None else {"global_state": state}
        variant = (bounds or {}).get(label)
        with row_major_scratch(label == ROW_MAJOR), launch_bounds_of(variant and type(envs["new"]), variant):
            envs[label] = pkg.make(name, num_envs=num_envs, device=device, seed=seed, validate=False, **params,
                                   **extra)
        if variant and envs[label].kernel.launch_bounds != variant:
            raise RuntimeError(f"{label}: the env's kernel has launch bounds {envs[label].kernel.launch_bounds}")
    pools = {}
    for label, env in envs.items():
        env.reset()
        pools[label] = actions_for(env, 8, seed)
        timed(env, pools[label], 5)  # compile and warm up
    agents = num_envs * next(iter(envs.values())).num_agents
    wall = {label: [] for label in envs}
    cpu = {label: [] for label in envs}
    for r in range(rounds):
        for label in (list(envs) if r % 2 == 0 else list(reversed(envs))):
            w, c = timed(envs[label], pools[label], steps)
            wall[label].append(steps * agents / w)
            cpu[label].append(steps * agents / c)
    row = {"config": config, "num_envs": num_envs, "steps_per_round": steps, "device": device}
    for label in envs:
        row[f"{label}_wall"] = statistics.median(wall[label])
        row[f"{label}_cpu"] = statistics.median(cpu[label])
    row["ratio_wall"] = row["new_wall"] / row["ref_wall"]
    row["ratio_cpu"] = row["new_cpu"] / row["ref_cpu"]
    print(f"{config} ({num_envs} envs): agent-steps/s wall ref {row['ref_wall'] / 1e6:.2f}M new "
          f"{row['new_wall'] / 1e6:.2f}M (new/ref {row['ratio_wall']:.3f}); per CPU second ref "
          f"{row['ref_cpu'] / 1e6:.2f}M new {row['new_cpu'] / 1e6:.2f}M (new/ref {row['ratio_cpu']:.3f})", flush=True)
    if ROW_MAJOR in envs:
        row["ratio_row_major_wall"] = row[f"{ROW_MAJOR}_wall"] / row["ref_wall"]
        print(f"{config}: new with row-major per-lane scratch: wall {row[f'{ROW_MAJOR}_wall'] / 1e6:.2f}M "
              f"({ROW_MAJOR}/ref {row['ratio_row_major_wall']:.3f})", flush=True)
    for label in (bounds or {}):
        row[f"ratio_{label}_wall"] = row[f"{label}_wall"] / row["ref_wall"]
        print(f"{config}: new with launch bounds {bounds[label]}: wall {row[f'{label}_wall'] / 1e6:.2f}M "
              f"({label}/ref {row[f'ratio_{label}_wall']:.3f}, {label}/new "
              f"{row[f'{label}_wall'] / row['new_wall']:.3f})", flush=True)
    if "new+state" in envs:
        row["ratio_state_wall"] = row["new+state_wall"] / row["ref_wall"]
        row["ratio_state_cpu"] = row["new+state_cpu"] / row["ref_cpu"]
        print(f"{config}: new with global_state=True: wall {row['new+state_wall'] / 1e6:.2f}M (new+state/ref "
              f"{row['ratio_state_wall']:.3f}); per CPU second {row['new+state_cpu'] / 1e6:.2f}M "
              f"(new+state/ref {row['ratio_state_cpu']:.3f})", flush=True)
    return row


def git_head() -> tuple[str, bool]:
    """(this checkout's short commit, whether gpurl/ has uncommitted changes); ("unknown", False) without
    git (a GPU machine's copy of the working tree)."""
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "gpurl"], capture_output=True,
                               text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown", False
    return head, bool(dirty)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ref", default="HEAD", help="git revision to compare against (default: HEAD)")
    ap.add_argument("--ref-dir", type=Path, default=None,
                    help="instead of --ref: a folder holding the ref's gpurl/ and a COMMIT file, where there is no "
                         ".git (a GPU machine: bench/gpu_wheels.sh exports one into .whl/ref)")
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated subset of {list(CONFIGS)}")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    ap.add_argument("--num-envs", default="",
                    help="comma-separated env counts run for every configuration (default: each one's own)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--global-state", choices=("auto", "on", "off"), default="auto",
                    help="global_state= of the envs: auto (default) is off when the ref has no global state, "
                         "else the env default (on); on/off: both (the ref only where it takes the keyword)")
    ap.add_argument("--also-global-state", action="store_true",
                    help="also time this checkout's env with global_state=True (when the compared setting is off)")
    ap.add_argument("--also-row-major-scratch", action="store_true",
                    help="also time this checkout's env with its per-lane scratch row-major (CUDA builds interleave "
                         "it by lane: gpurl.kernels.fields.INTERLEAVE_LANES)")
    ap.add_argument("--also-launch-bounds", type=parse_bounds, action="append", default=[], metavar="THREADS,BLOCKS",
                    help="also time this checkout's env with its CUDA build under these launch bounds (repeatable)")
    args = ap.parse_args()
    configs = args.configs.split(",")
    sizes = [int(n) for n in args.num_envs.split(",") if n] or [None]
    if any(n < 1 for n in sizes if n is not None):
        ap.error(f"--num-envs must be positive, got {args.num_envs!r}")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: no CUDA device here")
    unknown = sorted(set(configs) - set(CONFIGS))
    if unknown:
        ap.error(f"unknown configs {unknown}; choose from {list(CONFIGS)}")
    if args.ref_dir is not None:
        if not (args.ref_dir / "gpurl").is_dir():
            ap.error(f"--ref-dir {args.ref_dir}: no gpurl/ folder in it")
        commit_file = args.ref_dir / "COMMIT"
        ref_commit = commit_file.read_text().strip() if commit_file.exists() else str(args.ref_dir)
        args.ref = ref_commit
        head, dirty = git_head()
    else:
        ref_commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", args.ref], capture_output=True,
                                    text=True, check=True).stdout.strip()
        head, dirty = git_head()
    import gpurl  # noqa: PLC0415

    machine = describe_machine(device)
    print(f"env speed, this checkout ({head}{' + uncommitted changes' if dirty else ''}) vs {args.ref} ({ref_commit}); "
          f"{device}; rounds={args.rounds} alternated; {machine}")
    with tempfile.TemporaryDirectory(prefix="gpurl-ref-") as folder:
        packages = {"ref": import_ref(args.ref, Path(folder), args.ref_dir), "new": gpurl}
        settings = global_state_settings(packages, args.global_state, args.also_global_state)
        if args.also_row_major_scratch:
            settings[ROW_MAJOR] = settings["new"]
        bounds = {bounds_label(b): b for b in args.also_launch_bounds}
        settings.update({label: settings["new"] for label in bounds})
        print("global state: " + "; ".join(f"{label} {describe_setting(s)}" for label, s in settings.items()),
              flush=True)
        rows = [compare(packages, config, args.rounds, args.seed, settings, args.device, n, bounds)
                for config in configs for n in sizes]
    print_result({"bench": "env_vs_ref", "ref": ref_commit, "head": head, "dirty": dirty, "device": str(device),
                  "machine": machine, "rounds": args.rounds, "global_state": settings, "rows": rows})


if __name__ == "__main__":
    main()
