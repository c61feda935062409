"""torch owns the memory; kernels get zero-copy views of it.

- CPU: the tensor's NumPy view shares its storage (no copy).
- CUDA: ``numba.cuda.as_cuda_array`` over ``__cuda_array_interface__`` (no copy), and kernels launch on
  torch's *current* stream so they order with torch work without any synchronisation.
- CUDA simulator (tests): tensors live on the CPU and the simulator takes NumPy views.
Bool tensors are viewed as uint8 (same storage), the dtype every backend can write.
"""
from __future__ import annotations

import os

import torch


def simulator_enabled() -> bool:
    """True in a process started with NUMBA_ENABLE_CUDASIM=1 (CUDA builds run in Numba's simulator)."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") == "1"


def target_for(device: torch.device) -> str:
    """Kernel target that runs on ``device``: "cuda" for CUDA tensors, else "cpu"."""
    return "cuda" if device.type == "cuda" else "cpu"


def kernel_view(tensor: torch.Tensor, target: str):
    """Zero-copy array view of ``tensor`` for kernels of ``target``. Env steps view their actions and output
    slots with it every step, so it reads cheap attributes only (``is_cpu``, not ``device.type``; no detach
    unless the tensor carries autograd history)."""
    t = tensor.detach() if tensor.requires_grad else tensor
    if t.dtype == torch.bool:
        t = t.view(torch.uint8)
    if t.is_cpu:
        return t.numpy()  # host-ok: a zero-copy view of host memory, no transfer
    if target != "cuda":
        raise ValueError(f"a {t.device} tensor cannot feed a {target!r} kernel")
    from numba import cuda

    return cuda.as_cuda_array(t)


_streams: dict[int, object] = {}
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def current_stream_handle(device: torch.device) -> int:
    """The CUstream handle of torch's current stream on CUDA ``device`` (an indexed device: ``cuda:0``), read
    at each call: a launch on it orders with torch's work, and a graph capture's stream is the current one."""
    if _raw_stream is not None:
        return _raw_stream(device.index)
    return torch.cuda.current_stream(device).cuda_stream


def current_stream(device: torch.device):
    """Numba handle of torch's current CUDA stream on ``device`` (None off-GPU)."""
    if device.type != "cuda" or simulator_enabled():
        return None
    from numba import cuda

    handle = torch.cuda.current_stream(device).cuda_stream
    if handle not in _streams:
        _streams[handle] = cuda.external_stream(handle)
    return _streams[handle]
