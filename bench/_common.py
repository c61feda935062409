"""Shared bits of the benchmark scripts: what machine and versions a figure came from, device sync."""
from __future__ import annotations

import json
import platform
import sys

import torch


def describe_machine(device: torch.device) -> dict:
    import numba
    import numpy

    import gpurl

    info = {
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else _cpu_name(),
        "python": platform.python_version(), "gpurl": gpurl.__version__, "torch": torch.__version__,
        "numba": numba.__version__, "numpy": numpy.__version__,
    }
    if device.type == "cpu":
        info["numba_threads"] = numba.get_num_threads()
        info["numba_threading_layer"] = _threading_layer()
    return info


def _threading_layer() -> str:
    import numba

    try:
        return numba.threading_layer()
    except ValueError:  # no parallel function has run yet
        return "not yet initialised"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def print_result(payload: dict) -> None:
    """The one machine-readable line every benchmark ends with."""
    print("RESULT " + json.dumps(payload, sort_keys=True))
    sys.stdout.flush()
