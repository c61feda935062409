"""One config over several seeds in one process, side by side (``gpurl train --seeds 0,1,2``).

Every seed is a whole run of its own (:class:`gpurl.train.run.TrainingRun`): its own trainer, log dir
(``<log_dir>/seed<k>``, or each its default dir), run id, checkpoints, ``metrics.csv`` and loggers. The sweep
steps them iteration by iteration in turn, so one process imports, compiles and warms up once for every
seed, and a seed's results are those of ``gpurl train --seed k`` alone (the trainer keeps its generators to
itself and sets no global state; tests/test_sweep.py holds them to it). At the end it reports the mean, the
standard deviation and a 95% confidence interval over seeds of the final returns per group and of the env's
metrics (:func:`summarize`).

Every refusal comes before any seed writes a file: all seeds are checked and their log dirs claimed, then
all trainers are built, then each run begins. ``--resume auto --log-dir D`` continues every seed from its own
``D/seed<k>``; a single checkpoint (``--resume PATH``) is one seed's run and is refused, as are profiling and
several ranks (torchrun).
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

from ..multigpu.placement import Placement
from .checkpoint import atomic_write_bytes
from .config import AUTO_RESUME, TrainConfig
from .evaluation import mean_std_ci95
from .run import TrainingRun
from .run_record import new_run_id

#: The file a sweep with a log dir writes into it at the end: the RESULT line's payload.
SWEEP_FILE = "sweep.json"


def parse_seeds(text: str) -> tuple[int, ...]:
    """``--seeds 0,1,2``: distinct whole numbers >= 0, at least one; ValueError says what is wrong."""
    parts = [p.strip() for p in str(text).split(",")]
    if not any(parts):
        raise ValueError(f"--seeds takes comma-separated seeds (e.g. 0,1,2), got {text!r}")
    seeds = []
    for part in parts:
        if not part.isdigit() or int(part) >= 2**64:
            raise ValueError(f"--seeds takes comma-separated whole numbers in [0, 2**64), got {part!r} in {text!r}")
        seeds.append(int(part))
    repeated = sorted({s for s in seeds if seeds.count(s) > 1})
    if repeated:
        raise ValueError(f"--seeds names seed(s) {repeated} twice: each seed runs once")
    return tuple(seeds)


def check_sweep_flags(explicit: dict, world_size: int = 1) -> None:
    """Refuse the flags a sweep cannot honour (before anything is loaded or written)."""
    if "seed" in explicit:
        raise ValueError(f"--seeds runs one run per seed: leave out --seed (got --seed {explicit['seed']})")
    resume = explicit.get("resume")
    if resume and resume != AUTO_RESUME:
        raise ValueError(f"--resume {resume}: a checkpoint is one seed's run; continue a sweep with --resume auto "
                         "--log-dir D (each seed from D/seed<k>), or resume that seed alone without --seeds")
    for name, flag in (("profile", "--profile"), ("nsys_iters", "--nsys-iters")):
        if explicit.get(name):
            raise ValueError(f"{flag} profiles one run: run the seed to profile alone, without --seeds")
    if world_size > 1:
        raise ValueError(f"--seeds runs every seed side by side in one process; this is one of {world_size} ranks "
                         "(torchrun): start the sweep without torchrun, or each seed as its own torchrun job")


def seed_log_dir(log_dir: str | Path, seed: int) -> str:
    return str(Path(log_dir) / f"seed{seed}")


def seed_commands(explicit: dict, seeds: tuple[int, ...]) -> list[dict]:
    """Each seed's flags: the command's own with ``seed=k`` and, given ``--log-dir D``, ``log_dir=D/seed<k>``.
    Progress is plain lines (one bar per seed would fight over the terminal); with ``--wandb`` every seed's
    W&B run goes into one group (``--wandb-group``, else D's name, else ``seeds-<time>-<random>``)."""
    shared = dict(explicit, progress=False)
    if shared.get("wandb") and not shared.get("wandb_group"):
        shared["wandb_group"] = Path(shared["log_dir"]).name if shared.get("log_dir") else f"seeds-{new_run_id()}"
    commands = []
    for seed in seeds:
        command = dict(shared, seed=seed)
        if shared.get("log_dir"):
            command["log_dir"] = seed_log_dir(shared["log_dir"], seed)
        commands.append(command)
    return commands


def _prefixed(say, seed: int):
    def say_seed(*args, **kwargs):
        say(f"[seed {seed}] " + " ".join(str(a) for a in args), **kwargs)
    return say_seed


def sweep(configs: list[TrainConfig], checkpoints: list[dict | None] | None = None, say=print,
          placement: Placement | None = None, sweep_dir: str | Path | None = None) -> dict:
    """Run ``configs`` (one per seed; ``checkpoints``: each one's, or None) side by side and return the
    sweep's payload: ``seeds``, ``runs`` (each seed's result), ``summary`` (:func:`summarize`) and ``sweep``
    (wall time, env steps and their rate over the interleaved training loop). With ``sweep_dir`` the
    payload also goes to ``sweep_dir/sweep.json``."""
    started = time.perf_counter()
    checkpoints = checkpoints or [None] * len(configs)
    seeds = [cfg.seed for cfg in configs]
    # Refusals of every seed first (nothing built or written), then every trainer (memory), then the writes.
    runs = [TrainingRun(cfg, ckpt, say=_prefixed(say, cfg.seed), placement=placement, lines=_prefixed(say, cfg.seed))
            for cfg, ckpt in zip(configs, checkpoints)]
    failed = True
    try:
        for run in runs:
            run.build()
        for run in runs:
            run.begin()
        loop_start = time.perf_counter()
        steps_before = sum(run.trainer.env_steps for run in runs)
        while not all(run.done for run in runs):
            for run in runs:
                if not run.done:
                    run.step()
        loop_seconds = time.perf_counter() - loop_start
        loop_steps = sum(run.trainer.env_steps for run in runs) - steps_before
        failed = False
    finally:
        for run in runs:
            run.close(failed=failed)
    results = [run.finish() for run in runs]
    if results[0] is None:  # not the main rank
        return {}
    payload = {
        "seeds": seeds, "runs": results,
        "summary": summarize(results, [run.runlog.rows for run in runs]),
        "sweep": {"side_by_side": True, "wall_seconds": time.perf_counter() - started, "loop_seconds": loop_seconds,
                  "loop_env_steps": loop_steps, "env_steps_per_s": loop_steps / loop_seconds if loop_seconds else None,
                  "log_dir": str(sweep_dir) if sweep_dir else None},
    }
    if sweep_dir:
        atomic_write_bytes(Path(sweep_dir) / SWEEP_FILE, json.dumps(payload, indent=1, sort_keys=True).encode())
    return payload


def spread(values: list[float]) -> dict:
    """Mean, sample standard deviation and the 95% confidence interval of the mean (Student's t) of
    ``values``; std and ci95 are None for a single value."""
    mean, std, half = mean_std_ci95(values)
    ci95 = None if half is None else [mean - half, mean + half]
    return {"n": len(values), "mean": mean, "std": std, "ci95": ci95, "values": values}


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def summarize(results: list[dict], rows: list[list[dict]]) -> dict[str, dict]:
    """:func:`spread` over seeds of each result's measured returns and env metrics (``*_final``, ``*_random``),
    its throughput, and the last logged value of each return and env metric (``return_<group>_last``,
    ``<metric>_per_episode_last``, ``episode_length_last``: what a run without ``eval_episodes`` has)."""
    per_key: dict[str, list[float]] = {}
    for result, seed_rows in zip(results, rows):
        values = {k: v for k, v in result.items()
                  if (k.endswith(("_final", "_random")) or k == "agent_steps_per_s") and _is_number(v)}
        for row in seed_rows:  # the last value each metric was logged with
            for key, value in row.items():
                if (key.startswith("return/") or key.endswith("_per_episode") or key == "episode_length") \
                        and value not in (None, ""):
                    values[key.replace("return/", "return_") + "_last"] = float(value)
        for key, value in values.items():
            per_key.setdefault(key, []).append(float(value))
    return {key: spread(values) for key, values in sorted(per_key.items())}


def report_lines(payload: dict) -> list[str]:
    """The sweep's summary for people: one line per measure, then the throughput."""
    lines = []
    for key, s in payload["summary"].items():
        if key == "agent_steps_per_s":
            continue
        values = ", ".join(f"{seed}: {v:.4g}" for seed, v in zip(payload["seeds"], s["values"])) \
            if s["n"] == len(payload["seeds"]) else f"{s['n']} of {len(payload['seeds'])} seeds"
        if s["std"] is None:
            lines.append(f"{key}: {s['mean']:.4g} ({values})")
        else:
            lo, hi = s["ci95"]
            lines.append(f"{key}: mean {s['mean']:.4g}, std {s['std']:.3g}, 95% CI [{lo:.4g}, {hi:.4g}] ({values})")
    info = payload["sweep"]
    rate = info["env_steps_per_s"]
    lines.append(f"sweep: {len(payload['seeds'])} seeds side by side in one process, {info['wall_seconds']:.1f} s in "
                 f"all; training loop {info['loop_seconds']:.1f} s, " + (f"{rate:.4g} env-steps/s" if rate else "-"))
    return lines


__all__ = ["SWEEP_FILE", "check_sweep_flags", "parse_seeds", "report_lines", "seed_commands", "seed_log_dir",
           "spread", "summarize", "sweep"]
