"""Test tiers (see DESIGN.md "Test tiers"; run them all with ``python tests/run_tiers.py``).

Every test carries exactly one tier marker: ``cpu``, ``sim``, ``compile`` or ``gpu`` (usually as a
module-level ``pytestmark``). A test with none, or with two, stops the run at collection, so nothing
silently runs in no tier or twice.

The simulator switches (``NUMBA_ENABLE_CUDASIM``, ``TRITON_INTERPRET``) are read once when Numba and
Triton are imported, so a process is either a simulator process or not:

- ``sim`` tests run only when both are "1" (the runner's sim tier sets them for its process);
- ``cpu``, ``compile`` and ``gpu`` tests run only when neither is set (under the simulator
  ``numba.cuda`` is fake and Triton kernels are interpreted);
- ``gpu`` tests also skip when torch sees no CUDA device.
"""
from __future__ import annotations

import os

import pytest

TIERS = ("cpu", "sim", "compile", "gpu")
#: The longest test files of the cpu tier (minutes each on two vCPUs: training runs, several compiles), collected
#: first. With pytest-xdist's ``--no-loadscope-reorder`` (the runner's default) the workers take files in
#: collection order, so these start at once, longest first, instead of leaving one worker alone on them at the
#: end of the run.
LONG_FILES = ("test_train_ppo.py", "test_ippo_learning.py", "test_custom_env_tutorial.py",
              "test_acting.py", "test_mpe_core_builds.py", "test_algo_dist_matrix.py", "test_unvalidated_inputs.py",
              "test_multigpu.py", "test_simple_tag_api.py")
#: Files collected last: their time is the compiles of builds that other files make too. The property search
#: (tests/property_inputs.py) makes every built-in env's CPU build, which costs about a minute each on a cold
#: cache (12 to 15 minutes in all on a fresh clone) and under a second once the other files have put them in
#: the on-disk build cache; its own cases take well under a minute.
LAST_FILES = ("test_property_inputs.py",)


def simulator_process() -> bool:
    return os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" and os.environ.get("TRITON_INTERPRET") == "1"


def simulator_switch_set() -> bool:
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") == "1" or os.environ.get("TRITON_INTERPRET", "0") == "1"


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def pytest_addoption(parser):
    parser.addoption("--property-examples", type=int, default=None,
                     help="tests/test_property_inputs.py: action cases drawn per env and validation mode "
                          "(default: the CI's bounded count)")


def pytest_configure(config):
    import torch

    from gpurl.train.process import allow_many_compiled_shapes

    # Two vCPUs: torch's own threads fight Numba's and make small ops several times slower.
    torch.set_num_threads(1)
    # One process compiles the fast paths for every test's policy shapes (an entry point's setting).
    allow_many_compiled_shapes()


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Every test starts with one torch thread: a test that runs an entry point applies the thread policy
    (gpurl.train.threads), which may leave two, and torch's reductions then sum in another order (a
    learning check's margin moved from 1.9x to 1.4x that way)."""
    import torch

    torch.set_num_threads(1)
    yield


@pytest.hookimpl(tryfirst=True)  # before -m deselects: a tierless test errors in every tier's run
def pytest_collection_modifyitems(config, items):
    wrong = []
    for item in items:
        tiers = [t for t in TIERS if item.get_closest_marker(t) is not None]
        if len(tiers) != 1:
            wrong.append(f"  {item.nodeid}: {tiers or 'no tier marker'}")
    if wrong:
        raise pytest.UsageError(
            f"every test needs exactly one tier marker of {', '.join(TIERS)} "
            "(e.g. `pytestmark = pytest.mark.cpu`):\n" + "\n".join(wrong)
        )

    rank = {name: k for k, name in enumerate(LONG_FILES)}
    rank.update({name: len(LONG_FILES) + 1 + k for k, name in enumerate(LAST_FILES)})
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FILES)))  # stable: the rest keep their order

    sim_only = pytest.mark.skip(
        reason="sim tier: needs NUMBA_ENABLE_CUDASIM=1 and TRITON_INTERPRET=1 set before import "
        "(python tests/run_tiers.py --tiers sim)"
    )
    not_in_sim = pytest.mark.skip(
        reason="not a sim-tier test: runs without NUMBA_ENABLE_CUDASIM / TRITON_INTERPRET"
    )
    no_cuda = pytest.mark.skip(reason="gpu tier: no CUDA device (torch.cuda.is_available() is False)")
    in_sim, switch_set = simulator_process(), simulator_switch_set()
    has_cuda = None
    for item in items:
        if item.get_closest_marker("sim") is not None:
            if not in_sim:
                item.add_marker(sim_only)
        elif switch_set:
            item.add_marker(not_in_sim)
        elif item.get_closest_marker("gpu") is not None:
            if has_cuda is None:
                has_cuda = cuda_available()
            if not has_cuda:
                item.add_marker(no_cuda)


@pytest.fixture
def requires_cuda():
    """The CUDA torch device; skips the test when there is none (gpu tier)."""
    if simulator_switch_set() or not cuda_available():
        pytest.skip("gpu tier: no CUDA device (torch.cuda.is_available() is False)")
    import torch

    return torch.device("cuda", torch.cuda.current_device())


def _tool_or_skip(find_name: str, what: str):
    """The path :func:`gpurl.kernels.aot.<find_name>` finds; skips the test when there is none."""
    from gpurl.kernels import aot

    path = getattr(aot, find_name)()
    if path is None:
        pytest.skip(f"compile tier: {what}")
    return path


@pytest.fixture(scope="session")
def ptxas():
    """Path of the CUDA toolkit's ptxas; skips the test when none can be found (compile tier)."""
    return _tool_or_skip("find_ptxas", "no ptxas (no CUDA toolkit beside nvcc, on PATH, in CUDA_HOME or the "
                                       "venv's nvidia packages; set GPURL_PTXAS to point at one)")


@pytest.fixture(scope="session")
def cuobjdump():
    """Path of a cuobjdump (the toolkit's or Triton's bundled one); skips the test when there is none."""
    return _tool_or_skip("find_cuobjdump", "no cuobjdump (none beside ptxas, on PATH, in CUDA_HOME or in "
                                           "triton; set GPURL_CUOBJDUMP to point at one)")
