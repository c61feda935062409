"""CUDA C kernels over gpurl's torch buffers, compiled by NVRTC and launched through CuPy.

    module = CudaCModule(path="my_env.cu")          # compiled on the first launch on a device (NVRTC)
    module.launch("my_env_step", grid=num_envs, block=128, args=(num_envs, x, y, obs, seed, actions))

- gpurl compiles the source itself with NVRTC (CuPy's binding) to a cubin for the device and loads it
  with ``cupy.RawModule(path=...)``: the flags are exactly those :func:`compile_cuda_c_sm90` checks in
  the compile tier, and NVRTC's IEEE defaults (no flush-to-zero, correctly rounded division and sqrt)
  hold, as in the Numba build. (Compiling through ``RawModule(code=...)`` would append ``-ftz=true``.)
- Tensors go in zero-copy, as raw device pointers; the launch goes on torch's current CUDA stream
  (no synchronisation; a CUDA-graph capture records it) unless ``stream=`` names another.
- Every argument is checked against the kernel's C parameter list, parsed from the source
  (``extern "C" __global__`` kernels; :func:`kernel_signatures`), before anything is launched: a tensor
  must be on the module's device type, contiguous and of the parameter's dtype (``bool`` and
  ``unsigned char`` pointers take either); a scalar is converted to the parameter's C type (an int out
  of range or a float for an int parameter is refused). Errors name the kernel and the argument.
- ``#include "gpurl.cuh"`` (:data:`INCLUDE_DIR`) gives the counter-based RNG of :mod:`.rng` bit for bit
  and lets the same source build as plain C++ (:class:`~gpurl.kernels.cuda_c_host.HostCudaCModule`).
- Without a GPU: :func:`compile_cuda_c_sm90` produces the PTX (NVRTC or nvcc) that
  :func:`~gpurl.kernels.aot.assemble_sm90` assembles; ``CudaCModule.launch`` raises
  :class:`CudaCUnavailableError` (CuPy imports without a GPU, but every CUDA call then fails with a
  misleading driver error).

Importing this module imports neither CuPy nor torch.cuda; nothing compiles before the first launch.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Sequence

import numpy as np

if TYPE_CHECKING:
    from .prepared_launch import PreparedLaunch

#: gpurl's CUDA C headers (``gpurl.cuh``, ``gpurl_host.h``); always on the include path.
INCLUDE_DIR = Path(__file__).resolve().parent / "include"
#: Options every build gets unless overridden: one C++ standard for NVRTC, nvcc and the host build.
DEFAULT_OPTIONS = ("-std=c++17",)


class CudaCUnavailableError(RuntimeError):
    """No usable CUDA device for CuPy (or no CuPy): a CUDA C kernel cannot launch here."""


class CudaCCompileError(RuntimeError):
    """NVRTC or nvcc rejected the source; the message carries the compiler's log."""


# ---- kernel parameter lists ----------------------------------------------------------------------------

# C type (qualifiers removed, words single-spaced) -> NumPy dtype name; "void" only behind a pointer.
C_TYPES = {
    "bool": "bool", "char": "int8", "signed char": "int8", "unsigned char": "uint8",
    "short": "int16", "short int": "int16", "unsigned short": "uint16", "unsigned short int": "uint16",
    "int": "int32", "signed": "int32", "signed int": "int32", "unsigned": "uint32", "unsigned int": "uint32",
    "long long": "int64", "long long int": "int64", "signed long long": "int64",
    "unsigned long long": "uint64", "unsigned long long int": "uint64",
    "int8_t": "int8", "uint8_t": "uint8", "int16_t": "int16", "uint16_t": "uint16", "int32_t": "int32",
    "uint32_t": "uint32", "int64_t": "int64", "uint64_t": "uint64", "size_t": "uint64", "ptrdiff_t": "int64",
    "float": "float32", "double": "float64", "__half": "float16", "half": "float16",
    "__nv_bfloat16": "bfloat16", "void": "void",
}
# dtypes a pointer parameter accepts (torch dtype names); bool and uint8 share a byte layout.
_POINTER_ACCEPTS = {"bool": ("bool", "uint8"), "uint8": ("uint8", "bool")}
_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|struct)\b")
_KERNEL = re.compile(r"(template\s*<[^>]*>\s*)?__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?"
                     r"(\w+)\s*\(([^)]*)\)")


class CParam(NamedTuple):
    name: str
    dtype: str      # NumPy dtype name ("int32", "float32", ...) or "void" (pointer to anything)
    pointer: bool


def _strip_comments(source: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/", " ", source, flags=re.S)


def parse_params(text: str) -> list[CParam]:
    """``"int n, const float* __restrict__ x"`` -> [CParam("n", "int32", False), CParam("x", "float32", True)].

    Raises ValueError for a parameter it cannot type (a struct, a typedef, a pointer to a pointer).
    """
    params = []
    for raw in (p.strip() for p in text.split(",")):
        if not raw or raw == "void":
            continue
        decl = raw.replace("[]", "*")
        stars = decl.count("*")
        words = _QUALIFIERS.sub(" ", decl.replace("*", " ")).split()
        if len(words) < 2 or stars > 1 or not words[-1].isidentifier():
            raise ValueError(f"cannot type the kernel parameter {raw!r}")
        ctype = " ".join(words[:-1])
        if ctype not in C_TYPES or (ctype == "void" and not stars):
            raise ValueError(f"cannot type the kernel parameter {raw!r}: unknown C type {ctype!r} "
                             f"(known: {', '.join(sorted(C_TYPES))})")
        params.append(CParam(words[-1], C_TYPES[ctype], stars == 1))
    return params


def kernel_signatures(source: str) -> dict[str, list[CParam] | None]:
    """Parameter list of every non-template ``__global__`` kernel in ``source`` (None where untypable)."""
    found: dict[str, list[CParam] | None] = {}
    for template, name, params in _KERNEL.findall(_strip_comments(source)):
        if template:
            continue
        try:
            found[name] = parse_params(params)
        except ValueError:
            found[name] = None
    return found


# ---- argument checks (shared with the host build) ------------------------------------------------------

def _describe(kernel: str, k: int, param: CParam | None) -> str:
    return f"{kernel} argument {k}" + (f" ({param.name})" if param is not None else "")


_NP_DTYPES = {name: np.dtype(name) for name in set(C_TYPES.values()) - {"void", "bfloat16"}}
_INT_RANGES = {name: (int(np.iinfo(name).min), int(np.iinfo(name).max))
               for name in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")}


def _pointer(kernel: str, k: int, param: CParam | None, value, device_type: str, devices: set) -> int:
    import torch

    if value is None:
        return 0
    where = lambda: _describe(kernel, k, param)  # noqa: E731  (built only for an error: launches are hot)
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{where()} must be a torch.Tensor (or None for a null pointer), got {type(value).__name__}")
    if value.device.type != device_type:
        raise ValueError(f"{where()} must be a {device_type} tensor, got one on {value.device}")
    devices.add(value.device)
    if len(devices) > 1:
        raise ValueError(f"{where()} is on {value.device}, but earlier tensor arguments are on "
                         f"{sorted(map(str, devices - {value.device}))}: all must share one device")
    if not value.is_contiguous():
        raise ValueError(f"{where()} must be contiguous (the kernel indexes it flat), got strides {value.stride()}")
    if param is not None and param.dtype != "void":
        got = str(value.dtype)[6:]  # "torch.int32" -> "int32"
        if got != param.dtype and got not in _POINTER_ACCEPTS.get(param.dtype, ()):
            raise TypeError(f"{where()} must be a torch.{param.dtype} tensor, got {value.dtype}")
    return value.data_ptr()


def _scalar(kernel: str, k: int, param: CParam | None, value) -> np.generic:
    import torch

    where = lambda: _describe(kernel, k, param)  # noqa: E731
    if isinstance(value, torch.Tensor) or value is None:
        kind = f"a scalar {param.dtype} parameter" if param is not None else "a scalar parameter"
        raise TypeError(f"{where()} is {kind}, got {'a tensor' if value is not None else 'None'}")
    if param is None:  # unknown parameter list: only self-typed NumPy scalars are unambiguous
        if not isinstance(value, np.generic):
            raise TypeError(f"{where()}: the kernel's parameter list is unknown, so scalars must be NumPy scalars "
                            f"(np.int32, np.float32, ...), got {type(value).__name__}")
        return value
    dtype = _NP_DTYPES.get(param.dtype)
    if dtype is None:
        raise TypeError(f"{where()}: scalar {param.dtype} parameters cannot be passed (NumPy has no such type)")
    if isinstance(value, np.generic) and value.dtype == dtype:
        return value  # already the parameter's type
    is_bool = isinstance(value, (bool, np.bool_))
    if dtype.kind in "iub":
        if not (is_bool or isinstance(value, (int, np.integer))):
            raise TypeError(f"{where()} must be an integer ({param.dtype}), got {type(value).__name__} {value!r}")
        if dtype.kind == "b":
            if int(value) not in (0, 1):
                raise ValueError(f"{where()} must be a bool, got {value!r}")
            return np.bool_(bool(value))
        low, high = _INT_RANGES[param.dtype]
        if not low <= int(value) <= high:
            raise ValueError(f"{where()} = {int(value)} does not fit {param.dtype} [{low}, {high}]")
        return dtype.type(int(value))
    if is_bool or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{where()} must be a real number ({param.dtype}), got {type(value).__name__} {value!r}")
    return dtype.type(value)


def bind_args(kernel: str, params: list[CParam] | None, args: Sequence, device_type: str) -> list:
    """Check ``args`` against ``params`` and convert them: pointers to ints (addresses, 0 for None),
    scalars to NumPy scalars of the parameter's dtype. ``params=None``: tensors become pointers and
    scalars must be NumPy scalars (nothing else can be checked)."""
    if params is not None and len(args) != len(params):
        names = ", ".join(p.name for p in params)
        raise TypeError(f"{kernel} takes {len(params)} arguments ({names}), got {len(args)}")
    import torch

    devices: set = set()
    bound = []
    for k, value in enumerate(args):
        param = params[k] if params is not None else None
        if param.pointer if param is not None else isinstance(value, torch.Tensor):
            bound.append(_pointer(kernel, k, param, value, device_type, devices))
        else:
            bound.append(_scalar(kernel, k, param, value))
    return bound


def launch_dims(grid, block) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    dims = []
    for name, value in (("grid", grid), ("block", block)):
        t = (value,) if isinstance(value, (int, np.integer)) else tuple(value) if isinstance(value, tuple) else ()
        if not 1 <= len(t) <= 3 or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0
                                       for v in t):
            raise ValueError(f"{name} must be an int or a tuple of 1-3 ints >= 0, got {value!r}")
        dims.append(tuple(int(v) for v in t) + (1,) * (3 - len(t)))
    if 0 in dims[1] or int(np.prod(dims[1])) > 1024:
        raise ValueError(f"block must hold 1..1024 threads, got {block!r}")
    return dims[0], dims[1]


# ---- sources and options ------------------------------------------------------------------------------

def _read_source(source: str | None, path: str | os.PathLike | None) -> tuple[str, Path | None]:
    if (source is None) == (path is None):
        raise TypeError("give exactly one of source= (CUDA C text) or path= (a .cu file)")
    if path is None:
        if not isinstance(source, str):
            raise TypeError(f"source must be a str of CUDA C, got {type(source).__name__}")
        return source, None
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no CUDA C source at {path}")
    return path.read_text(), path.resolve()


def _build_options(options: Sequence[str], path: Path | None) -> tuple[str, ...]:
    options = tuple(options)
    if any(not isinstance(o, str) for o in options):
        raise TypeError(f"options must be strings, got {options!r}")
    includes = [f"-I{INCLUDE_DIR}"] + ([f"-I{path.parent}"] if path is not None else [])
    std = () if any(o.startswith(("-std", "--std")) for o in options) else DEFAULT_OPTIONS
    return (*std, *includes, *options)


# ---- the module ------------------------------------------------------------------------------------------

def require_cupy():
    """Import CuPy and check that it can reach a CUDA device; raise :class:`CudaCUnavailableError` if not."""
    try:
        import cupy
    except ImportError as err:
        raise CudaCUnavailableError("CUDA C kernels run through CuPy, which is not installed "
                                    "(pip install cupy-cuda13x, or gpurl[cuda])") from err
    if not cupy.cuda.is_available():
        raise CudaCUnavailableError(
            "CUDA C kernels need a CUDA GPU and driver, and CuPy sees none (cupy.cuda.is_available() is "
            "False). Without a GPU, check the source with gpurl.kernels.cuda_c.compile_cuda_c_sm90 (PTX) "
            "or run it on CPU tensors with gpurl.kernels.cuda_c_host.HostCudaCModule.")
    return cupy


class CudaCModule:
    """CUDA C source compiled with NVRTC, loaded with ``cupy.RawModule`` and launched over torch tensors.

    source / path: the CUDA C text, or a ``.cu`` file (its folder joins the include path); a ``.ptx`` or
    ``.cubin`` path is loaded as is. options: NVRTC options (``-DNAME=1``, ``-I...``, ``-std=...``,
    ``-use_fast_math``). name_expressions: template kernels to instantiate (``"k<float>"``); ``extern "C"``
    kernels need none. signatures: parameter lists for kernels the parser cannot read (name ->
    ``"int n, float* x"``). Compilation waits for the first launch on a device of each compute capability.
    """

    def __init__(self, source: str | None = None, *, path: str | os.PathLike | None = None,
                 options: Sequence[str] = (), name_expressions: Sequence[str] = (),
                 signatures: dict[str, str] | None = None):
        binary = path is not None and Path(path).suffix in (".ptx", ".cubin")
        if binary:
            self.source, self.path = None, Path(path).resolve()
            if not self.path.is_file():
                raise FileNotFoundError(f"no compiled module at {self.path}")
        else:
            self.source, self.path = _read_source(source, path)
        self.options = _build_options(options, None if binary else self.path)
        self.name_expressions = tuple(name_expressions)
        self.signatures = kernel_signatures(self.source) if self.source is not None else {}
        self.signatures.update({name: parse_params(text) for name, text in (signatures or {}).items()})
        self._modules: dict[str, tuple[object, dict[str, str]]] = {}  # arch -> (RawModule, lowered names)
        self._kernels: dict[tuple[int, str], object] = {}  # (device index, name) -> RawKernel
        self._streams: dict[tuple[int, int], object] = {}
        self._lock = threading.Lock()
        self._folder: tempfile.TemporaryDirectory | None = None

    def params(self, name: str) -> list[CParam] | None:
        """The parameter list of kernel ``name`` (None when it is unknown: only generic checks then)."""
        return self.signatures.get(name)

    def _module(self, cupy, arch: str):
        """(RawModule, lowered template names) for ``arch`` ("sm_90"): compiled and loaded once."""
        if arch not in self._modules:
            if self.source is None:
                self._modules[arch] = cupy.RawModule(path=str(self.path)), {}
            else:
                name = self.path.name if self.path else "kernel.cu"
                cubin, lowered = nvrtc_compile(self.source, name, self.options, arch, self.name_expressions)
                if self._folder is None:
                    self._folder = tempfile.TemporaryDirectory(prefix="gpurl-cuda-c-")
                file = Path(self._folder.name) / f"{Path(name).stem}.{arch}.cubin"
                file.write_bytes(cubin)
                self._modules[arch] = cupy.RawModule(path=str(file)), lowered
        return self._modules[arch]

    def _kernel(self, cupy, name: str, device_index: int):
        kernel = self._kernels.get((device_index, name))
        if kernel is None:
            with self._lock:
                arch = "sm_" + cupy.cuda.Device(device_index).compute_capability
                raw, lowered = self._module(cupy, arch)
                # a RawKernel loads the module on each device it runs on (the cubin is per arch)
                kernel = self._kernels[device_index, name] = raw.get_function(lowered.get(name, name))
        return kernel

    def _stream(self, cupy, stream, device):
        import torch

        handle = (stream if stream is not None else torch.cuda.current_stream(device)).cuda_stream
        key = (handle, device.index)
        if key not in self._streams:
            self._streams[key] = cupy.cuda.ExternalStream(handle, device.index)
        return self._streams[key]

    def launch(self, name: str, grid, block, args: Sequence, *, shared_mem: int = 0, stream=None) -> None:
        """Launch kernel ``name`` on ``grid`` x ``block`` over ``args`` (asynchronous, no host sync).

        args: in the kernel's parameter order; tensors (CUDA, contiguous, the parameter's dtype) or None for
        pointer parameters, Python/NumPy scalars for the others. stream: a ``torch.cuda.Stream`` (default:
        torch's current stream on the tensors' device). A grid with a 0 dimension launches nothing.
        """
        cupy = require_cupy()
        import torch

        grid, block = launch_dims(grid, block)
        bound = bind_args(name, self.params(name), args, "cuda")
        devices = {a.device for a in args if isinstance(a, torch.Tensor)}
        device = devices.pop() if devices else torch.device("cuda", torch.cuda.current_device())
        if 0 in grid:
            return
        kernel_args = tuple(np.uint64(b) if isinstance(b, int) else b for b in bound)  # pointers as 64-bit words
        with cupy.cuda.Device(device.index):
            kernel = self._kernel(cupy, name, device.index)
            with self._stream(cupy, stream, device):
                kernel(grid, block, kernel_args, shared_mem=shared_mem)

    def prepare(self, name: str, grid, block, args: Sequence, varying: Sequence[int]) -> "PreparedLaunch":
        """The launch of ``name`` over ``args`` with its parameters checked and packed once: a
        :class:`~.prepared_launch.PreparedLaunch`, whose ``launch(pointers, stream)`` rewrites only the pointer
        arguments at the indices ``varying`` (in that order) and calls ``cuLaunchKernel`` on ``stream`` (a
        CUstream handle). The caller keeps every other argument as it was here (an env's own buffers, its
        constants) and gives each varying pointer a tensor of the prepared one's dtype, shape and device.
        1-D launches without dynamic shared memory. Raises NotPrepared where cuda.core is missing."""
        cupy = require_cupy()
        import torch
        from cuda.bindings import driver

        from .prepared_launch import PreparedLaunch

        grid, block, bound = _bind_for_prepare(name, self.params(name), grid, block, args, varying, "cuda")
        devices = {a.device for a in args if isinstance(a, torch.Tensor)}
        device = devices.pop() if devices else torch.device("cuda", torch.cuda.current_device())
        with cupy.cuda.Device(device.index):  # RawKernel.kernel: the function loaded on the current device
            function = driver.CUfunction(self._kernel(cupy, name, device.index).kernel.ptr)
        return PreparedLaunch(function, grid[0], block[0], bound, varying, driver.cuLaunchKernel)


def _bind_for_prepare(name: str, params: list[CParam] | None, grid, block, args: Sequence, varying: Sequence[int],
                      device_type: str) -> tuple[tuple, tuple, list]:
    """(grid, block, bound arguments) of a launch to prepare, checked as a launch checks them; only 1-D
    launches, and every ``varying`` index must be a pointer argument."""
    grid, block = launch_dims(grid, block)
    if grid[1:] != (1, 1) or block[1:] != (1, 1) or grid[0] == 0:
        raise ValueError(f"{name}: a prepared launch is 1-D with at least one block, got grid {grid}, block {block}")
    bound = bind_args(name, params, args, device_type)
    for k in varying:
        if not 0 <= k < len(bound) or not isinstance(bound[k], int) or (params is not None and not params[k].pointer):
            raise ValueError(f"{name}: argument {k} cannot vary in a prepared launch (only pointer arguments can)")
    return grid, block, bound


# ---- compiling --------------------------------------------------------------------------------------------

def nvrtc_compile(source: str, name: str, options: Sequence[str], arch: str,
                  name_expressions: Sequence[str] = ()) -> tuple[bytes, dict[str, str]]:
    """Compile with NVRTC for ``arch``: ``"sm_90"`` gives a cubin, ``"compute_90"`` PTX. Needs no GPU.

    Returns (binary, {name expression: lowered (mangled) name}). Raises :class:`CudaCCompileError`.
    """
    from cupy_backends.cuda.libs import nvrtc

    prog = nvrtc.createProgram(source, name, [], [])
    try:
        for expr in name_expressions:
            nvrtc.addNameExpression(prog, expr)
        try:
            nvrtc.compileProgram(prog, [f"--gpu-architecture={arch}", *options])
        except nvrtc.NVRTCError as err:
            raise CudaCCompileError(f"NVRTC could not compile {name} for {arch} ({err}):\n"
                                    f"{nvrtc.getProgramLog(prog)}") from None
        binary = nvrtc.getCUBIN(prog) if arch.startswith("sm_") else nvrtc.getPTX(prog)
        return binary, {expr: nvrtc.getLoweredName(prog, expr) for expr in name_expressions}
    finally:
        nvrtc.destroyProgram(prog)


# ---- compile tier: PTX for sm_90 without a GPU ----------------------------------------------------------

def compile_cuda_c_sm90(source: str | None = None, *, path: str | os.PathLike | None = None,
                        options: Sequence[str] = (), compiler: str = "nvrtc",
                        name_expressions: Sequence[str] = ()) -> str:
    """PTX (text) of CUDA C ``source`` (or the file ``path``) for sm_90, with the options a
    :class:`CudaCModule` compiles it with. compiler: ``"nvrtc"`` (CuPy's NVRTC binding, what the GPU
    build uses) or ``"nvcc"`` (``nvcc -ptx -arch=sm_90``). Needs no GPU. Raises :class:`CudaCCompileError`
    with the compiler's log when the source does not compile. Assemble with ``aot.assemble_sm90``.
    """
    text, src_path = _read_source(source, path)
    opts = _build_options(options, src_path)
    name = src_path.name if src_path else "kernel.cu"
    if compiler == "nvrtc":
        ptx, _ = nvrtc_compile(text, name, opts, "compute_90", name_expressions)
        return ptx.decode() if isinstance(ptx, bytes) else ptx
    if compiler == "nvcc":
        nvcc = shutil.which("nvcc")
        if nvcc is None:
            raise FileNotFoundError("no nvcc on PATH (use compiler='nvrtc')")
        with tempfile.TemporaryDirectory(prefix="gpurl-nvcc-") as tmp:
            src, out = Path(tmp) / name, Path(tmp) / "kernel.ptx"
            src.write_text(text)
            done = subprocess.run([nvcc, "-ptx", "-arch=sm_90", *opts, "-o", str(out), str(src)],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                raise CudaCCompileError(f"nvcc could not compile {name}:\n{done.stderr.strip()}")
            return out.read_text()
    raise ValueError(f"compiler must be 'nvrtc' or 'nvcc', got {compiler!r}")
