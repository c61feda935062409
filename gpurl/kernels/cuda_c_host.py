"""A CUDA C source built as plain C++ and launched on CPU tensors: check a CUDA C kernel without a GPU.

    host = HostCudaCModule(path="my_env.cu")
    host.launch("my_env_step", grid=num_envs, block=1, args=(...))   # CPU tensors, same args as on the GPU

The source includes ``gpurl.cuh``, which on a host compiler pulls in ``gpurl_host.h``: ``__global__`` and
``__device__`` vanish, ``blockIdx``/``threadIdx`` are per-thread variables and a launch runs its blocks one
after another. ``block=1`` runs every phase of a block (an env) over all its agents before the next phase,
which is the Numba CPU build's order; ``block>1`` runs one ``std::thread`` per CUDA thread with a real
barrier for ``__syncthreads()``, so strided loops and barriers are exercised too. Arguments are checked
exactly as :class:`~gpurl.kernels.cuda_c.CudaCModule` checks them, with CPU tensors in place of CUDA ones.

The library is built with g++ (``$CXX`` to override; C++20) into a temporary folder, once per source,
options and headers in a process. Integer code and correctly rounded float arithmetic (+ - * /, sqrt,
conversions) give the GPU's bits; ``-ffp-contract=off`` keeps the host from fusing multiply-adds (CUDA
does fuse them unless built with ``-fmad=false``), and transcendental functions differ in the last bits.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from .cuda_c import (INCLUDE_DIR, _bind_for_prepare, _read_source, bind_args, kernel_signatures, launch_dims,
                     parse_params)

if TYPE_CHECKING:
    from .prepared_launch import PreparedLaunch

CXX_FLAGS = ("-std=c++20", "-O2", "-fPIC", "-shared", "-pthread", "-ffp-contract=off", "-Wall", "-Wextra")

_builds: dict[str, tuple[tempfile.TemporaryDirectory, ctypes.CDLL, str]] = {}
_build_lock = threading.Lock()
# gpurl_host.h keeps blockDim/gridDim in globals of the library: one launch at a time per process.
_launch_lock = threading.Lock()


class HostBuildError(RuntimeError):
    """The C++ compiler rejected the source; the message carries its output."""


def find_cxx() -> str | None:
    """The C++ compiler of the host build: ``$CXX``, else g++ or c++ on PATH (None when there is none)."""
    return os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")


def _host_options(options: Sequence[str]) -> list[str]:
    """The NVRTC options that mean the same to g++ (macros, include paths); others are GPU-only."""
    out = []
    for opt in options:
        for long, short in (("--define-macro=", "-D"), ("--undefine-macro=", "-U"), ("--include-path=", "-I")):
            if opt.startswith(long):
                opt = short + opt[len(long):]
        if opt.startswith(("-D", "-U", "-I")):
            out.append(opt)
    return out


class HostCudaCModule:
    """CUDA C ``source`` (or the ``.cu`` file ``path``) compiled for the host; :meth:`launch` as on a GPU.

    kernels: the ``extern "C"`` kernels to export (default: every one whose parameters the parser reads);
    signatures: parameter lists for kernels it cannot read (name -> ``"int n, float* x"``); options: NVRTC
    options, of which ``-D``/``-U``/``-I`` are passed on.
    """

    def __init__(self, source: str | None = None, *, path: str | os.PathLike | None = None,
                 options: Sequence[str] = (), kernels: Sequence[str] | None = None,
                 signatures: dict[str, str] | None = None):
        self.source, self.path = _read_source(source, path)
        self.signatures = kernel_signatures(self.source)
        self.signatures.update({name: parse_params(text) for name, text in (signatures or {}).items()})
        names = tuple(kernels) if kernels is not None else tuple(n for n, p in self.signatures.items() if p)
        untyped = [n for n in names if self.signatures.get(n) is None]
        if untyped:
            raise ValueError(f"the host build needs the parameter list of {untyped}: no extern \"C\" __global__ "
                             "kernel of that name could be read from the source; pass signatures=")
        self.kernels = names
        self.options = _host_options(options)
        self.build_log = ""
        self._lib: ctypes.CDLL | None = None

    def _driver(self, folder: Path) -> str:
        if self.path is None:
            source_file = folder / "kernel.cu"
            source_file.write_text(self.source)
        else:
            source_file = self.path
        lines = ['#include "gpurl_host.h"', f'#include "{source_file}"']
        lines += [f"GPURL_HOST_KERNEL(gpurl_host_kernel_{k}, {name})" for k, name in enumerate(self.kernels)]
        return "\n".join(lines) + "\n"

    def build(self) -> ctypes.CDLL:
        """Compile (once per source, options and headers in this process) and load the library."""
        if self._lib is not None:
            return self._lib
        cxx = find_cxx()
        if cxx is None:
            raise FileNotFoundError("no C++ compiler for the host build of a CUDA C source (install g++ or set CXX)")
        includes = [f"-I{INCLUDE_DIR}"] + ([f"-I{self.path.parent}"] if self.path else [])
        cmd_flags = [*CXX_FLAGS, *includes, *self.options]
        digest = hashlib.sha256("\0".join([cxx, *cmd_flags, self.source, *self.kernels]).encode())
        for header in sorted(INCLUDE_DIR.iterdir()):
            digest.update(header.read_bytes())
        key = digest.hexdigest()
        with _build_lock:
            if key not in _builds:
                folder = tempfile.TemporaryDirectory(prefix="gpurl-host-")
                driver, lib_path = Path(folder.name) / "driver.cpp", Path(folder.name) / "kernels.so"
                driver.write_text(self._driver(Path(folder.name)))
                done = subprocess.run([cxx, *cmd_flags, "-o", str(lib_path), str(driver)],
                                      capture_output=True, text=True)
                if done.returncode != 0:
                    folder.cleanup()
                    raise HostBuildError(f"{cxx} could not build {self.path or 'the source'} for the host:\n"
                                         f"{done.stderr.strip()}")
                lib = ctypes.CDLL(str(lib_path))
                for k in range(len(self.kernels)):
                    getattr(lib, f"gpurl_host_kernel_{k}").argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p]
                _builds[key] = (folder, lib, done.stderr.strip())
            _, self._lib, self.build_log = _builds[key]
        return self._lib

    def launch(self, name: str, grid, block, args: Sequence, *, shared_mem: int = 0, stream=None) -> None:
        """Run kernel ``name`` over CPU tensors (synchronously; ``stream`` is accepted and ignored)."""
        if name not in self.kernels:
            raise ValueError(f"kernel {name!r} is not in this host build (kernels: {list(self.kernels)})")
        grid, block = launch_dims(grid, block)
        if grid[1:] != (1, 1) or block[1:] != (1, 1):
            raise ValueError("the host build runs 1-D launches only (grid and block in x)")
        if shared_mem:
            raise ValueError("the host build does not emulate dynamic shared memory (shared_mem must be 0)")
        bound = bind_args(name, self.signatures[name], args, "cpu")
        if grid[0] == 0:
            return
        # One buffer per argument, and argv[k] = its address: the cuLaunchKernel convention.
        storage = [np.array([b], dtype=np.uint64) if isinstance(b, int) else np.array([b]) for b in bound]
        argv = np.array([s.ctypes.data for s in storage], dtype=np.uint64)
        with _launch_lock:
            self._host_kernel(name)(grid[0], block[0], argv.ctypes.data)

    def prepare(self, name: str, grid, block, args: Sequence, varying: Sequence[int]) -> "PreparedLaunch":
        """:meth:`CudaCModule.prepare <gpurl.kernels.cuda_c.CudaCModule.prepare>` on the host: the same packed
        parameter block (cuda.core's ParamHolder), handed to the host kernel where a GPU's ``cuLaunchKernel``
        would take it, so the packing is checked against the kernel itself without a GPU."""
        from .prepared_launch import PreparedLaunch

        if name not in self.kernels:
            raise ValueError(f"kernel {name!r} is not in this host build (kernels: {list(self.kernels)})")
        grid, block, bound = _bind_for_prepare(name, self.signatures[name], grid, block, args, varying, "cpu")
        return PreparedLaunch(self._host_kernel(name), grid[0], block[0], bound, varying, _host_launch_kernel)

    def _host_kernel(self, name: str):
        return getattr(self.build(), f"gpurl_host_kernel_{self.kernels.index(name)}")


def _host_launch_kernel(function, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_mem, stream, params,
                        extra) -> tuple[int]:
    """``cuLaunchKernel``'s signature over a host kernel (1-D, no shared memory); returns ``(CUDA_SUCCESS,)``,
    as cuda.bindings' driver calls return their CUresult."""
    with _launch_lock:
        function(grid_x, block_x, params)
    return (0,)
