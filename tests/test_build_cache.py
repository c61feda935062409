"""The on-disk cache of CPU builds (gpurl/kernels/build_cache.py): a second process loads a build instead of
compiling it and computes the same numbers; any change to what the build is made of compiles anew.

Each run is a fresh Python process over a tiny kernel written to a temporary module (a few seconds to
compile), which prints its output and the dispatcher's cache hits and misses.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gpurl.kernels import build_cache

pytestmark = pytest.mark.cpu

KERNEL_MODULE = '''
import json, sys
import numpy as np
from gpurl.kernels import EnvKernel, device, freeze_constants, per_agent

SCALE = np.float32({scale})
SIZE = 0


@device
def bump(i):
    return np.float32(i) {op} np.float32(1)


def phase(e, i, x):
    x[e, i] = x[e, i] * SCALE + bump(i) + np.float32(SIZE)


kernel = EnvKernel("cached_toy", [per_agent(phase)], nargs=1)
x = np.ones((3, 4), np.float32)
constants = freeze_constants({{"SIZE": {size}}})
if len(sys.argv) > 1:  # a start line: say so (a file named ready.<pid>), launch when the file go exists
    import os, pathlib, time
    line = pathlib.Path(sys.argv[1])
    (line / f"ready.{{os.getpid()}}").touch()
    while not (line / "go").exists():
        time.sleep(0.005)
kernel.launch("cpu", 3, 4, x, constants=constants)
stats = kernel.build("cpu", constants).stats
print(json.dumps({{"x": x[0].tolist(), "hits": sum(stats.cache_hits.values()),
                  "misses": sum(stats.cache_misses.values())}}))
'''


def run(tmp_path: Path, cache: str, scale="2.0", op="+", size=0, pad_lines=0, extra_env=None) -> dict:
    """Write the toy kernel's module (``pad_lines`` blank lines first) and run it in a new process."""
    module = tmp_path / "toy_kernel.py"
    module.write_text("\n" * pad_lines + textwrap.dedent(KERNEL_MODULE.format(scale=scale, op=op, size=size)))
    env = {**os.environ, "GPURL_CACHE_DIR": cache, **(extra_env or {})}
    done = subprocess.run([sys.executable, str(module)], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_second_process_loads_the_build_and_a_changed_build_compiles_anew(tmp_path):
    cache = str(tmp_path / "cache")
    first = run(tmp_path, cache)
    assert (first["misses"], first["hits"]) == (1, 0)
    assert first["x"] == [3.0, 4.0, 5.0, 6.0]  # 1 * 2 + (i + 1)

    again = run(tmp_path, cache, pad_lines=3)  # the same code, moved down its file
    assert (again["misses"], again["hits"]) == (0, 1)
    assert again["x"] == first["x"]

    helper_changed = run(tmp_path, cache, op="-")  # a helper's code
    assert (helper_changed["misses"], helper_changed["hits"]) == (1, 0)
    assert helper_changed["x"] == [1.0, 2.0, 3.0, 4.0]

    global_changed = run(tmp_path, cache, scale="3.0")  # a module global Numba freezes in
    assert (global_changed["misses"], global_changed["hits"]) == (1, 0)
    assert global_changed["x"] == [4.0, 5.0, 6.0, 7.0]

    constant_changed = run(tmp_path, cache, size=10)  # a build constant
    assert (constant_changed["misses"], constant_changed["hits"]) == (1, 0)
    assert constant_changed["x"] == [13.0, 14.0, 15.0, 16.0]

    switch_changed = run(tmp_path, cache, extra_env={"NUMBA_BOUNDSCHECK": "1"})  # a Numba switch
    assert (switch_changed["misses"], switch_changed["hits"]) == (1, 0)

    assert run(tmp_path, cache)["hits"] == 1  # the first build is still there


def test_processes_that_want_the_same_build_at_once_compile_it_once(tmp_path):
    """Two processes launch the same new build at the same moment: one compiles it, the other waits for its
    turn and loads it (each alone would compile it: both miss an empty cache)."""
    module = tmp_path / "toy_kernel.py"
    module.write_text(textwrap.dedent(KERNEL_MODULE.format(scale="2.0", op="+", size=0)))
    env = {**os.environ, "GPURL_CACHE_DIR": str(tmp_path / "cache")}
    line = tmp_path / "line"
    line.mkdir()
    runs = [subprocess.Popen([sys.executable, str(module), str(line)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path) for _ in range(2)]
    try:
        for _ in range(6000):  # both imported gpurl and made the kernel (at most a minute)
            if len(list(line.glob("ready.*"))) == 2 or any(r.poll() is not None for r in runs):
                break
            time.sleep(0.01)
        (line / "go").touch()
        outputs = [r.communicate(timeout=300) for r in runs]
    finally:
        for r in runs:
            r.kill()
    for r, (out, err) in zip(runs, outputs):
        assert r.returncode == 0, err[-3000:]
    results = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    assert sorted((r["misses"], r["hits"]) for r in results) == [(0, 1), (1, 0)]
    assert results[0]["x"] == results[1]["x"] == [3.0, 4.0, 5.0, 6.0]
    assert list((tmp_path / "cache" / build_cache.LOCKS).glob("*.lock")), "no lock file"


def test_an_unreadable_entry_is_compiled_again(tmp_path):
    cache = tmp_path / "cache"
    want = run(tmp_path, str(cache))["x"]
    entries = sorted(p for p in cache.iterdir() if p.is_file())  # not the folder of settled bounds checks
    assert {p.suffix for p in entries} == {".nbi", ".nbc"}
    for p in entries:
        p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2])  # as a crash mid-write would leave it
    again = run(tmp_path, str(cache))
    assert (again["misses"], again["x"]) == (1, want)
    assert run(tmp_path, str(cache))["hits"] == 1  # rewritten whole


def test_off_writes_nothing(tmp_path, monkeypatch):
    for off in ("off", "0", ""):
        monkeypatch.setenv("GPURL_CACHE_DIR", off)
        assert build_cache.cache_dir() is None
    monkeypatch.delenv("GPURL_CACHE_DIR")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert build_cache.cache_dir() == tmp_path / "gpurl-builds"
    assert run(tmp_path, "off")["hits"] == 0
    assert run(tmp_path, "off")["hits"] == 0  # nothing was kept for the second run
    assert sorted(p.name for p in tmp_path.iterdir()) == ["toy_kernel.py"]
