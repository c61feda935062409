"""Command line for the trainer: one flag per :class:`TrainConfig` field, generated from the dataclass
(so a new field is a new flag with its docstring as help), plus presets and machine-sized defaults."""
from __future__ import annotations

import argparse
import ast
from dataclasses import MISSING, fields

import torch

from .config import PRESETS, TrainConfig, build_config
from .run import resume_config

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


def _env_param(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--env-param takes KEY=VALUE, got {text!r}")
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return key, value  # a bare word stays a string


def build_parser(description: str = "") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description, allow_abbrev=False,
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    for f in fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        default = f.default if f.default is not MISSING else f.default_factory()
        kw = dict(default=argparse.SUPPRESS, help=f"{f.metadata['help']} (default: {default!r})")
        if f.name == "env_params":
            parser.add_argument("--env-param", dest="env_params", action="append", type=_env_param,
                                metavar="KEY=VALUE", **kw)
        elif f.name == "env_modules":  # documented as --env-module; a list of them is --env-modules A,B
            parser.add_argument("--env-module", "--env-modules", dest="env_modules", action="extend",
                                type=_tuple_of(str), metavar="MODULE_OR_PATH", **kw)
        elif f.name == "preset":
            parser.add_argument(flag, choices=sorted(PRESETS), **kw)
        elif f.type in ("bool", "bool | None"):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, **kw)
        elif f.type == "tuple":
            parser.add_argument(flag, type=_tuple_of(int if f.name in INT_TUPLES else str), **kw)
        else:
            kind = {"int": int, "float": float, "str": str}.get(f.type, _optional_str)
            parser.add_argument(flag, type=kind, **kw)
    return parser


def machine_default(explicit: dict) -> dict:
    """With no preset and no env named: Tag sized for the machine (tag-10v100 x 1000 envs on a GPU,
    the small Tag on a CPU)."""
    if "preset" in explicit or "env" in explicit or "resume" in explicit:
        return explicit
    device = explicit.get("device")
    on_gpu = (device or "").startswith("cuda") or (device is None and torch.cuda.is_available())
    return {"preset": "tag-10v100", "num_envs": 1000, **explicit} if on_gpu else {"preset": "tag-small", **explicit}


def config_from_args(argv: list[str] | None = None, description: str = "") -> TrainConfig:
    """Parse ``argv`` into a validated config (resuming: the checkpoint's config plus run-control flags)."""
    parser = build_parser(description)
    explicit = vars(parser.parse_args(argv))
    if "env_params" in explicit:
        explicit["env_params"] = dict(explicit["env_params"])
    try:
        if explicit.get("resume"):
            from .checkpoint import load_checkpoint

            return resume_config(load_checkpoint(explicit["resume"]), explicit)
        explicit = machine_default(explicit)
        preset = explicit.pop("preset", None)
        if preset is not None and "env_params" in explicit:  # flags refine the preset's env params
            explicit["env_params"] = {**PRESETS[preset].get("env_params", {}), **explicit["env_params"]}
        return build_config(preset, **explicit)
    except ValueError as err:
        parser.error(str(err))
        raise  # unreachable: parser.error exits


__all__ = ["build_parser", "config_from_args", "TrainConfig"]
