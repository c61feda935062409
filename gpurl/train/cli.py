"""``gpurl train`` / ``python -m gpurl.train``: one flag per :class:`TrainConfig` run field and per parameter of
a registered algorithm (``Algorithm.params_type``), generated from the dataclasses (so a new field is a new flag
with its help text), presets and machine-sized defaults; it runs the config under its distribution policy and ends with one ``RESULT {json}`` line.

    python -m gpurl.train                               # Tag sized for this machine
    gpurl train --preset tag-10v100 --num-envs 100 --iters 20
    gpurl train --resume runs/<dir>/checkpoint.pt --iters 400
    gpurl train --preset simple-tag --log-dir runs/st --resume auto   # continue runs/st if it has a checkpoint
    gpurl train --preset simple-tag --seeds 0,1,2 --log-dir runs/st3  # three seeds side by side: mean, std, CI
    gpurl train --preset simple-tag --wandb --wandb-mode offline      # also a W&B run in <log dir>/wandb
    torchrun --nproc_per_node=2 -m gpurl.train --dist data_parallel
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import sys
from dataclasses import fields
from pathlib import Path

import torch

from ..algos import ALGORITHMS
from ..algos.params import default_of, param_fields
from ..envs.memory import InsufficientMemory
from ..envs.params import RANGE, ParameterError
from ..multigpu.process_group import launcher_world
from .config import AUTO_RESUME, PRESETS, TrainConfig, build_config
from .help_format import DefaultsOnceFormatter
from .loggers import LoggerUnavailable, check_loggers
from .resume import RESUME_OVERRIDABLE, check_work_left, config_differences, resume_config
from .sweep import check_sweep_flags, parse_seeds, report_lines, seed_commands
from .threads import read_policy

INT_TUPLES = {"hidden", "nsys_iters"}


def _tuple_of(kind):
    def parse(text: str) -> tuple:
        parts = [p.strip() for p in text.split(",") if p.strip()]
        try:
            return tuple(kind(p) for p in parts)
        except ValueError as err:
            raise argparse.ArgumentTypeError(f"expected comma-separated {kind.__name__}s, got {text!r}") from err
    return parse


def _optional_str(text: str):
    return None if text.lower() in ("none", "") else text


def _resume(text: str) -> str:
    """``--resume``: a checkpoint, a run dir or ``auto``; an empty value is a mistake (it used to start afresh)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"takes a checkpoint file, a run dir holding one, or '{AUTO_RESUME}'; "
                                         f"got {text!r}")
    return text


def _env_param(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--env-param takes KEY=VALUE, got {text!r}")
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return key, value  # a bare word stays a string


DESCRIPTION = ("Train agent groups with a registered algorithm (PPO by default) on a gpurl env, every step of "
               "the loop on the device (a GPU when present). Writes run.json (at start), metrics.csv, TensorBoard "
               "events, checkpoint.pt, learning_curve.png and result.json into the log dir, which must be empty or "
               "hold this run's own files (see --fresh-log-dir), and ends with one line RESULT {json}.")


def flag_fields() -> list[tuple[dataclasses.Field, str]]:
    """Every flag's field and its default text: the run's fields (but ``algo_params``), then each registered
    algorithm's parameters (a name several algorithms share once, its defaults by algorithm where they differ)."""
    out = [(f, repr(default_of(f))) for f in fields(TrainConfig) if f.name != "algo_params"]
    by_name: dict[str, list] = {}
    for algo, cls in ALGORITHMS.items():
        for name, f in param_fields(cls.params_type).items():
            by_name.setdefault(name, []).append((algo, f))
    for name, readers in by_name.items():
        f = readers[0][1]
        defaults = {algo: repr(default_of(g)) for algo, g in readers}
        common = max(set(defaults.values()), key=list(defaults.values()).count)
        text = common + "".join(f"; {algo}: {d}" for algo, d in defaults.items() if d != common)
        if len(readers) < len(ALGORITHMS):
            text += "; read by " + ", ".join(algo for algo, _ in readers)
        out.append((f, text))
    return out


def build_parser(description: str = DESCRIPTION, prog: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description, allow_abbrev=False,
                                     formatter_class=DefaultsOnceFormatter)
    for f, default in flag_fields():
        flag = "--" + f.name.replace("_", "-")
        allowed = f"; allowed: {f.metadata[RANGE]}" if RANGE in f.metadata else ""
        kw = dict(default=argparse.SUPPRESS, help=f"{f.metadata['help']} (default: {default}{allowed})")
        if f.name == "env_params":
            parser.add_argument("--env-param", dest="env_params", action="append", type=_env_param,
                                metavar="KEY=VALUE", **kw)
        elif f.name == "env_modules":  # documented as --env-module; a list of them is --env-modules A,B
            parser.add_argument("--env-module", "--env-modules", dest="env_modules", action="extend",
                                type=_tuple_of(str), metavar="MODULE_OR_PATH", **kw)
        elif f.name == "preset":
            parser.add_argument(flag, choices=sorted(PRESETS), **kw)
        elif f.name == "resume":
            parser.add_argument(flag, type=_resume, metavar="CHECKPOINT|DIR|auto", **kw)
        elif f.type in ("bool", "bool | None"):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, **kw)
        elif f.type == "tuple":
            parser.add_argument(flag, type=_tuple_of(int if f.name in INT_TUPLES else str), **kw)
        else:
            kind = {"int": int, "float": float, "str": str}.get(f.type, _optional_str)
            parser.add_argument(flag, type=kind, **kw)
    parser.add_argument("--seeds", type=_seeds, default=argparse.SUPPRESS, metavar="K,K,...",
                        help="a seed sweep instead of --seed: the config once per seed (e.g. 0,1,2), side by side in "
                             "this one process, each seed a whole run in <log-dir>/seed<k> (or its default dir); "
                             "ends with the mean, std and 95%% CI over seeds of the final returns and env metrics "
                             "and one RESULT line holding every seed's result (--resume auto continues every seed)")
    return parser


def _seeds(text: str) -> tuple[int, ...]:
    try:
        return parse_seeds(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def machine_default(explicit: dict) -> dict:
    """With no preset and no env named: Tag sized for the machine (tag-10v100 x 1000 envs on a GPU,
    the small Tag on a CPU)."""
    if "preset" in explicit or "env" in explicit or "resume" in explicit:
        return explicit
    device = explicit.get("device")
    on_gpu = (device or "").startswith("cuda") or (device is None and torch.cuda.is_available())
    return {"preset": "tag-10v100", "num_envs": 1000, **explicit} if on_gpu else {"preset": "tag-small", **explicit}


def _parse(argv: list[str] | None, prog: str | None) -> tuple[argparse.ArgumentParser, dict]:
    """The parser and the flags given (field name -> value; ``seeds`` too when given)."""
    parser = build_parser(prog=prog)
    explicit = vars(parser.parse_args(argv))
    if "env_params" in explicit:
        explicit["env_params"] = dict(explicit["env_params"])
    return parser, explicit


def config_from_args(argv: list[str] | None = None, prog: str | None = None) -> TrainConfig:
    """Parse ``argv`` into a validated config (resuming: the checkpoint's config plus run-control flags)."""
    parser, explicit = _parse(argv, prog)
    if "seeds" in explicit:
        parser.error("--seeds makes one config per seed: see sweep_configs_from_args")
    return _config(parser, explicit)


def sweep_configs_from_args(argv: list[str] | None = None,
                            prog: str | None = None) -> tuple[list[TrainConfig], str | None]:
    """Parse a ``--seeds`` command into one validated config per seed (:func:`gpurl.train.sweep.seed_commands`)
    and the sweep's log dir (None: each seed its default dir). Every refusal is a usage error, before
    anything is written."""
    parser, explicit = _parse(argv, prog)
    if "seeds" not in explicit:
        parser.error("sweep_configs_from_args needs --seeds")
    return _sweep_configs(parser, explicit)


def _sweep_configs(parser: argparse.ArgumentParser, explicit: dict) -> tuple[list[TrainConfig], str | None]:
    explicit = dict(explicit)
    seeds = explicit.pop("seeds")
    try:
        check_sweep_flags(explicit, launcher_world()[1])
    except ValueError as err:
        parser.error(str(err))
    configs = []
    for seed, command in zip(seeds, seed_commands(explicit, seeds)):
        configs.append(_config(parser, command, f"--seeds: seed {seed}: " if len(seeds) > 1 else ""))
    return configs, explicit.get("log_dir")


def _config(parser: argparse.ArgumentParser, explicit: dict, context: str = "") -> TrainConfig:
    try:
        if explicit.get("resume") == AUTO_RESUME:
            cfg = _auto_resume_config(explicit)
        elif explicit.get("resume"):
            path, checkpoint = _resume_checkpoint(explicit["resume"])
            cfg = resume_config(checkpoint, {**explicit, "resume": str(path)})
            check_work_left(checkpoint, cfg)  # a usage error, before any process starts or file is written
        else:
            cfg = _fresh_config(explicit)
        cfg.import_env_modules()  # an entry point: a module that does not import is a usage error here
        read_policy(cfg.torch_threads)  # so is a GPURL_THREADS the thread policy cannot read
        check_loggers(cfg)  # and a logger asked for whose extra is not installed
        return cfg
    except ValueError as err:
        parser.error(context + str(err))
        raise  # unreachable: parser.error exits


def _resume_checkpoint(resume: str):
    """``(path, checkpoint)`` that ``--resume`` names: the file itself, or in a run dir its newest checkpoint that
    loads (checkpoint.pt, else checkpoint.prev.pt, as ``--resume auto`` picks)."""
    from .checkpoint import CheckpointError, latest_checkpoint, load_checkpoint

    if not Path(resume).is_dir():
        return Path(resume), load_checkpoint(resume)
    found = latest_checkpoint(resume, say=lambda m: print(m, file=sys.stderr))
    if found is None:
        raise CheckpointError(f"--resume {resume}: the directory holds no checkpoint (checkpoint.pt or "
                              "checkpoint.prev.pt)")
    return found


def _fresh_config(explicit: dict) -> TrainConfig:
    explicit = machine_default(explicit)
    preset = explicit.pop("preset", None)
    if preset is not None and "env_params" in explicit:  # flags refine the preset's env params
        explicit["env_params"] = {**PRESETS[preset].get("env_params", {}), **explicit["env_params"]}
    return build_config(preset, **explicit)


def _auto_resume_config(explicit: dict) -> TrainConfig:
    """``--resume auto``: the command as given when ``--log-dir`` holds no checkpoint (resume stays "auto":
    :func:`gpurl.train.run.train` then restarts the run whose files are there, if it is this command's);
    else the newest checkpoint that loads, whose config must be the command's own but for the fields a
    resume may change (a restarted torchrun job repeats its whole command line)."""
    from .checkpoint import latest_checkpoint

    given = _fresh_config(dict(explicit))  # also checks --log-dir is there
    # Every torchrun rank parses the command; the main rank alone says which checkpoint it skipped.
    quiet = os.environ.get("RANK", "0") != "0"
    found = latest_checkpoint(given.log_dir, say=(lambda *a: None) if quiet else (lambda m: print(m, file=sys.stderr)))
    if found is None:
        return given
    path, checkpoint = found
    differences = config_differences(checkpoint["config"], given.to_dict())
    if differences:
        raise ValueError(f"--resume auto: {path} was saved from another config ({'; '.join(differences)}); pass "
                         "the command that wrote it, or another --log-dir")
    overrides = {k: v for k, v in explicit.items() if k in RESUME_OVERRIDABLE}
    cfg = resume_config(checkpoint, {**overrides, "resume": str(path)})
    check_work_left(checkpoint, cfg)
    return cfg


def main(argv: list[str] | None = None, prog: str | None = None) -> dict:
    """Parse, train, print the summary and the RESULT line (main rank); returns the result ({} elsewhere).
    With ``--seeds``: the sweep's summary and payload (:func:`gpurl.train.sweep.sweep`)."""
    from .checkpoint import CheckpointError
    from .launch import run, run_sweep
    from .run_record import LogDirTakenError

    parser, explicit = _parse(argv, prog)
    if "seeds" in explicit:
        cfg, (configs, sweep_dir) = None, _sweep_configs(parser, explicit)
    else:
        cfg = _config(parser, explicit)
    try:  # each run prints its id, log dir, machine and config lines at start
        result = run(cfg) if cfg is not None else run_sweep(configs, sweep_dir=sweep_dir)
    except (ParameterError, InsufficientMemory, LogDirTakenError, CheckpointError, LoggerUnavailable) as err:
        # Found before anything was allocated or written: an env parameter out of its range, a num_envs
        # too large for the device, another run's log dir, a checkpoint that cannot be continued, a logger
        # whose extra is missing. A usage error like a bad flag.
        print(f"{prog or 'gpurl train'}: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    if cfg is None:
        for line in report_lines(result):
            print(line)
        print("RESULT " + json.dumps(result, sort_keys=True))
        sys.stdout.flush()
        return result
    if result is None:  # not the main rank: rank 0 prints and writes
        return {}
    for key in sorted(k for k in result if k.endswith("_random") and result.get(k) is not None):
        final = result.get(key.removesuffix("_random") + "_final")
        print(f"{key.removesuffix('_random')}: random {result[key]:.4g}, trained "
              + (f"{final:.4g}" if final is not None else "-"))
    for rate in ("tags_per_episode", "tags_per_step"):
        if result.get(f"{rate}_random") and result.get(f"{rate}_final") is not None:
            print(f"{rate.replace('_', ' ')}, trained / random: "
                  f"{result[f'{rate}_final'] / result[f'{rate}_random']:.2f}x")
    rate = result["agent_steps_per_s"]
    print(f"end-to-end agent-steps/s ({result['device']}): " + (f"{rate:.4g}" if rate is not None else "-")
          + f"; phase seconds: {result['phase_seconds']}")
    print("RESULT " + json.dumps(result, sort_keys=True))
    sys.stdout.flush()
    return result


__all__ = ["DESCRIPTION", "build_parser", "config_from_args", "main", "sweep_configs_from_args"]
