"""Process-wide settings of a training run, made once by the entry point and never by a constructor:
the thread policy of torch's and Numba's pools (:mod:`gpurl.train.threads`), the allocator, and where
compiled code is cached.

glibc malloc: keep freed memory in the process instead of unmapping it. Every torch CPU op allocates
its output, and an update's activations are megabytes each; glibc serves such blocks with mmap and
unmaps them when freed, so each op pays page faults on fresh pages (the kernel zeroes them). Raising
the mmap and trim thresholds keeps freed blocks in the heap for the next op (the usual
jemalloc/tcmalloc advice for PyTorch on CPUs, without a preloaded allocator). Resident memory then
stays at the run's peak.

Compiled code (inductor's FX graph and AOTAutograd caches) goes to ``$TORCHINDUCTOR_CACHE_DIR``, by
default ``~/.cache/gpurl/inductor``: a second run of a configuration loads what the first compiled.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from pathlib import Path

import torch

from .threads import apply_thread_policy, read_policy

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: Blocks below this come from the heap (glibc caps the mmap threshold at 32 MiB on 64-bit anyway).
_MMAP_THRESHOLD = 1 << 30
_TRIM_THRESHOLD = 1 << 30
_applied = False


def keep_freed_memory() -> bool:
    """Apply the malloc settings once per process (Linux with glibc); True when they are in effect."""
    global _applied
    if _applied or not sys.platform.startswith("linux"):
        return _applied
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (e.g. musl): leave the allocator alone
        return False
    _applied = bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))
    return _applied


def compile_cache_dir() -> Path:
    """Where inductor keeps compiled code: ``$TORCHINDUCTOR_CACHE_DIR``, set to the gpurl default if unset."""
    if not os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(base / "gpurl" / "inductor")
    return Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])


#: Compiled graphs kept per gpurl fast path (torch's default keeps 8, then fails under fullgraph=True).
#: Each distinct policy shape (groups, widths, recurrent or not, with or without a critic) is one graph
#: of the same function, and one process may train many: bench/algorithms.py, the test suite.
RECOMPILE_LIMIT = 64


def allow_many_compiled_shapes() -> None:
    """Let every gpurl fast path keep :data:`RECOMPILE_LIMIT` compiled graphs (a process setting)."""
    import torch._dynamo

    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)


def set_matmul_precision(tf32: bool) -> None:
    """CUDA float32 matrix products in TF32 (tensor cores, 10 mantissa bits; what JAX does on these GPUs by
    default) or in full float32 (a process setting; the CPU's products are not affected)."""
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        matmul.fp32_precision = "tf32" if tf32 else "ieee"
    else:  # pragma: no cover - torch before 2.9
        matmul.allow_tf32 = tf32


def matmul_precision() -> str:
    """The CUDA float32 matmul precision in effect: "tf32" or "ieee"."""
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        return "tf32" if matmul.fp32_precision == "tf32" else "ieee"
    return "tf32" if matmul.allow_tf32 else "ieee"  # pragma: no cover - torch before 2.9


def configure_process(torch_threads: int, device: torch.device, tf32: bool = True) -> dict:
    """The settings above, for a run on ``device`` (``torch_threads`` 0: the thread policy's size; ``tf32``:
    :func:`set_matmul_precision` on CUDA). Returns the threads in effect
    (:func:`gpurl.train.threads.thread_report`) for the run's report."""
    report = apply_thread_policy(read_policy(torch_threads), cpu_run=device.type == "cpu")
    if device.type == "cpu":
        keep_freed_memory()
    else:
        set_matmul_precision(tf32)
    compile_cache_dir()
    allow_many_compiled_shapes()
    return report


__all__ = ["compile_cache_dir", "configure_process", "keep_freed_memory", "matmul_precision", "set_matmul_precision"]
