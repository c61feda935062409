"""Checkpoints: written atomically, loaded with ``weights_only=True``, checked before anything is used.

A checkpoint holds everything a run needs to continue bit-identically on the CPU: the config, the
iteration and step counters, the algorithm's state (its networks, optimizer and whatever else it
declares), the generators' states, the env state, the observation history at the front of the rollout
storage and the episode accumulators, and the id of the run that wrote it (:mod:`gpurl.train.run_record`).

Every way a file can fail to load is a :class:`CheckpointError` naming the file and the reason: missing,
truncated or corrupt, a content hash that does not match, not a gpurl checkpoint, another gpurl checkpoint
format version, or (checked by :func:`check_matches` against the run about to continue it) a different env
or algorithm.

The file is an envelope: ``{"format", "sha256", "content"}``, the content being the serialised payload
(uint8) and sha256 its hash, checked before the payload is read. A run keeps the last two checkpoints:
``save_checkpoint(..., keep_previous=True)`` first makes the current file the previous one
(``checkpoint.prev.pt``, by a hard link and a rename: the current one never goes missing), then writes the
new one atomically. :func:`latest_checkpoint` (``--resume auto``) takes the newest one that loads.
"""
from __future__ import annotations

import hashlib
import io
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

import torch

FORMAT_PREFIX = "gpurl-checkpoint-v"
# v3: the algorithm's own state under "algo_state"; v4: the run's id under "run_id"; v5: "carried", the
# storage's slot-0 buffers a rollout continues from (global state, recurrent states); v6: the envelope with
# the content's sha256
FORMAT = f"{FORMAT_PREFIX}6"
#: How every file torch.save writes begins (a zip archive's local file header): a file that does not was
#: never a gpurl checkpoint, whatever else is wrong with it.
ZIP_MAGIC = b"PK\x03\x04"
#: The checkpoint a run writes into its log dir, and the one before it.
CHECKPOINT_FILE, PREVIOUS_CHECKPOINT_FILE = "checkpoint.pt", "checkpoint.prev.pt"
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


def previous_path(path: str | os.PathLike) -> Path:
    """Where ``save_checkpoint(path, ..., keep_previous=True)`` keeps the checkpoint it replaces."""
    path = Path(path)
    return path.with_name(f"{path.stem}.prev{path.suffix}")


def save_checkpoint(path: str | os.PathLike, payload: dict, keep_previous: bool = False) -> None:
    """Serialise ``payload`` (see REQUIRED) in memory with its hash, then write it atomically; with
    ``keep_previous`` the file it replaces becomes :func:`previous_path` first."""
    missing = [k for k in REQUIRED if k != "format" and k not in payload]
    if missing:
        raise ValueError(f"checkpoint payload lacks {missing}")
    content = io.BytesIO()
    torch.save({"format": FORMAT, **payload}, content)
    data = content.getbuffer()
    envelope = io.BytesIO()
    torch.save({"format": FORMAT, "sha256": hashlib.sha256(data).hexdigest(),
                "content": torch.frombuffer(data, dtype=torch.uint8)}, envelope)
    if keep_previous and Path(path).is_file():
        _keep_as_previous(Path(path))
    atomic_write_bytes(path, envelope.getvalue())


def _keep_as_previous(path: Path) -> None:
    """Make ``path`` also the previous checkpoint, atomically: a hard link (or a copy, where the file system
    has none) under a temp name, renamed over the previous one. ``path`` itself stays in place."""
    previous = previous_path(path)
    if previous.exists() and os.path.samefile(path, previous):
        # Already one file (a save killed after this step): rename() between two links of one file does
        # nothing and would leave the temp link behind.
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{previous.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        os.unlink(tmp)
        try:
            os.link(path, tmp)
        except OSError:
            shutil.copyfile(path, tmp)
        os.replace(tmp, previous)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read(path: Path, source) -> object:
    """``torch.load`` of ``source`` (weights only) with the errors that name ``path``.

    A file that does not begin as a zip archive was never a gpurl checkpoint (random bytes, another
    format): whatever torch's unpickler says about it, it is named as such. One that does begin so but
    does not load is a gpurl checkpoint cut short or spoiled. torch's own message for a refused object
    advises retrying with ``weights_only=False``, which would run code from an untrusted file: only the
    unpickler's reason is kept.
    """
    try:
        return torch.load(source, map_location="cpu", weights_only=True)
    except Exception as err:
        head = _head(source)
        reason = _reason(err)
        if head is not None and not ZIP_MAGIC.startswith(head[:len(ZIP_MAGIC)]):
            raise CheckpointError(f"checkpoint {path} is not a gpurl checkpoint (a corrupt file, or one of another "
                                  f"format): gpurl checkpoints are zip archives and this file begins {head!r}"
                                  ) from err
        if head is not None and len(head) < len(ZIP_MAGIC):  # empty, or cut inside the zip header
            raise CheckpointError(f"checkpoint {path} is truncated or corrupt and cannot be read (the file holds "
                                  f"{len(head)} bytes)") from err
        if isinstance(err, (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError)):
            raise CheckpointError(f"checkpoint {path} is truncated or corrupt and cannot be read ({reason})") from err
        raise CheckpointError(f"checkpoint {path} is not a gpurl checkpoint (a corrupt file, or one of another "
                              f"format): {reason}") from err


def _head(source) -> bytes | None:
    """The first bytes of a file path or an in-memory buffer; None when they cannot be read."""
    try:
        if isinstance(source, io.BytesIO):
            return bytes(source.getbuffer()[:8])
        with open(source, "rb") as f:
            return f.read(8)
    except OSError:
        return None


def _reason(err: BaseException) -> str:
    """Why torch.load failed, in its first sentence: without torch's advice that follows it (load with
    ``weights_only=False``, or allow-list the file's classes), which is unsafe for a file of unknown origin."""
    if "weights_only" in str(err) and err.__context__ is not None:
        err = err.__context__  # the weights-only unpickler's own error, which torch wraps in that advice
    lines = [line.strip() for line in str(err).splitlines() if line.strip() and "weights_only" not in line]
    return f"{type(err).__name__}: {lines[0].split('. ')[0].rstrip('.')}" if lines else type(err).__name__


def _check_format(path: Path, loaded) -> None:
    if not isinstance(loaded, dict) or loaded.get("format") != FORMAT:
        found = loaded.get("format") if isinstance(loaded, dict) else type(loaded).__name__
        if isinstance(found, str) and found.startswith(FORMAT_PREFIX):
            raise CheckpointError(f"checkpoint {path} has gpurl checkpoint format {found!r}; this gpurl reads "
                                  f"{FORMAT!r} only (continue it with the gpurl version that wrote it)")
        raise CheckpointError(f"checkpoint {path} is not a gpurl checkpoint: expected format {FORMAT!r}, "
                              f"found {found!r}")


def load_checkpoint(path: str | os.PathLike) -> dict:
    """Load and check a checkpoint on the CPU; CheckpointError names the file and what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    envelope = _read(path, path)
    _check_format(path, envelope)
    content, digest = envelope.get("content"), envelope.get("sha256")
    if not isinstance(content, torch.Tensor) or content.dtype != torch.uint8 or not isinstance(digest, str):
        raise CheckpointError(f"checkpoint {path} is not a gpurl checkpoint: no content and hash in its envelope")
    data = content.numpy().tobytes()  # host-ok: a checkpoint read from disk, CPU bytes
    if hashlib.sha256(data).hexdigest() != digest:
        raise CheckpointError(f"checkpoint {path} fails its content hash (sha256 {hashlib.sha256(data).hexdigest()}, "
                              f"{digest} when written): the file is corrupt")
    payload = _read(path, io.BytesIO(data))
    _check_format(path, payload)
    missing = [k for k in REQUIRED if k not in payload]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks {missing}")
    return payload


def latest_checkpoint(log_dir: str | os.PathLike, say=print) -> tuple[Path, dict] | None:
    """The newest checkpoint in ``log_dir`` that loads: ``checkpoint.pt``, else ``checkpoint.prev.pt`` (saying
    why the newer one was skipped). None when neither exists; CheckpointError naming every file and its fault
    when each one there is bad (a run never silently starts afresh over a spoiled one)."""
    faults = []
    for name in (CHECKPOINT_FILE, PREVIOUS_CHECKPOINT_FILE):
        path = Path(log_dir) / name
        if not path.exists():
            continue
        try:
            checkpoint = load_checkpoint(path)
        except CheckpointError as err:
            faults.append(str(err))
            say(f"warning: skipping {path}: {err}")
            continue
        return path, checkpoint
    if faults:
        raise CheckpointError(f"no checkpoint in {log_dir} can be loaded: " + "; ".join(faults))
    return None


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
