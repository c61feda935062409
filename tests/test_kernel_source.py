"""The source gpurl generates around an env's phases is readable (``env.kernel_source(target)``,
``EnvKernel.source``), and a CPU build compiles each function of it once: the prange driver casts its index to
int64 before any call (Numba types the index int64 in the driver and uint64 in the parallel body it builds, and a
call with each compiled every called function twice), and the functions the driver calls without the wrappers that
would make them callable from Python or C, which the driver does not use: its machine code is the same."""
from __future__ import annotations

import re

import numpy as np
import numba
import pytest

from gpurl.kernels import EnvKernel, per_agent, per_env, program

from custom_env_harness import make_small

pytestmark = pytest.mark.cpu


def _scale(e, i, x, total):
    x[e, i] = x[e, i] * np.float32(2)


def _sum(e, x, total):
    total[e] = np.float32(0)
    for i in range(x.shape[1]):
        total[e] += x[e, i]


def _over_ten(e, x, total):
    return total[e] > np.float32(10)


def _halve(e, x, total):
    total[e] = total[e] * np.float32(0.5)


def test_each_function_of_a_cpu_build_compiles_once(monkeypatch):
    monkeypatch.setenv("GPURL_CACHE_DIR", "off")  # compiled here: a build loaded from the cache has no overloads yet
    kernel = EnvKernel("compiled_once", [per_agent(_scale), per_env(_sum), per_env(_halve, when=_over_ten, rare=True)],
                       nargs=2)
    x, total = np.ones((5, 3), np.float32), np.zeros(5, np.float32)
    kernel.launch("cpu", 5, 3, x, total)
    np.testing.assert_array_equal(total, np.full(5, 6, np.float32))
    kernel.launch("cpu", 5, 3, x, total)  # 12 > 10: the rare phase halves it
    np.testing.assert_array_equal(total, np.full(5, 6, np.float32))
    called = {name: f for name, f in kernel.build("cpu").py_func.__globals__.items()
              if name.startswith("compiled_once_cpu_") and isinstance(f, numba.core.registry.CPUDispatcher)}
    assert set(called) == {"compiled_once_cpu_p0", "compiled_once_cpu_p1", "compiled_once_cpu_rare2"}
    assert {name: len(f.overloads) for name, f in called.items()} == {name: 1 for name in called}


def _compiled(name: str) -> tuple[str, list]:
    """(the machine code of a fresh CPU build of the three-phase kernel above, launched once, with its symbols'
    names and addresses blanked out; the compile results of the functions its driver calls)."""
    kernel = EnvKernel(name, [per_agent(_scale), per_env(_sum), per_env(_halve, when=_over_ten, rare=True)], nargs=2)
    kernel.launch("cpu", 5, 3, np.ones((5, 3), np.float32), np.zeros(5, np.float32))
    driver = kernel.build("cpu")
    (signature,) = driver.signatures
    callees = [cres for f in driver.py_func.__globals__.values() if isinstance(f, numba.core.registry.CPUDispatcher)
               for cres in f.overloads.values()]
    names = re.compile(r"[\w.$]*_ZN[\w.$]*|0x[0-9a-f]{6,}")  # mangled names carry the options and addresses
    return names.sub("NAME", driver.inspect_asm(signature)), callees


def _wrappers(cres) -> list[str]:
    """The wrappers a compiled function's library defines: "cpython" (calls from Python), "cfunc" (from C)."""
    defined = re.findall(r"^define [^@]*@\"?([\w.$]+)", cres.library.get_llvm_str(), re.MULTILINE)
    return sorted({"cpython" if name.startswith("_ZN7cpython") else "cfunc" for name in defined
                   if name.startswith(("_ZN7cpython", "cfunc."))})


def test_the_drivers_callees_have_no_wrappers_and_the_driver_compiles_to_the_same_code(monkeypatch):
    monkeypatch.setenv("GPURL_CACHE_DIR", "off")  # compiled here: a build loaded from the cache has no overloads
    lean, callees = _compiled("callee_options")
    assert len(callees) == 3 and all(_wrappers(cres) == [] for cres in callees)
    monkeypatch.setattr(program, "CALLEE_OPTIONS", {"_nrt": False})  # Numba's defaults: both wrappers
    wrapped, callees = _compiled("callee_options")
    assert all(_wrappers(cres) == ["cfunc", "cpython"] for cres in callees)
    assert lean == wrapped


def test_an_envs_generated_source_names_its_functions_for_each_target():
    env = make_small(num_envs=2)
    cpu = env.kernel_source()  # the env's own target
    assert cpu == env.kernel_source("cpu") == env.kernel.source("cpu", env._build_constants)
    assert "def foraging_cpu(num_envs, num_agents, envs_per_call," in cpu and "for env in prange(num_envs):" in cpu
    assert "        e = int64(env)" in cpu
    assert all(f"phase{p}(" in cpu for p in range(len(env.kernel.phases)))
    cuda = env.kernel_source("cuda")
    assert "def foraging_cuda(num_envs, num_agents, lanes," in cuda and "cuda.syncthreads()" in cuda
    compile(cpu, "<cpu source>", "exec"), compile(cuda, "<cuda source>", "exec")  # both are whole Python
    with pytest.raises(ValueError, match="target must be one of"):
        env.kernel_source("tpu")


def test_an_env_with_a_cuda_c_twin_still_shows_its_generated_source():
    from gpurl import make

    env = make("tag_gridworld", num_envs=2, device="cpu")  # its kernel_source= argument picks a language
    assert env.kernel_language == "numba" and "def tag_gridworld_cpu(" in env.kernel_source("cpu")
