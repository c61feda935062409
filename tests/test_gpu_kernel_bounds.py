"""GPU tier: compute-sanitizer's memcheck over one reset and step of every built-in env and the custom-env
example finds no access outside an allocation, and a kernel whose obs is declared two features too small is
stopped by the first-launch check (gpurl/kernels/bounds.py) before it runs. A control launches a compiled
build with a write one past its array, the check bypassed: memcheck must see it, or the clean run proves
nothing. Skips without CUDA or without compute-sanitizer on PATH; the work runs in child processes under
the sanitizer (tests/kernel_bounds_memcheck.py)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

CHILD = Path(__file__).with_name("kernel_bounds_memcheck.py")


@pytest.fixture
def memcheck(requires_cuda):
    sanitizer = shutil.which("compute-sanitizer")
    if sanitizer is None:
        pytest.skip("gpu tier: compute-sanitizer is not on PATH (it ships with the CUDA toolkit)")

    def run(*args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}  # a tensor per allocation: exact bounds
        return subprocess.run([sanitizer, "--tool", "memcheck", "--error-exitcode", "97", sys.executable,
                               str(CHILD), *args], capture_output=True, text=True, env=env, timeout=1800)
    return run


def test_memcheck_finds_nothing_in_a_step_of_every_env(memcheck):
    import gpurl

    done = memcheck("envs")
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-6000:]
    assert "ERROR SUMMARY: 0 errors" in out
    stepped = {line.split()[1] for line in done.stdout.splitlines() if line.startswith("STEPPED ")}
    assert stepped == set(gpurl.registered()) | {"foraging"}
    assert "CAUGHT kernel 'foraging_short_obs' (cuda build): IndexError in env 0" in done.stdout
    assert "DONE" in done.stdout


def test_memcheck_sees_a_write_past_an_array_when_the_check_is_bypassed(memcheck):
    done = memcheck("unchecked")
    out = done.stdout + done.stderr
    assert done.returncode == 97, out[-6000:]
    assert "Invalid __global__ write" in out
