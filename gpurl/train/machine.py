"""What machine and versions a figure came from: printed by every run and benchmark beside its result."""
from __future__ import annotations

import platform

import torch

from .threads import thread_report


def describe_machine(device: torch.device) -> dict:
    """Device (and its name), Python, gpurl, torch, numba and numpy versions; on the CPU also the thread
    policy in effect (:func:`gpurl.train.threads.thread_report`: torch's and Numba's thread counts,
    Numba's threading layer, the OpenMP wait policy)."""
    import numba
    import numpy

    import gpurl

    info = {
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name(),
        "python": platform.python_version(), "gpurl": gpurl.__version__, "torch": torch.__version__,
        "numba": numba.__version__, "numpy": numpy.__version__,
    }
    if device.type == "cpu":
        info.update(thread_report())
    return info


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo where it exists)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


__all__ = ["cpu_name", "describe_machine"]
