"""A custom env's kernel errors point at the env author's code, not at gpurl's generated kernels.

- Numba typing errors (a wrong rank, a missing field, an error inside a helper, a torch tensor where a
  kernel view belongs) become ``KernelTypingError``s naming the phase, the author's file, line and
  function, and the arrays used on that line with their shapes;
- an out-of-bounds index becomes a ``KernelIndexError`` at the author's line, found by the plain-Python check
  of a build's first launches (gpurl/kernels/bounds.py) or, in the compiled CPU build under
  ``NUMBA_BOUNDSCHECK=1``, by re-running the failed launch as plain Python;
- an out-of-bounds index in the NumPy reference is NumPy's IndexError raised in the reference itself.

Typing errors cost no compilation; the first-launch check stops a bad index before anything compiles.
"""
import importlib.util
import traceback
from pathlib import Path

import numpy as np
import pytest
import torch

from gpurl.envs import field
from gpurl.kernels import EnvKernel, KernelIndexError, KernelTypingError, per_agent, per_env

from custom_env_harness import custom_env, make_small, reset_ref, step_ref

pytestmark = pytest.mark.cpu

AUTHOR_MODULE = '''
from typing import NamedTuple

import numpy as np

from gpurl.kernels import device


class Arrays(NamedTuple):
    x: np.ndarray       # int32 [E, N]
    score: np.ndarray   # int32 [E]


@device
def score_of(e, i, s):
    return s.score[e, i]            # wrong: score is [E]


def walk(e, i, s):
    s.x[e, i] += 1


def wrong_rank(e, i, s):
    s.x[e, i] = s.score[e, i]       # wrong: score is [E]


def via_helper(e, i, s):
    s.x[e, i] = score_of(e, i, s)


def missing_field(e, s):
    s.score[e] = s.points[e]        # wrong: no field "points"


def past_the_end(e, s):
    for j in range(s.x.shape[1] + 1):   # wrong: one past the last agent
        s.score[e] += s.x[e, j]
'''


def line_of(snippet: str) -> int:
    """Line number of ``snippet`` in the author's file."""
    return next(n for n, line in enumerate(AUTHOR_MODULE.splitlines(), 1) if snippet in line)


@pytest.fixture(scope="module")
def author(tmp_path_factory):
    """A user's env module in a file of its own (my_author_env.py)."""
    path = tmp_path_factory.mktemp("user") / "my_author_env.py"
    path.write_text(AUTHOR_MODULE)
    spec = importlib.util.spec_from_file_location("my_author_env", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def arrays(author, score_shape=(2,)):
    return author.Arrays(x=np.zeros((2, 3), np.int32), score=np.zeros(score_shape, np.int32))


def launch_error(kernel, *args, error=KernelTypingError) -> str:
    with pytest.raises(error) as info:
        kernel.launch("cpu", 2, 3, *args)
    return str(info.value)


def test_wrong_rank_names_the_phase_file_line_and_array_shapes(author):
    kernel = EnvKernel("author_step", [per_agent(author.walk), per_agent(author.wrong_rank)], nargs=1)
    message = launch_error(kernel, arrays(author))
    assert "phase 1 of 2, wrong_rank (per agent)" in message
    assert f'my_author_env.py", line {line_of("s.x[e, i] = s.score[e, i]")}, in wrong_rank' in message
    assert "s.x[e, i] = s.score[e, i]" in message
    assert "cannot index array(int32, 1d, C) with 2 indices" in message
    assert "s.score is int32 ndarray of shape [2] (1-d)" in message
    assert "<gpurl" not in message and "_cpu_p" not in message  # nothing of the generated kernel


def test_error_in_a_helper_names_the_helper_and_its_phase(author):
    kernel = EnvKernel("author_helper", [per_agent(author.via_helper)], nargs=1)
    message = launch_error(kernel, arrays(author))
    assert "phase 0 of 1, via_helper (per agent), in its helper score_of" in message
    assert f'my_author_env.py", line {line_of("return s.score[e, i]")}, in score_of' in message


def test_missing_field_lists_the_fields(author):
    kernel = EnvKernel("author_field", [per_env(author.missing_field)], nargs=1)
    message = launch_error(kernel, arrays(author))
    assert f'my_author_env.py", line {line_of("s.points[e]")}, in missing_field' in message
    assert "s (Arrays) has no field 'points'; its fields: x, score" in message


def test_a_torch_tensor_instead_of_a_kernel_view_is_named(author):
    kernel = EnvKernel("author_walk", [per_agent(author.walk)], nargs=1)
    message = launch_error(kernel, arrays(author)._replace(x=torch.zeros(2, 3, dtype=torch.int32)))
    assert "argument 0 (Arrays).x is a torch.Tensor" in message and "kernel_view" in message


def test_run_python_raises_at_the_authors_line(author):
    kernel = EnvKernel("author_sum", [per_env(author.past_the_end)], nargs=1)
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 1 with size 3") as info:
        kernel.run_python(2, 3, arrays(author))
    assert info.value.gpurl_phase == (0, 0, None)
    last = traceback.extract_tb(info.value.__traceback__)[-1]
    assert last.filename.endswith("my_author_env.py") and last.name == "past_the_end"


def test_run_python_runs_what_the_cpu_build_runs():
    # The debugging path is faithful: on the example env it writes exactly what the compiled build writes.
    env = make_small(num_envs=3, num_agents=4, episode_length=3)
    env.reset()
    gen = torch.Generator().manual_seed(4)
    for t in range(5):  # crosses autoresets
        actions = env._view(torch.randint(0, 5, (3, 4, 1), generator=gen))
        plain = env._arrays._replace(**{k: v.copy() for k, v in env._arrays._asdict().items()})
        env.kernel.run_python(3, 4, plain, env._consts, actions)
        env.kernel.launch("cpu", 3, 4, env._arrays, env._consts, actions)
        for name, compiled in env._arrays._asdict().items():
            np.testing.assert_array_equal(getattr(plain, name), compiled, err_msg=f"step {t}: {name}")


def test_the_example_env_with_a_wrong_array_shape(author):
    # The env author declared `hit` as [E] instead of [E, F]: the first launch (reset) says where.
    class BrokenForaging(custom_env.Foraging):
        name = "broken_foraging"
        scratch = {"hit": field("uint8")}

    env = BrokenForaging(num_envs=2, device="cpu", seed=0)
    with pytest.raises(KernelTypingError) as info:
        env.reset()
    message = str(info.value)
    assert "kernel 'broken_foraging' (cpu build) does not compile, phase 0 of 11, move (per agent)" in message
    assert 'custom_env.py", line' in message and "s.hit is uint8 ndarray of shape [2] (1-d)" in message
    # The traceback is the caller's line and env.reset's: none of the launch machinery's frames.
    frames = traceback.extract_tb(info.value.__traceback__)
    assert [(Path(f.filename).name, f.name) for f in frames] == [
        ("test_custom_env_errors.py", "test_the_example_env_with_a_wrong_array_shape"), ("base.py", "reset")]


def test_gpurl_debug_keeps_the_launch_machinerys_frames(author, monkeypatch):
    class BrokenForaging(custom_env.Foraging):
        name = "broken_foraging_debugged"
        scratch = {"hit": field("uint8")}

    monkeypatch.setenv("GPURL_DEBUG", "1")
    env = BrokenForaging(num_envs=2, device="cpu", seed=0)
    with pytest.raises(KernelTypingError) as info:
        env.reset()
    files = {Path(f.filename).name for f in traceback.extract_tb(info.value.__traceback__)}
    assert {"base.py", "program.py"} <= files


def test_out_of_bounds_in_the_cpu_build_under_boundscheck(monkeypatch):
    # `hit` with room for one food item of three: the compiled build checks bounds when Numba's
    # NUMBA_BOUNDSCHECK=1 (here: its config value, read when a kernel compiles), and gpurl finds the line.
    import numba

    monkeypatch.setattr(numba.config, "BOUNDSCHECK", 1)
    env = make_small(num_envs=2, num_agents=3, num_food=3)
    env.reset()
    kernel = EnvKernel("foraging_bounds", list(env.kernel.phases), nargs=3)  # a fresh build
    short = env._arrays._replace(hit=np.zeros((2, 1), np.uint8))
    message = launch_error(kernel, short, env._consts, np.zeros((2, 3, 1), np.int64), error=KernelIndexError)
    assert "kernel 'foraging_bounds' (cpu build): IndexError in env 0" in message
    assert 'custom_env.py", line' in message and ("collect" in message or "move" in message)
    assert "s.hit is uint8 ndarray of shape [2, 1] (2-d)" in message


def test_out_of_bounds_in_a_direct_launch_gets_the_same_diagnosis(monkeypatch):
    # DirectLaunch calls the compiled overload itself after the first launch of a key; an array of the same
    # type but too short then fails inside that call, and the error still names the author's line.
    import numba

    monkeypatch.setattr(numba.config, "BOUNDSCHECK", 1)
    env = make_small(num_envs=2, num_agents=3, num_food=3)
    env.reset()
    launcher = EnvKernel("foraging_direct", list(env.kernel.phases), nargs=3).direct_launch()
    actions = np.zeros((2, 3, 1), np.int64)
    launcher("k", 2, 3, env._arrays, env._consts, actions)
    assert "k" in launcher._entries
    short = env._arrays._replace(hit=np.zeros((2, 1), np.uint8))
    with pytest.raises(KernelIndexError) as info:
        launcher("k", 2, 3, short, env._consts, actions)
    assert "kernel 'foraging_direct' (cpu build): IndexError in env 0" in str(info.value)
    assert "s.hit is uint8 ndarray of shape [2, 1] (2-d)" in str(info.value)


def test_out_of_bounds_in_the_reference_is_raised_in_the_reference():
    env = make_small(num_envs=2)
    state = reset_ref(env.params, 2, 0, np.zeros(2, np.int32))
    actions = np.full((2, env.num_agents), 7)  # no action 7: MOVES[7] is out of bounds
    with pytest.raises(IndexError, match="index 7 is out of bounds") as info:
        step_ref(env.params, state, actions, seed=0)
    last = traceback.extract_tb(info.value.__traceback__)[-1]
    assert last.filename.endswith("custom_env_reference.py") and last.name == "step_ref"
