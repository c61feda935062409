"""The thread policy (gpurl/train/threads.py), in processes set up as the entry point sets itself up
(thread settings are process-wide): one pool size for torch and Numba that survives Numba's start,
the size following the CPUs busy processes leave free, the GPURL_THREADS override, and a bad value
refused with the variable's name."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpurl.train.threads import ENV_VAR, max_threads, pool_sizes, read_policy

pytestmark = pytest.mark.cpu

REPO = Path(__file__).resolve().parent.parent

# Two CPUs at most (the policy reads the affinity mask), then configure_process as launch.run calls it,
# a Numba parallel kernel (its threading layer starting must not resize torch's pool), and under auto
# two busy loops on those CPUs before the run loop's adapt_threads.
CHILD = r"""
import json, os, subprocess, sys, time
os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2])
import numba, numpy as np, torch
from gpurl.train.process import configure_process
from gpurl.train.threads import adapt_threads, describe

@numba.njit(parallel=True)
def fill(a):
    for i in numba.prange(a.shape[0]):
        a[i] = i

out = {"cpus": len(os.sched_getaffinity(0))}
report = configure_process(int(sys.argv[1]), torch.device("cpu"))
out["report"], out["line"] = report, describe(report)
fill(np.zeros(64))
out["after_kernel"] = {"torch": torch.get_num_threads(), "numba": numba.get_num_threads(),
                       "layer": numba.threading_layer()}
if os.environ.get("GPURL_THREADS") == "auto":
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(out["cpus"])]
    try:
        time.sleep(0.8)
        out["adapted"] = adapt_threads()
        out["after_load"] = {"torch": torch.get_num_threads(), "numba": numba.get_num_threads()}
    finally:
        for p in loops:
            p.kill()
print("OUT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def children() -> dict[str, dict]:
    """GPURL_THREADS value (and --torch-threads) -> what its process reported; all run side by side."""
    cases = {"auto": ("auto", 0), "1": ("1", 0), "auto --torch-threads 1": ("auto", 1), "off": ("off", 0)}
    procs = {}
    for name, (setting, torch_threads) in cases.items():
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "NUMBA_THREADING", "NUMBA_NUM"))}
        procs[name] = subprocess.Popen([sys.executable, "-c", CHILD, str(torch_threads)], cwd=REPO, text=True,
                                       env={**env, ENV_VAR: setting}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    results = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"{name}: {stderr[-2000:]}"
        results[name] = json.loads(next(line for line in stdout.splitlines() if line.startswith("OUT "))[4:])
    return results


def test_auto_sizes_torch_and_numba_alike_to_the_cpus_and_numbas_start_keeps_it(children):
    got = children["auto"]
    assert got["report"]["torch_threads"] == got["report"]["numba_threads"] == got["cpus"]
    assert got["after_kernel"]["torch"] == got["after_kernel"]["numba"] == got["cpus"]
    if sys.platform.startswith("linux"):  # Numba's omp layer binds to the OpenMP runtime torch loaded
        assert got["after_kernel"]["layer"] == "omp"
    assert "GPURL_THREADS=auto (threads follow the free CPUs" in got["line"]


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="the free CPUs are read from /proc/stat")
def test_auto_shrinks_both_pools_beside_busy_processes(children):
    got = children["auto"]
    assert got["adapted"] == 1, got  # as many busy loops as CPUs: one thread left, at least
    assert got["after_load"] == {"torch": 1, "numba": 1}


@pytest.mark.parametrize("case", ["1", "auto --torch-threads 1"])
def test_a_fixed_size_holds_for_both_pools_through_numbas_start(children, case):
    got = children[case]
    assert got["report"]["torch_threads"] == got["report"]["numba_threads"] == 1
    assert got["after_kernel"]["torch"] == got["after_kernel"]["numba"] == 1
    assert "follow the free CPUs" not in got["line"]


def test_off_leaves_torch_and_numba_as_they_start(children):
    got = children["off"]
    assert got["report"]["thread_policy"] == "GPURL_THREADS=off"
    assert got["report"]["numba_threading_layer"] == "not started"  # nothing started before the env's kernels


def test_an_adaptive_pool_takes_few_sizes():  # each size compiles its own graphs (Dynamo guards on it)
    assert pool_sizes(2) == [2, 1] and pool_sizes(1) == [1] and pool_sizes(16) == [16, 8, 1]


@pytest.mark.parametrize("value", ["0", "many", "-2", "1.5", "100000"])
def test_a_bad_value_is_refused_naming_the_variable(value, monkeypatch, capsys):
    # 100000 threads passed as a number and crashed OpenMP (SIGSEGV): counts are bounded by the machine's CPUs.
    with pytest.raises(ValueError, match=f"{ENV_VAR} must be 'auto', 'off' or a number of threads in 1..{max_threads()} "
                                         f"\\(this machine's CPUs\\), got '{value}'"):
        read_policy(environ={ENV_VAR: value})
    from gpurl.train.cli import config_from_args

    monkeypatch.setenv(ENV_VAR, value)
    with pytest.raises(SystemExit) as exit_info:
        config_from_args(["--preset", "tag-small"])
    assert exit_info.value.code == 2
    assert f"{ENV_VAR} must be" in capsys.readouterr().err


def test_torch_threads_beyond_the_machines_cpus_is_a_usage_error(monkeypatch, capsys):
    from gpurl.train.cli import config_from_args

    monkeypatch.delenv(ENV_VAR, raising=False)
    too_many = max_threads() + 1
    with pytest.raises(SystemExit) as exit_info:
        config_from_args(["--preset", "tag-small", "--torch-threads", str(too_many)])
    assert exit_info.value.code == 2
    assert f"--torch-threads {too_many}: this machine has {max_threads()} CPUs" in capsys.readouterr().err
    assert read_policy(max_threads(), environ={}).threads == max_threads()  # the bound itself is allowed


LIBRARY_CHILD = """
import json, numba, torch
torch.set_num_threads(1)
import gpurl
env = gpurl.make("simple_spread", num_envs=4, device="cpu")
env.reset()
print(json.dumps({"torch": torch.get_num_threads(), "numba": numba.get_num_threads()}))
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: every count is 1 whatever happens")
def test_a_library_user_keeps_torchs_thread_count_through_the_first_env_step():
    # Numba's layer, started by the first parallel env kernel, sets OpenMP's count to all CPUs; gpurl's CPU
    # build gives torch its count back and Numba no more (gpurl/kernels/cpu_threads.py).
    out = subprocess.run([sys.executable, "-c", LIBRARY_CHILD], cwd=REPO, text=True, capture_output=True,
                         env={k: v for k, v in os.environ.items() if k != ENV_VAR}, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"torch": 1, "numba": 1}
