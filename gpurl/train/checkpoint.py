"""Checkpoints: written atomically, loaded with ``weights_only=True``, checked before anything is used.

A checkpoint holds everything a run needs to continue bit-identically on the CPU: the config, the
iteration and step counters, the algorithm's state (its networks, optimizer and whatever else it
declares), the generators' states, the env state, the observation history at the front of the rollout
storage and the episode accumulators.
"""
from __future__ import annotations

import io
import os
import tempfile
import zipfile
from pathlib import Path

import torch

FORMAT = "gpurl-checkpoint-v3"  # v3: the algorithm's own state under "algo_state"
REQUIRED = ("format", "config", "iteration", "env_steps", "algorithm", "algo_state", "generator", "sample_generator",
            "step_counter", "env_state", "history_obs", "history_starts", "episode_stats", "extras")


class CheckpointError(ValueError):
    """A checkpoint file is missing, truncated, corrupt, or not a gpurl checkpoint."""


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a crash leaves either the old file or the new one, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600 files; give the usual permissions
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def save_checkpoint(path: str | os.PathLike, payload: dict) -> None:
    """Serialise ``payload`` (see REQUIRED) in memory, then write it atomically."""
    missing = [k for k in REQUIRED if k != "format" and k not in payload]
    if missing:
        raise ValueError(f"checkpoint payload lacks {missing}")
    buffer = io.BytesIO()
    torch.save({"format": FORMAT, **payload}, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def load_checkpoint(path: str | os.PathLike) -> dict:
    """Load and check a checkpoint on the CPU; CheckpointError names the file and what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError) as err:
        raise CheckpointError(f"checkpoint {path} is truncated or corrupt and cannot be read ({err})") from err
    except Exception as err:  # weights_only refuses objects it would have to execute code to build
        raise CheckpointError(f"checkpoint {path} is not a gpurl checkpoint ({type(err).__name__}: {err})") from err
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        found = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
        raise CheckpointError(f"checkpoint {path} is not a {FORMAT} file (found {found!r})")
    missing = [k for k in REQUIRED if k not in payload]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks {missing}")
    return payload
