"""Ahead-of-time compilation for sm_90 (H100/H200) on machines without a GPU: the compile test tier.

No development machine or CI runner has a GPU, so GPU code is kept honest by compiling it exactly as
the GPU build would and checking the result:

- Numba kernels: :func:`compile_ptx_sm90` types an :class:`~gpurl.kernels.program.EnvKernel` with the
  arguments it is launched with and emits PTX through NVVM; :func:`float64_instructions` finds
  accidental float64 (a Python float literal or argument promotes float32 math); :func:`assemble_sm90`
  runs ``ptxas -arch=sm_90`` so register/ISA problems surface too; :func:`sass_sm90` disassembles the
  cubin and :func:`suspect_instructions` finds machine-code forms that ptxas has been seen to get wrong.
- Triton kernels: :func:`compile_triton_sm90` compiles for a ``GPUTarget("cuda", 90, 32)`` and yields
  PTX and a cubin (Triton assembles with its own bundled ptxas).

None of this works under ``NUMBA_ENABLE_CUDASIM=1`` / ``TRITON_INTERPRET=1`` (the simulator has no
compiler): run it in a process without them (the test runner's ``compile`` tier).
"""
from __future__ import annotations

import contextlib
import functools
import glob
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import types
from typing import Iterator, NamedTuple

from .errors import raise_alone, typing_error

SM90 = (9, 0)

_patch_lock = threading.Lock()


def _require_real_compilers() -> None:
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") == "1":
        raise RuntimeError("AOT compilation needs the real CUDA target: unset NUMBA_ENABLE_CUDASIM")


@contextlib.contextmanager
def pretend_device(cc: tuple[int, int] = SM90) -> Iterator[None]:
    """Make numba-cuda believe the current device has compute capability ``cc``.

    Compiling a kernel compiles the device functions it calls through their dispatchers, which ask
    the *current device* for its compute capability even when ``compile_ptx`` was given ``cc``; with
    no GPU (no driver) that call fails. Patching ``numba.cuda.dispatcher.get_current_device`` is a
    numba-cuda internal (checked with 0.30): re-check it on upgrade.
    """
    from numba.cuda import dispatcher

    fake = types.SimpleNamespace(compute_capability=tuple(cc))
    with _patch_lock:  # the patch is process-global: one compile at a time
        original = dispatcher.get_current_device
        dispatcher.get_current_device = lambda: fake
        try:
            yield
        finally:
            dispatcher.get_current_device = original


def kernel_signature(args: tuple) -> tuple:
    """Numba argument types of a CUDA driver launched as ``launch("cuda", E, N, *args)``.

    ``EnvKernel.launch`` passes ``num_envs``, ``num_agents`` and the lanes per env
    (:func:`~.program.launch_geometry`) as Python ints, which Numba's CUDA dispatcher types as int64, so they
    are int64 here too; every other argument is typed exactly as the dispatcher would (``numba.typeof``): a
    Python ``float`` becomes float64 (pass ``np.float32``), a Python ``int`` int64, a NamedTuple of arrays a
    Numba NamedTuple type.
    """
    import numba

    return (numba.types.int64,) * 3 + tuple(numba.typeof(a) for a in args)


def compile_ptx_sm90(kernel, args: tuple) -> str:
    """PTX (text) of ``kernel``'s CUDA build for sm_90, typed by the CPU-side ``args``.

    kernel: an :class:`~gpurl.kernels.program.EnvKernel`; args: the tuple it is launched with after
    ``num_envs, num_agents`` (NumPy arrays, NumPy scalars, NamedTuples of them; sizes do not matter,
    only dtypes, ranks and layouts). The same plain-Python driver that ``kernel.build("cuda")`` jits is
    compiled, so the PTX is what the GPU would run.
    """
    _require_real_compilers()
    from numba import cuda

    if len(args) != kernel.nargs:
        raise TypeError(f"kernel {kernel.name!r} takes {kernel.nargs} args, got {len(args)}")
    pyfunc = kernel.driver_python("cuda")
    sig = kernel_signature(tuple(args))
    with pretend_device(SM90):
        try:
            ptx, _ = cuda.compile_ptx(pyfunc, sig, cc=SM90, launch_bounds=kernel.launch_bounds)
        except Exception as err:
            try:
                found = typing_error(kernel, "cuda", tuple(args), err)  # names the author's phase and line
            except Exception:  # noqa: BLE001 - a failed diagnosis must not hide the error itself
                found = None
            if found is None:
                raise
            raise_alone(found, err)
    return ptx


# ---- float64 detection --------------------------------------------------------------------------------

_F64 = re.compile(r"\.f64\b|%fd\d")
_FUNC_START = re.compile(r"^\s*(\.\w+\s+)*\.(entry|func)\b")
# libdevice's __nv_sinf/__nv_cosf (what math.sin/math.cos on float32 compile to) reduce huge arguments
# (|x| > ~1e5, Payne-Hanek) through one int64 -> f64 -> scaled -> f32 conversion chain. nvcc's sinf/cosf
# contain the same three instructions; they sit on a cold path and are not an accidental promotion.
_TRIG_MUL = re.compile(r"^mul\.f64\s+(%fd\d+),\s*(%fd\d+),\s*0d3BF921FB54442D19;$")
_TRIG_CVT_IN = re.compile(r"^cvt\.rn\.f64\.s64\s+(%fd\d+),\s*%rd\d+;$")
_TRIG_CVT_OUT = re.compile(r"^cvt\.rn\.f32\.f64\s+%f\d+,\s*(%fd\d+);$")


def _instructions(ptx: str) -> list[list[str]]:
    """PTX instruction lines without comments, grouped by function (register names are per function).

    Directive lines (``.version``, ``.reg .f64 ...``, ``.param ...``) are dropped: a declaration of a
    float64 register or parameter always comes with an instruction that uses it.
    """
    ptx = re.sub(r"/\*.*?\*/", "", ptx, flags=re.S)
    groups: list[list[str]] = [[]]
    for raw in ptx.splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        if _FUNC_START.match(line):
            groups.append([])
        if line.startswith((".", "{", "}", ")")) or line.endswith(":"):
            continue
        groups[-1].append(line)
    return groups


def _trig_reduction_lines(lines: list[str]) -> set[int]:
    """Indices of the libdevice sinf/cosf reduction chain's instructions within one function."""
    muls = {i: _TRIG_MUL.match(line) for i, line in enumerate(lines)}
    muls = {i: m for i, m in muls.items() if m}
    outs = {m.group(1) for m in muls.values()}
    ins = {m.group(2) for m in muls.values()}
    allowed = set(muls)
    for i, line in enumerate(lines):
        cvt_in, cvt_out = _TRIG_CVT_IN.match(line), _TRIG_CVT_OUT.match(line)
        if (cvt_in and cvt_in.group(1) in ins) or (cvt_out and cvt_out.group(1) in outs):
            allowed.add(i)
    return allowed


def float64_instructions(ptx: str, *, allow_libdevice_trig: bool = False) -> list[str]:
    """PTX instructions that touch float64 (``.f64`` types or ``%fd`` registers); empty means none.

    allow_libdevice_trig: ignore the three-instruction huge-argument reduction inside libdevice's
    float32 ``sinf``/``cosf`` (see above); any other float64 in the same kernel is still reported.
    """
    found = []
    for lines in _instructions(ptx):
        skip = _trig_reduction_lines(lines) if allow_libdevice_trig else set()
        found += [line for i, line in enumerate(lines) if i not in skip and _F64.search(line)]
    return found


def check_float64_sm90(kernel, args: tuple, *, constants: tuple = (), ptx: str | None = None,
                       allow_libdevice_trig: bool = False) -> str:
    """``kernel``'s sm_90 PTX for ``args`` (:func:`compile_ptx_sm90`, or ``ptx`` when given: compiled
    with ``constants``), checked for float64; returns the PTX when it has none.

    Otherwise raises :class:`~gpurl.kernels.errors.KernelFloat64Error` naming the author's function,
    line and variable or expression, read from the typed code of the phases' device functions
    (:func:`~gpurl.kernels.float64.cuda_float64_error`): PTX line info cannot say it, since NVVM inlines
    the author's functions into the kernel gpurl generates and ``.loc`` then names only that kernel's
    lines. When the float64 is not in the author's code (a toolkit or libdevice function), the error names
    the kernel, its phase functions and the first float64 instructions.
    """
    from .errors import KernelFloat64Error
    from .float64 import cuda_float64_error

    if ptx is None:
        if constants:
            raise TypeError("pass the PTX compiled with these constants (ptx=...)")
        ptx = compile_ptx_sm90(kernel, args)
    found = float64_instructions(ptx, allow_libdevice_trig=allow_libdevice_trig)
    if not found:
        return ptx
    error = cuda_float64_error(kernel, tuple(args), constants)
    if error is None:
        phases = ", ".join(f"{ph.fn.__name__} (per {ph.kind})" for ph in kernel.phases)
        shown = "\n".join(f"    {line}" for line in found[:8]) + ("\n    ..." if len(found) > 8 else "")
        error = KernelFloat64Error(f"kernel {kernel.name!r} (cuda build): {len(found)} float64 PTX instructions, "
                                   f"none from a float64 in the phases' own code ({phases}); look at the "
                                   f"helpers they call and at float64 arguments:\n{shown}")
    raise error


# ---- ptxas ---------------------------------------------------------------------------------------------

def _toolkit_candidates(tool: str, env_var: str, beside: str | None) -> Iterator[str]:
    """Where a CUDA toolkit binary ``tool`` may be: ``$env_var``, beside the real binary of ``beside`` (on
    PATH, ``beside`` is often a symlink or a wrapper script outside the toolkit), on PATH, in
    ``$CUDA_HOME``/``$CUDA_PATH``, in /usr/local/cuda."""
    if os.environ.get(env_var):
        yield os.environ[env_var]
    anchor = beside and shutil.which(beside)
    if anchor:
        yield os.path.join(os.path.dirname(os.path.realpath(anchor)), tool)
    on_path = shutil.which(tool)
    if on_path:
        yield on_path
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            yield os.path.join(os.environ[var], "bin", tool)
    yield f"/usr/local/cuda/bin/{tool}"


def _first_executable(candidates: Iterator[str]) -> str | None:
    return next((p for p in candidates if os.path.isfile(p) and os.access(p, os.X_OK)), None)


def _ptxas_candidates() -> Iterator[str]:
    yield from _toolkit_candidates("ptxas", "GPURL_PTXAS", beside="nvcc")
    # pip toolkits: cuda-toolkit[nvcc] (nvidia/cu13/bin) and CUDA 12's nvidia-cuda-nvcc-cu12
    # (nvidia/cuda_nvcc/bin). Triton's bundled ptxas is left out on purpose: it is older (CUDA 12.8 in
    # triton 3.7) than the PTX ISA NVVM 13 emits, and Triton already assembles its own PTX with it.
    for site in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], sys.prefix}:
        yield from sorted(glob.glob(os.path.join(site, "nvidia", "*", "bin", "ptxas")))


def find_ptxas() -> str | None:
    """Path of a CUDA toolkit ``ptxas`` (``$GPURL_PTXAS`` first), or None when there is none."""
    return _first_executable(_ptxas_candidates())


class PtxasError(RuntimeError):
    """ptxas rejected the PTX; the message carries its stderr."""


def assemble_sm90(ptx: str, ptxas: str | None = None) -> bytes:
    """Assemble ``ptx`` with ``ptxas -arch=sm_90`` and return the cubin (ELF bytes).

    ptxas: path to the assembler; :func:`find_ptxas` when None. Raises FileNotFoundError when there is
    no ptxas and :class:`PtxasError` (with ptxas' stderr) when it rejects the PTX.
    """
    return _assembled(_require_ptxas(ptxas), "sm_90", ptx)[0]


def _require_ptxas(ptxas: str | None) -> str:
    ptxas = ptxas or find_ptxas()
    if ptxas is None:
        raise FileNotFoundError("no ptxas found: install the CUDA toolkit or set GPURL_PTXAS")
    return ptxas


@functools.lru_cache(maxsize=64)
def _assembled(ptxas: str, arch: str, ptx: str) -> tuple[bytes, str]:
    """(cubin, ``ptxas -v``'s report) of ``ptx`` for ``arch``: one ptxas run serves both the machine code
    (:func:`assemble_sm90`) and the resources (:func:`ptxas_resources`) of a kernel, which the compile
    tier's checks and bench/kernel_report.py each ask for."""
    with tempfile.TemporaryDirectory(prefix="gpurl-ptxas-") as tmp:
        src, out = os.path.join(tmp, "kernel.ptx"), os.path.join(tmp, "kernel.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        done = subprocess.run([ptxas, f"-arch={arch}", "-v", "-o", out, src], capture_output=True, text=True)
        if done.returncode != 0:
            raise PtxasError(f"{ptxas} -arch={arch} failed ({done.returncode}):\n{done.stderr.strip()}")
        with open(out, "rb") as f:
            return f.read(), done.stdout + "\n" + done.stderr


# ---- machine code (SASS) ------------------------------------------------------------------------------

#: sm_90 machine-code forms that ptxas 13.0 has been seen to get wrong in a gpurl kernel: an integer min/max
#: (VIMNMX) whose integer result is discarded (``RZ``) and whose predicate output is used. In tag_gridworld's
#: build for int32 actions, ``clamp_action(a, 5) == 4`` became ``VIMNMX.RELU RZ, P1, P1, R6, 0x4, PT``, and
#: on an H100 an action 0 then moved the agent as action 4 does; the int64 build compiles to plain
#: comparisons and was right (docs/custom_env.md, section 14).
_SUSPECT_SASS = re.compile(r"\bVIMNMX(?:\.\w+)*\s+RZ,\s*P\d")


def _cuobjdump_candidates() -> Iterator[str]:
    if os.environ.get("GPURL_CUOBJDUMP"):
        yield os.environ["GPURL_CUOBJDUMP"]
    ptxas = find_ptxas()
    if ptxas is not None:  # the toolkit's own, beside its ptxas
        yield os.path.join(os.path.dirname(os.path.realpath(ptxas)), "cuobjdump")
    yield from _toolkit_candidates("cuobjdump", "GPURL_CUOBJDUMP", beside=None)
    # Triton's bundled one (CUDA 12.8 in triton 3.7) reads ptxas 13.0's sm_90 cubins; its ptxas is the
    # one left out of find_ptxas, not this.
    for site in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        yield os.path.join(site, "triton", "backends", "nvidia", "bin", "cuobjdump")


def find_cuobjdump() -> str | None:
    """Path of a ``cuobjdump`` (``$GPURL_CUOBJDUMP`` first; then the toolkit's, on PATH, Triton's bundled
    one), or None when there is none."""
    return _first_executable(_cuobjdump_candidates())


def sass_sm90(cubin: bytes, cuobjdump: str | None = None) -> str:
    """The machine code (SASS) of ``cubin`` (from :func:`assemble_sm90`), as ``cuobjdump -sass`` prints it.

    cuobjdump: path to the tool; :func:`find_cuobjdump` when None. Raises FileNotFoundError when there is
    none and RuntimeError (with its stderr) when it fails.
    """
    cuobjdump = cuobjdump or find_cuobjdump()
    if cuobjdump is None:
        raise FileNotFoundError("no cuobjdump found: install the CUDA toolkit or triton, or set GPURL_CUOBJDUMP")
    with tempfile.TemporaryDirectory(prefix="gpurl-sass-") as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        done = subprocess.run([cuobjdump, "-sass", path], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{cuobjdump} -sass failed ({done.returncode}):\n{done.stderr.strip()}")
    return done.stdout


def suspect_instructions(sass: str) -> list[str]:
    """The instructions of ``sass`` (from :func:`sass_sm90`) in a form ptxas has been seen to compile wrongly
    for sm_90 (``_SUSPECT_SASS``), stripped of their addresses and encodings; [] for clean code."""
    found = []
    for line in sass.splitlines():
        if _SUSPECT_SASS.search(line):
            code = line.split("*/", 1)[-1].split("/*", 1)[0]
            found.append(" ".join(code.split()))
    return found


_SASS_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_BACKWARD_BRANCH = re.compile(r"\bBRA\s+(?:\S+\s+)?0x([0-9a-f]+)\b")


class SassLoop(NamedTuple):
    """One loop of a kernel's machine code: from the backward branch's target ``start`` to the branch at
    ``end`` (addresses), and the ``instructions`` between them as laid out (inner loops included)."""

    start: int
    end: int
    instructions: list[str]

    def contains(self, other: "SassLoop") -> bool:
        return self is not other and self.start <= other.start and other.end <= self.end

    @property
    def loads(self) -> int:
        """Global-memory loads in the body (``LDG``)."""
        return sum("LDG" in op for op in self.instructions)


def sass_instructions(sass: str) -> list[tuple[int, str]]:
    """The instructions of ``sass`` (from :func:`sass_sm90`): (address, text without its encoding)."""
    return [(int(m.group(1), 16), m.group(2)) for m in map(_SASS_INSTRUCTION.match, sass.splitlines()) if m]


def sass_loops(sass: str) -> list[SassLoop]:
    """The loops of ``sass`` (from :func:`sass_sm90`), one per backward branch, shortest first."""
    code = sass_instructions(sass)
    loops = []
    for address, text in code:
        branch = _BACKWARD_BRANCH.search(text)
        if branch and int(branch.group(1), 16) < address:
            top = int(branch.group(1), 16)
            loops.append(SassLoop(top, address, [t for a, t in code if top <= a <= address]))
    return sorted(loops, key=lambda loop: len(loop.instructions))


# ---- Triton ---------------------------------------------------------------------------------------------

def compile_triton_sm90(fn, signature: dict[str, str], constexprs: dict | None = None, **options):
    """Compile a ``@triton.jit`` function for sm_90 without a GPU; returns Triton's compiled kernel.

    signature: argument name -> Triton type string (``"*fp32"``, ``"i32"``, ...); constexprs: name ->
    value for ``tl.constexpr`` parameters (added to the signature as ``"constexpr"`` when missing);
    options: Triton compile options such as ``num_warps``. The result's ``asm`` dict holds ``"ptx"``
    and ``"cubin"``.
    """
    if os.environ.get("TRITON_INTERPRET", "0") == "1":
        raise RuntimeError("AOT compilation of Triton kernels needs TRITON_INTERPRET unset")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    constexprs = dict(constexprs or {})
    signature = {**signature, **{name: "constexpr" for name in constexprs if name not in signature}}
    source = ASTSource(fn, signature, constexprs)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options or None)


# ---- resource usage (the kernel report and the compile tier's limit checks) ------------------------------

_ptx_cache: dict[tuple, str] = {}
_ptx_cache_lock = threading.Lock()


def cached_ptx_sm90(kernel, args: tuple, constants: tuple = ()) -> str:
    """:func:`compile_ptx_sm90` of ``kernel`` for ``args``, built with ``constants`` (a
    :func:`~gpurl.kernels.targets.freeze_constants` tuple, as the launch passes it), compiled once per
    (kernel, Numba signature, constants) in this process: NVVM takes seconds per kernel and several
    callers (report, compile tier) need the same PTX.
    """
    from . import counted_loops

    key = (kernel, kernel_signature(tuple(args)), tuple(constants), counted_loops.ENABLED)
    with _ptx_cache_lock:
        if key in _ptx_cache:
            return _ptx_cache[key]
    if not constants:
        ptx = compile_ptx_sm90(kernel, args)
    else:
        _require_real_compilers()
        from numba import cuda

        if len(args) != kernel.nargs:
            raise TypeError(f"kernel {kernel.name!r} takes {kernel.nargs} args, got {len(args)}")
        pyfunc = kernel.driver_python("cuda", tuple(constants))
        with pretend_device(SM90):
            try:
                ptx, _ = cuda.compile_ptx(pyfunc, kernel_signature(tuple(args)), cc=SM90,
                                          launch_bounds=kernel.launch_bounds)
            except Exception as err:
                try:
                    found = typing_error(kernel, "cuda", tuple(args), err, tuple(constants))
                except Exception:  # noqa: BLE001 - a failed diagnosis must not hide the error itself
                    found = None
                if found is None:
                    raise
                raise_alone(found, err)
    with _ptx_cache_lock:
        _ptx_cache[key] = ptx
    return ptx


def ptxas_resources(ptx: str, ptxas: str | None = None) -> dict:
    """Per-function resource usage of ``ptx`` as ``ptxas -v`` reports it: name ->
    :class:`~gpurl.kernels.occupancy.PtxasResources` (registers, spill stores/loads, stack frame, static
    shared memory, constant banks; ``entry`` marks the kernels).

    The arch is the PTX's own ``.target`` (``sm_90``; Triton emits ``sm_90a``), so the numbers are those of
    the cubin a GPU would load. ptxas: as for :func:`assemble_sm90`; raises :class:`PtxasError` when it
    rejects the PTX.
    """
    from .occupancy import parse_ptxas_verbose

    target = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, flags=re.M)
    return parse_ptxas_verbose(_assembled(_require_ptxas(ptxas), target.group(1) if target else "sm_90", ptx)[1])
