"""Where a run's scalars go: one :class:`Logger` interface, driven by :class:`gpurl.train.outputs.RunLog`.

Each log line reaches every logger of the run as ``log(iteration, env_steps, scalars)``; ``close()`` ends
it. CSV (``metrics.csv``, :class:`gpurl.train.outputs.CsvLog`) is always on; TensorBoard whenever it is
installed (the ``train`` extra); Weights & Biases when the run asks for it (``--wandb``, the ``wandb``
extra). An extra asked for but not installed is refused before the run writes anything
(:func:`check_loggers`), and the run names its loggers in one line at start (:func:`describe_loggers`).

W&B: the run's directory is ``<log dir>/wandb`` (``dir=``), its id is the gpurl run id, so a resumed run
continues the same W&B run (``resume="allow"``), and its config is the run's config. History rows are
logged at ``step=iteration`` (charts over ``env_steps``): after a resume W&B keeps the rows it already
had for the iterations the run redoes (bit-identical on the CPU, but for the timings).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol, runtime_checkable

#: ``wandb_mode`` values; "auto": $WANDB_MODE when set, else online when $WANDB_API_KEY is set, else offline.
WANDB_MODES = ("auto", "offline", "online")
WANDB_INSTALL = 'pip install "gpurl[wandb]"'


@runtime_checkable
class Logger(Protocol):
    """One destination of a run's scalars. ``name``: how the run's loggers line names it."""

    name: str

    def log(self, iteration: int, env_steps: int, scalars: dict[str, float]) -> None:
        """One log line: ``scalars`` (name -> float) after ``iteration`` iterations and ``env_steps`` steps."""

    def close(self, failed: bool = False) -> None:
        """End the log (idempotent); ``failed``: the run stops on an error."""


class LoggerUnavailable(ValueError):
    """A logger was asked for that cannot start: its package is not installed (the message names the extra to
    install) or its settings are not ones it takes."""


def tensorboard_available() -> bool:
    try:
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401
    except ImportError:
        return False
    return True


def import_wandb():
    """The ``wandb`` module, or LoggerUnavailable naming the extra."""
    try:
        import wandb
    except ImportError as err:
        raise LoggerUnavailable(f"--wandb logs to Weights & Biases, but wandb is not installed ({err}); install "
                                f"the extra: {WANDB_INSTALL} (or run without --wandb)") from err
    return wandb


#: The values W&B itself takes for $WANDB_MODE (wandb_settings.Settings.mode).
WANDB_ENV_MODES = ("online", "offline", "shared", "disabled", "dryrun", "run")


def check_loggers(cfg) -> None:
    """Refuse a config whose loggers cannot start (an extra not installed, a $WANDB_MODE that W&B refuses
    with a 30-line traceback once files exist), before anything is written."""
    if cfg.wandb:
        import_wandb()
        env_mode = os.environ.get("WANDB_MODE")
        if env_mode is not None and env_mode not in WANDB_ENV_MODES:  # W&B reads it whatever mode it is given
            raise LoggerUnavailable(f"--wandb: $WANDB_MODE is {env_mode!r}, and W&B takes one of {list(WANDB_ENV_MODES)}; "
                                    "fix or unset it")


def wandb_mode(mode: str) -> str:
    """The W&B mode a ``wandb_mode`` setting means here: "auto" is $WANDB_MODE when set, else "online" when
    $WANDB_API_KEY is set, else "offline" (nothing leaves the machine until ``wandb sync``)."""
    if mode != "auto":
        return mode
    return os.environ.get("WANDB_MODE") or ("online" if os.environ.get("WANDB_API_KEY") else "offline")


class TensorBoardLog:
    """The scalars as TensorBoard events over env steps in the log dir. ``purge_step``: a resumed run hides
    the events a previous process logged after its checkpoint."""

    name = "tensorboard"

    def __init__(self, log_dir: Path, purge_step: int | None, run_id: str | None, start_env_steps: int):
        from torch.utils.tensorboard import SummaryWriter

        self._writer = SummaryWriter(str(log_dir), purge_step=purge_step)
        if run_id is not None:
            self._writer.add_text("run_id", run_id, start_env_steps)

    def log(self, iteration: int, env_steps: int, scalars: dict[str, float]) -> None:
        for key, value in scalars.items():
            self._writer.add_scalar(key, value, env_steps)

    def close(self, failed: bool = False) -> None:
        self._writer.close()


class WandbLog:
    """The scalars as the history of a W&B run in ``<log_dir>/wandb``, whose id is the gpurl run id."""

    name = "wandb"

    def __init__(self, log_dir: Path, run_id: str, config: dict, mode: str = "auto", project: str = "gpurl",
                 entity: str | None = None, group: str | None = None, name: str | None = None):
        wandb = import_wandb()
        self.mode = wandb_mode(mode)
        self.project = project
        self.dir = Path(log_dir) / "wandb"
        self.dir.mkdir(parents=True, exist_ok=True)
        # reinit="create_new": a seed sweep runs one W&B run per seed in this process, side by side.
        self.run = wandb.init(project=project, entity=entity, group=group, name=name, id=run_id, dir=str(log_dir),
                              mode=self.mode, resume="allow", config=config, allow_val_change=True,
                              job_type="train", reinit="create_new", settings=wandb.Settings(silent=True))
        self.run.define_metric("env_steps")
        self.run.define_metric("*", step_metric="env_steps")
        self._closed = False

    def describe(self) -> str:
        where = f"dir {self.dir}"
        if self.mode == "offline":
            where += f"; upload later: wandb sync {self.dir}/offline-run-*"
        url = getattr(self.run, "url", None) if self.mode == "online" else None
        return f"{self.name} ({self.mode}, project {self.project}, id {self.run.id}, {url or where})"

    def log(self, iteration: int, env_steps: int, scalars: dict[str, float]) -> None:
        self.run.log({"iteration": iteration, "env_steps": env_steps, **scalars}, step=iteration)

    def close(self, failed: bool = False) -> None:
        if not self._closed:
            self._closed = True
            self.run.finish(exit_code=1 if failed else 0)


def start_loggers(cfg, log_dir: Path, run_id: str) -> list[Logger]:
    """The loggers a run asked for beyond CSV and TensorBoard (which :class:`~gpurl.train.outputs.RunLog`
    makes itself), started: W&B with ``--wandb``."""
    if not cfg.wandb:
        return []
    return [WandbLog(log_dir, run_id, cfg.to_dict(), mode=cfg.wandb_mode, project=cfg.wandb_project,
                     entity=cfg.wandb_entity, group=cfg.wandb_group,
                     name=f"{cfg.preset or cfg.env}-seed{cfg.seed}-{run_id}")]


def describe_loggers(extra: list[Logger]) -> str:
    """The run's loggers line: ``loggers: csv, tensorboard, wandb (offline, project gpurl, ...)``."""
    names = ["csv"] + (["tensorboard"] if tensorboard_available()
                       else ['(no tensorboard: pip install "gpurl[train]")'])
    names += [logger.describe() if hasattr(logger, "describe") else logger.name for logger in extra]
    return "loggers: " + ", ".join(names)


__all__ = ["Logger", "LoggerUnavailable", "TensorBoardLog", "WANDB_INSTALL", "WANDB_MODES", "WandbLog",
           "check_loggers", "describe_loggers", "import_wandb", "start_loggers", "tensorboard_available",
           "wandb_mode"]
