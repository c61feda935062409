"""What a resume continues: the checkpoint's config with the run-control fields the user may change, where it
writes (the directory that holds the checkpoint, or ``--log-dir``), and whether any work is left (iterations, or
only a ``result.json`` that a kill left missing or torn). Used by :mod:`gpurl.train.run` and the CLI, before
anything is built or written.
"""
from __future__ import annotations

import json
from pathlib import Path

from .config import AUTO_RESUME, TrainConfig, from_values
from .run_record import RUN_FILE

#: Fields a resumed run may change; every other field comes from the checkpoint.
RESUME_OVERRIDABLE = ("iters", "total_steps", "log_dir", "log_every", "checkpoint_every", "profile", "progress",
                      "resume", "torch_threads", "device", "render_final", "nsys_iters", "dist", "dist_timeout",
                      "replication_check_every", "max_staleness", "env_modules", "policy_backend",
                      "learner_backend", "cuda_graph", "tf32", "fresh_log_dir", "wandb", "wandb_mode", "wandb_project",
                      "wandb_entity", "wandb_group")


def resume_config(checkpoint: dict, overrides: dict) -> TrainConfig:
    """The checkpoint's config with the run-control fields in ``overrides`` replaced; a value equal to the
    saved one is no change. The run continues in ``overrides["log_dir"]`` when given, else in the directory
    that holds the checkpoint ``overrides["resume"]``: never in the log dir recorded inside the checkpoint,
    so a copied run dir is a branch of its own."""
    saved = TrainConfig.from_dict(checkpoint["config"])
    saved_values = json.loads(json.dumps(saved.flat()))
    fixed = sorted(k for k in set(overrides) - set(RESUME_OVERRIDABLE)
                   if k not in saved_values or json.loads(json.dumps(overrides[k])) != saved_values[k])
    if fixed:
        raise ValueError(f"--resume continues the saved config; these cannot change: "
                         f"{', '.join(f'{k} (saved {saved_values.get(k)!r}, given {overrides[k]!r})' for k in fixed)} "
                         f"(changeable: {list(RESUME_OVERRIDABLE)})")
    changes = {k: v for k, v in overrides.items() if k in RESUME_OVERRIDABLE}
    resume = changes.get("resume")
    if not changes.get("log_dir") and resume and resume != AUTO_RESUME:
        changes["log_dir"] = str(Path(resume).parent)
    changes.setdefault("fresh_log_dir", False)  # asked for per start, not inherited from the saved run
    if "iters" in changes or "total_steps" in changes:
        changes.setdefault("iters", 0)
        changes.setdefault("total_steps", 0)
    return from_values({**saved.flat(), **changes}).validated()


def _flat(config: dict) -> dict:
    """A saved config (``TrainConfig.to_dict`` form, or an older flat one) as the CLI's flags name its values."""
    try:
        return TrainConfig.from_dict(config).flat()
    except (ValueError, TypeError):
        return dict(config)  # not a config this version reads: compared as it is


def config_differences(saved: dict, given: dict) -> list[str]:
    """The values (by flag name) that differ between two saved configs (``TrainConfig.to_dict`` form), other than
    those a resume may change: "name: saved there, given here" for each. Compared as JSON holds them (a tuple
    is a list)."""
    saved, given = json.loads(json.dumps(_flat(saved))), json.loads(json.dumps(_flat(given)))
    names = sorted(k for k in {*saved, *given} if k not in RESUME_OVERRIDABLE and saved.get(k) != given.get(k))
    return [f"{k}: {saved.get(k, '(unset)')!r} there, {given.get(k, '(unset)')!r} here" for k in names]


def restarted_run_id(log_dir: Path, cfg: TrainConfig) -> str | None:
    """``--resume auto`` found no checkpoint: the id of the run in ``log_dir`` when that run is an earlier start
    of this same command (its run.json holds this config) that died before its first checkpoint. The
    restart continues that run from iteration 0 and rewrites its logs; None: a fresh run."""
    try:
        record = json.loads((Path(log_dir) / RUN_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not record.get("run_id") or not isinstance(record.get("config"), dict):
        return None
    return None if config_differences(record["config"], cfg.to_dict()) else str(record["run_id"])


RESULT_FILE = "result.json"


def result_written(log_dir: str | Path, run_id: str, iteration: int) -> bool:
    """Whether ``log_dir`` holds the ``result.json`` of run ``run_id`` after ``iteration`` iterations (whole:
    it parses, and names that run and iteration)."""
    try:
        result = json.loads((Path(log_dir) / RESULT_FILE).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(result, dict) and result.get("run_id") == run_id and result.get("iterations") == iteration


def check_work_left(checkpoint: dict, cfg: TrainConfig) -> bool:
    """Refuse a resume whose checkpoint is already at (or past) the requested iteration count, unless the run's
    final outputs are missing there: returns True when only they are left to write (the run ended at its last
    checkpoint and was killed before or while it wrote ``result.json``), False when iterations are left."""
    done = int(checkpoint["iteration"])
    if done < cfg.iters:
        return False
    if cfg.log_dir and not result_written(cfg.log_dir, checkpoint.get("run_id"), done):
        return True
    where = f"--resume {cfg.resume}" if cfg.resume else "the checkpoint given"
    raise ValueError(f"{where}: the checkpoint is at iteration {done} and this run asks for iters={cfg.iters}: "
                     f"nothing left to do, nothing written (pass --iters greater than {done} to train further)")


__all__ = ["RESULT_FILE", "RESUME_OVERRIDABLE", "check_work_left", "config_differences", "restarted_run_id",
           "result_written", "resume_config"]
