"""Shared bits of the benchmark scripts: what machine and versions a figure came from, device sync,
the RESULT line."""
from __future__ import annotations

import json
import sys

import torch

from gpurl.train.machine import describe_machine  # noqa: F401  (re-exported for the scripts)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def print_result(payload: dict) -> None:
    """The one machine-readable line every benchmark ends with."""
    print("RESULT " + json.dumps(payload, sort_keys=True))
    sys.stdout.flush()
