"""``gpurl.make`` / ``gpurl.register``: the env registry (see shared/specs/API.md)."""
from __future__ import annotations

import sys
from typing import Callable

import torch

_FACTORIES: dict[str, Callable] = {}


def register(name: str, factory: Callable, *, overwrite: bool = False) -> None:
    """Register ``factory(num_envs=, device=, seed=, autoreset=, **env_params)`` under ``name``."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"env name must be a non-empty str, got {name!r}")
    if not callable(factory):
        raise TypeError(f"factory for {name!r} must be callable, got {type(factory).__name__}")
    if name in _FACTORIES and not overwrite:
        raise ValueError(f"env {name!r} is already registered (pass overwrite=True to replace it)")
    _FACTORIES[name] = factory


def registered() -> list[str]:
    return sorted(_FACTORIES)


def make(name: str, num_envs: int = 1024, device: str | torch.device | None = None, seed: int = 0,
         autoreset: bool = True, **env_params):
    """Build ``num_envs`` copies of env ``name`` on ``device`` (None: CUDA when usable, else CPU)."""
    if name not in _FACTORIES:
        raise ValueError(f"unknown env {name!r}; registered envs: {registered()}")
    return _FACTORIES[name](num_envs=num_envs, device=resolve_device(device), seed=seed,
                            autoreset=autoreset, **env_params)


def resolve_device(device: str | torch.device | None) -> torch.device:
    """Validate ``device``; None picks "cuda" when a CUDA device is usable, else "cpu" (said on stderr)."""
    if device is None:
        chosen = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        print(f"gpurl: device=None -> using {chosen}", file=sys.stderr)
        return chosen
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or None, got {device!r}") from err
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or None, got {device!r}")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device={device!r} requested but no CUDA device is usable here; use 'cpu'")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device={device!r}: only {torch.cuda.device_count()} CUDA device(s) exist")
    return dev
