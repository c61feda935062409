"""``gpurl.make`` / ``gpurl.register``: the env registry (see docs/specs/API.md)."""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import logging
import os
import sys
from pathlib import Path
from typing import Callable

import torch

from .params import ParameterError

_FACTORIES: dict[str, Callable] = {}


def register(name: str, factory: Callable, *, overwrite: bool = False) -> None:
    """Register ``factory(num_envs=, device=, seed=, autoreset=, **env_params)`` under ``name``.

    Registering a name again is an error unless ``overwrite`` or the factory is the same definition
    (the same object, or the same class or function of the same file re-executed: a module imported
    again, reloaded, or run as a script and imported); then the newer one replaces it.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"env name must be a non-empty str, got {name!r}")
    if not callable(factory):
        raise TypeError(f"factory for {name!r} must be callable, got {type(factory).__name__}")
    if name in _FACTORIES and not overwrite and not _same_definition(_FACTORIES[name], factory):
        raise ValueError(f"env {name!r} is already registered by {_describe(_FACTORIES[name])} "
                         f"(pass overwrite=True to replace it)")
    _FACTORIES[name] = factory


def _definition(factory: Callable) -> tuple | None:
    """(source file, qualified name) of a named class or function, or None (a lambda: one file may hold
    many; a builtin, a callable instance)."""
    try:
        definition = str(Path(inspect.getfile(factory)).resolve()), factory.__qualname__
    except (TypeError, OSError, AttributeError):
        return None
    return None if "<lambda>" in definition[1] else definition


def _same_definition(old: Callable, new: Callable) -> bool:
    return old is new or (_definition(old) is not None and _definition(old) == _definition(new))


def _describe(factory: Callable) -> str:
    return f"{getattr(factory, '__module__', '?')}.{getattr(factory, '__qualname__', type(factory).__name__)}"


def registered() -> list[str]:
    return sorted(_FACTORIES)


def make(name: str, num_envs: int = 1024, device: str | torch.device | None = None, seed: int = 0,
         autoreset: bool = True, **env_params):
    """Build ``num_envs`` copies of env ``name`` on ``device`` (None: CUDA when usable, else CPU)."""
    if name not in _FACTORIES:
        raise ParameterError(f"unknown env {name!r}; registered envs: {registered()} (an env of your own is "
                             f"registered by importing its module: gpurl train --env-module PATH.py, or import it "
                             f"before gpurl.make)")
    return _FACTORIES[name](num_envs=num_envs, device=resolve_device(device), seed=seed,
                            autoreset=autoreset, **env_params)


def import_env_module(spec: str):
    """Import the module that registers a custom env and return it: ``spec`` is a module name
    (``examples.custom_env``, importable from sys.path or the working directory) or the path of a .py
    file (``examples/custom_env.py``), imported once per process under a name derived from its
    absolute path. ImportError names ``spec``; errors raised by the module's own code propagate.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ImportError(f"env module must be a module name or a .py path, got {spec!r}")
    if spec.endswith(".py") or os.sep in spec or "/" in spec:
        path = Path(spec).expanduser().resolve()
        if not path.is_file():
            raise ImportError(f"env module {spec!r}: no such file ({path})")
        digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
        module_name = f"_gpurl_env_module_{path.stem.replace('-', '_')}_{digest}"
        if module_name in sys.modules:
            return sys.modules[module_name]
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise ImportError(f"env module {spec!r}: cannot be imported as Python source ({path})")
        module = importlib.util.module_from_spec(loader_spec)
        if str(path.parent) not in sys.path:  # as `python file.py` would: the file's neighbours are importable
            sys.path.append(str(path.parent))
        sys.modules[module_name] = module  # before executing it, as a normal import does (dataclasses need it)
        try:
            loader_spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
        return module
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())  # a script's sys.path starts at its own folder, not the working one
    try:
        return importlib.import_module(spec)
    except ModuleNotFoundError as err:
        if err.name is not None and spec != err.name and not spec.startswith(err.name + "."):
            raise  # the module exists, something it imports does not
        raise ImportError(f"env module {spec!r} not found (not importable from sys.path or {os.getcwd()}; "
                          f"a file is given by its path, e.g. examples/custom_env.py)") from err


def parse_device(device: str | torch.device) -> torch.device:
    """``device`` as a torch.device when it names one gpurl runs on ('cpu', 'cuda', 'cuda:N'), whether or not
    this machine has it; ParameterError otherwise."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ParameterError(f"device must be 'cpu', 'cuda', 'cuda:N' or None, got {device!r}") from err
    if dev.type not in ("cpu", "cuda"):
        raise ParameterError(f"device must be 'cpu', 'cuda', 'cuda:N' or None, got {device!r}")
    return dev


def resolve_device(device: str | torch.device | None) -> torch.device:
    """Validate ``device``; None picks "cuda" when a CUDA device is usable, else "cpu" (logged at INFO on the
    "gpurl" logger: a successful call prints nothing unless asked)."""
    if device is None:
        chosen = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        logging.getLogger("gpurl").info("device=None -> using %s", chosen)
        return chosen
    dev = parse_device(device)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ParameterError(f"device={device!r} requested but no CUDA device is usable here; use 'cpu'")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ParameterError(f"device={device!r}: only {torch.cuda.device_count()} CUDA device(s) exist")
    return dev
