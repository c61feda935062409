"""An on-disk cache of CPU env-kernel builds, keyed by everything a build is made of.

A CPU build of an env kernel takes Numba 20-60 s to compile (every phase inlined into one prange body),
and the same build is wanted again in every new process: the next run of a script, each rank of a
torchrun job, each test module. Numba's own ``cache=True`` cannot serve it: it needs the function in a
source file and keys the cache on that file alone, while a build is generated source calling phases and
helpers from many modules, with build constants frozen in.

So the key here is a SHA-256 over the build's whole make-up: the generated sources, the build
constants, and, for every function it reaches (phases, guards, helpers, their per-target overrides,
recursively), its code object and the value of every global it reads that is not a function (Numba
freezes those into the code as literals), plus the versions of Python, Numba and llvmlite and the Numba
settings that change code (``numba.config.BOUNDSCHECK``, ``OPT``, ...). Numba adds the argument types and
the CPU to each entry. A change anywhere in that make-up is a new key, so a stale build is never loaded;
old entries are left for the user to delete.

Where: ``$GPURL_CACHE_DIR``, else ``$NUMBA_CACHE_DIR/gpurl-builds``, else ``$XDG_CACHE_HOME/gpurl/builds``
(default ``~/.cache/gpurl/builds``, beside the compiled torch code in ``~/.cache/gpurl/inductor``).
``GPURL_CACHE_DIR=off`` turns it off. A folder that is a file or cannot be written gives way to the next of
these, with one line on stderr naming the variable, the path, why, and where the builds go instead. Writes
are Numba's (a temporary file renamed into place), so no process loads a half-written entry; and processes that
want the same build at once take turns (a lock file per build in ``locks/``), so one compiles it and the others
load it.
"""
from __future__ import annotations

import enum
import hashlib
import os
import re
import sys
import types
from pathlib import Path
from typing import Callable

import numpy as np

from . import compile_log

#: Bump when the key's recipe changes, so entries written under the old recipe are never read.
KEY_VERSION = "1"
#: Numba settings (``numba.config``, from ``NUMBA_*`` variables or set at run time) that change the code a
#: build compiles to.
NUMBA_SETTINGS = ("BOUNDSCHECK", "OPT", "DEBUGINFO_DEFAULT", "LOOP_VECTORIZE", "SLP_VECTORIZE", "ENABLE_AVX",
                  "CPU_NAME", "CPU_FEATURES")
#: The toolkit's files that decide how a build is generated and compiled.
RECIPE_FILES = ("program.py", "generated_source.py", "targets.py", "build_cache.py")
OFF = "off"
#: The cache's folder of lock files, one per build key: a compile holds its build's (see _compile_in_turn).
LOCKS = "locks"
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def cache_dir() -> Path | None:
    """The cache's folder, or None when it is turned off (``GPURL_CACHE_DIR=off``) or no candidate is usable.

    A folder that cannot be used (a file, or not writable) gives way to the next candidate of the module
    docstring's list, and says so once on stderr: ``gpurl: GPURL_CACHE_DIR=/x is unusable (it is a file, not
    a folder): CPU kernel builds are cached in ~/.cache/gpurl/builds instead`` (or ``... are not cached``)."""
    chosen = os.environ.get("GPURL_CACHE_DIR")
    if chosen is not None and chosen.strip().lower() in (OFF, "0", ""):
        return None
    candidates = [("GPURL_CACHE_DIR", chosen, Path(chosen))] if chosen is not None else []
    numba_dir = os.environ.get("NUMBA_CACHE_DIR")
    if numba_dir:
        candidates.append(("NUMBA_CACHE_DIR", numba_dir, Path(numba_dir) / "gpurl-builds"))
    xdg = os.environ.get("XDG_CACHE_HOME")
    default = Path(xdg or Path.home() / ".cache") / "gpurl" / "builds"
    candidates.append(("XDG_CACHE_HOME" if xdg else "HOME", xdg or str(Path.home()), default))
    unusable = []
    for variable, value, path in candidates:
        why = _unusable(path)
        if why is None:
            break
        unusable.append((variable, value, path, why))
    else:
        path = None
    for variable, value, bad, why in unusable:
        if (variable, value) not in _warned:
            _warned.add((variable, value))
            shown = f"{variable}={value}" + (f" ({bad})" if str(bad) != value else "")
            instead = f"are cached in {path} instead" if path is not None else "are not cached"
            print(f"gpurl: {shown} is unusable ({why}): CPU kernel builds {instead}", file=sys.stderr)
    return path


_warned: set[tuple[str, str]] = set()
_usable: dict[Path, str | None] = {}


def _unusable(path: Path) -> str | None:
    """Why the cache cannot live in ``path``, or None when it can (asked once per path; creates nothing)."""
    if path not in _usable:
        _usable[path] = _why_unusable(path)
    return _usable[path]


def _why_unusable(path: Path) -> str | None:
    import tempfile

    existing = path
    while not existing.exists() and existing.parent != existing:  # Numba creates the missing folders
        existing = existing.parent
    if not existing.is_dir():
        return "it is a file, not a folder" if existing == path else f"{existing} is a file, not a folder"
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as err:
        return f"{'it' if existing == path else existing} is not writable ({err.strerror or err})"
    return None


def build_key(sources: dict[str, str], roots: list[Callable], constants: tuple) -> str:
    """The hex digest naming one build: ``sources`` (generated function name -> source), the functions it
    calls (``roots``: DeviceFunctions or plain functions; everything they reach is walked) and its
    frozen ``constants``."""
    import llvmlite
    import numba

    h = hashlib.sha256()
    h.update(repr((KEY_VERSION, sys.version, numba.__version__, llvmlite.__version__)).encode())
    h.update(repr([(name, getattr(numba.config, name, None)) for name in NUMBA_SETTINGS]).encode())
    h.update(repr(constants).encode())
    for recipe in RECIPE_FILES:  # how gpurl generates and compiles builds (njit flags, inlining)
        h.update((Path(__file__).parent / recipe).read_bytes())
    for name in sorted(sources):
        h.update(f"{name}\0{sources[name]}\0".encode())
    seen: set[int] = set()
    for root in roots:
        _hash_function(h, root, seen)
    return h.hexdigest()


def _hash_function(h, fn, seen: set[int]) -> None:
    """Fold ``fn`` (a DeviceFunction, a Numba dispatcher or a plain function) and everything it reaches into
    ``h``: code objects, and the global values they read."""
    from .targets import DeviceFunction

    if isinstance(fn, DeviceFunction):
        for impl in (fn.py_func, *(fn._overrides[t] for t in sorted(fn._overrides))):
            _hash_function(h, impl, seen)
        return
    fn = getattr(fn, "py_func", fn)  # a Numba dispatcher
    if not isinstance(fn, types.FunctionType) or id(fn) in seen:
        return
    seen.add(id(fn))
    h.update(f"{fn.__module__}.{fn.__qualname__}\0".encode())
    h.update(_code_bytes(fn.__code__))
    for cell in fn.__closure__ or ():
        _hash_value(h, cell.cell_contents, seen)
    for name in sorted(_names(fn.__code__)):
        if name in fn.__globals__:
            h.update(f"{name}=".encode())
            _hash_value(h, fn.__globals__[name], seen)


def _hash_value(h, value, seen: set[int]) -> None:
    from .targets import DeviceFunction

    if isinstance(value, (types.FunctionType, DeviceFunction)) or hasattr(value, "py_func"):
        _hash_function(h, value, seen)
    elif isinstance(value, types.ModuleType):
        h.update(f"module {value.__name__}\0".encode())
    elif isinstance(value, type) and issubclass(value, enum.Enum):  # Numba compiles members as literals
        h.update(repr([(m.name, m.value) for m in value]).encode())
    elif isinstance(value, np.ndarray):
        h.update(f"array {value.dtype} {value.shape}\0".encode() + value.tobytes())
    else:  # a number, a tuple, a class, a builtin, a Numba type: what Numba compiles in is what repr shows
        h.update(f"{type(value).__module__}.{type(value).__qualname__} {_ADDRESS.sub('', repr(value))}\0".encode())


def _names(code: types.CodeType) -> set[str]:
    """Global names ``code`` and the code objects nested in it read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _code_bytes(code: types.CodeType) -> bytes:
    """The parts of a code object that decide what it computes (not its file name or line numbers: moving
    a function in its file keeps the build)."""
    consts = [_code_bytes(c) if isinstance(c, types.CodeType) else repr((type(c).__name__, c)).encode()
              for c in code.co_consts]
    return b"\0".join([code.co_code, repr((code.co_names, code.co_varnames, code.co_argcount,
                                           code.co_freevars, code.co_cellvars)).encode(), *consts])


def enable(dispatcher, key: str, where: Path) -> None:
    """Make the Numba ``dispatcher`` load and save its compilations under ``where``, named by ``key``."""
    from numba.core.caching import CompileResultCacheImpl, FunctionCache, _CacheLocator

    class Locator(_CacheLocator):
        def __init__(self, py_func, py_file):
            self._py_file = py_file  # Numba's warnings name it

        def get_cache_path(self):
            return str(where)

        def get_source_stamp(self):
            return key

        def get_disambiguator(self):
            return key[:32]

        @classmethod
        def from_function(cls, py_func, py_file):
            return cls(py_func, py_file)

    class Impl(CompileResultCacheImpl):
        _locator_classes = [Locator]

    class BuildCache(FunctionCache):
        """Numba's cache, except that an entry it cannot read (cut short by a crash, or written by another
        version of an env whose argument types no longer exist) is a miss whose index is dropped, so the
        compile that follows writes a whole one; a save that fails leaves the build in memory only."""
        _impl_class = Impl

        def load_overload(self, sig, target_context):
            try:
                return super().load_overload(sig, target_context)
            except Exception:  # noqa: BLE001 - compiling again is always correct
                self._drop_index()
                return None

        def save_overload(self, sig, data):
            try:
                super().save_overload(sig, data)
            except Exception:  # noqa: BLE001
                self._drop_index()

        def _drop_index(self):
            try:
                os.remove(self._cache_file._index_path)
            except OSError:
                pass

    dispatcher._cache = BuildCache(dispatcher.py_func)
    _compile_in_turn(dispatcher, key, where)


def _compile_in_turn(dispatcher, key: str, where: Path) -> None:
    """Processes that want the same build at once (the ranks of a torchrun job, test workers, two runs) take
    turns: each compile of ``dispatcher`` (which first looks in the cache) holds an exclusive lock on
    ``where/locks/<key>.lock``, so the first process compiles and saves, and the others, having waited, load
    its entry instead of compiling it again. The lock is ``flock``'s, released when its file closes or its
    process dies, so a crash leaves no lock behind. Where there are no such locks (no ``fcntl``) or the file
    cannot be opened, compiles do not wait. Wraps the dispatcher's ``compile`` (a Numba internal that
    ``_compile_for_args`` calls; checked with numba 0.68)."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock
        return
    compile_signature = dispatcher.compile
    lock_path = where / LOCKS / f"{key}.lock"

    def compile_in_turn(sig):
        try:
            lock_path.parent.mkdir(exist_ok=True)
            handle = open(lock_path, "a")
        except OSError:
            return compile_signature(sig)
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                with compile_log.waiting("waiting for another process building the same kernel"):
                    fcntl.flock(handle, fcntl.LOCK_EX)
            return compile_signature(sig)

    dispatcher.compile = compile_in_turn
