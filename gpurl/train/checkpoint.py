"""Checkpoints: written atomically, loaded with ``weights_only=True``, checked before anything is used.

A checkpoint holds everything a run needs to continue bit-identically on the CPU: the config, the
iteration and step counters, the algorithm's state (its networks, optimizer and whatever else it
declares), the generators' states, the env state, the observation history at the front of the rollout
storage and the episode accumulators, and the id of the run that wrote it (:mod:`gpurl.train.run_record`).

Every way a file can fail to load is a :class:`CheckpointError` naming the file and the reason: missing,
truncated or corrupt, not a gpurl checkpoint, another gpurl checkpoint format version, or (checked by
:func:`check_matches` against the run about to continue it) a different env or algorithm.
"""
from __future__ import annotations

import io
import os
import tempfile
import zipfile
from pathlib import Path

import torch

FORMAT_PREFIX = "gpurl-checkpoint-v"
# v3: the algorithm's own state under "algo_state"; v4: the run's id under "run_id"; v5: "carried", the
# storage's slot-0 buffers a rollout continues from (global state, recurrent states)
FORMAT = f"{FORMAT_PREFIX}5"
REQUIRED = ("format", "config", "iteration", "env_steps", "algorithm", "algo_state", "generator", "sample_generator",
            "step_counter", "env_state", "history_obs", "history_starts", "episode_stats", "extras", "run_id",
            "carried")


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
        if isinstance(found, str) and found.startswith(FORMAT_PREFIX):
            raise CheckpointError(f"checkpoint {path} has gpurl checkpoint format {found!r}; this gpurl reads "
                                  f"{FORMAT!r} only (continue it with the gpurl version that wrote it)")
        raise CheckpointError(f"checkpoint {path} is not a gpurl checkpoint: expected format {FORMAT!r}, "
                              f"found {found!r}")
    missing = [k for k in REQUIRED if k not in payload]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks {missing}")
    return payload


def check_matches(checkpoint: dict, path: str | os.PathLike | None, env: str, env_params: dict, algo: str) -> None:
    """Refuse to continue ``checkpoint`` in a run of another env (name or parameters) or another algorithm.

    CheckpointError names the file (``path``; None: a checkpoint handed over in memory) and the difference.
    """
    where = f"checkpoint {path}" if path is not None else "the checkpoint given"
    saved = checkpoint["config"]
    if saved.get("env") != env:
        raise CheckpointError(f"{where} was saved from env {saved.get('env')!r}; this run is env {env!r}")
    saved_params = saved.get("env_params", {})
    changed = sorted(k for k in {*saved_params, *env_params} if saved_params.get(k) != env_params.get(k))
    if changed:
        detail = ", ".join(f"{k}: {saved_params.get(k, '(unset)')!r} there, {env_params.get(k, '(unset)')!r} here"
                           for k in changed)
        raise CheckpointError(f"{where} was saved from a different {env!r} env ({detail})")
    if checkpoint["algorithm"] != algo or saved.get("algo", checkpoint["algorithm"]) != algo:
        raise CheckpointError(f"{where} was saved from algorithm {checkpoint['algorithm']!r}; this run is {algo!r}")
