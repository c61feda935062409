"""Author mistakes cannot write out of bounds (issue 40): the first launches of every build run as plain
Python on copies of their arrays (gpurl/kernels/bounds.py), and an index past a declared size raises
KernelIndexError before the compiled launch writes anything, naming the phase, the function, file and
line, the index and the declared size.

The mistakes live in tests/kernel_bounds_cases.py. A mistake raises before anything compiles; the env
(Boxes) compiles once for every drawn declaration (sizes are not part of a build), two tiny kernels once each.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, seed, settings
from hypothesis import strategies as st

import gymnasium

import gpurl
from gpurl.kernels import EnvKernel, KernelIndexError, bounds, per_agent, per_env

import kernel_bounds_cases as kb
from custom_env_harness import custom_env

pytestmark = pytest.mark.cpu

FILE = 'kernel_bounds_cases.py", line'


def copies(arrays):
    return {k: v.copy() for k, v in arrays._asdict().items()}


def assert_unchanged(arrays, before):
    for name, value in before.items():
        np.testing.assert_array_equal(getattr(arrays, name), value, err_msg=f"{name} was written")


# ---- hand-made mistakes in raw kernels ----------------------------------------------------------------


RAW = [
    # phase, how it is made, marked line, env, agent, what the message says of the index and the array
    (kb.observe, per_agent, "obs-row", 0, 0,
     "s.obs is float32 ndarray of shape [2, 3, 2] (3-d): index 2 on its axis 2, whose declared size is 2"),
    (kb.observe_row, per_agent, "obs-view", 0, 0,
     "row is a view of s.obs, which is float32 ndarray of shape [2, 3, 2] (3-d): index 2 on its axis 2, whose "
     "declared size is 2"),
    (kb.pass_right, per_agent, "next-agent", 0, 2,
     "s.x is int32 ndarray of shape [2, 3] (2-d): index 3 on its axis 1, whose declared size is 3"),
    (kb.count_at_size, per_env, "at-size", 0, None,
     "s.counts is int32 ndarray of shape [2, 4] (2-d): index 4 on its axis 1, whose declared size is 4"),
]


def raw_message(phase, make, target="cpu") -> tuple[str, EnvKernel, kb.Arrays, dict]:
    kernel = EnvKernel(f"bounds_{phase.__name__}", [per_agent(kb.within), make(phase)], nargs=1)
    arrays = kb.declared_arrays()
    before = copies(arrays)
    with pytest.raises(KernelIndexError) as info:
        kernel.launch(target, 2, 3, arrays)
    return str(info.value), kernel, arrays, before


@pytest.mark.parametrize("phase, make, mark, env, agent, says", RAW, ids=[r[2] for r in RAW])
def test_a_write_past_a_declared_size_raises_before_anything_is_written(phase, make, mark, env, agent, says):
    message, kernel, arrays, before = raw_message(phase, make)
    kind = "per agent" if make is per_agent else "per env"
    where = f", agent {agent}" if agent is not None else ""
    assert message.startswith(f"kernel 'bounds_{phase.__name__}' (cpu build): IndexError in env {env}{where}, "
                              f"phase 1 of 2, {phase.__name__} ({kind}):")
    assert f'{FILE} {kb.line_of(mark)}, in {phase.__name__}' in message
    assert "is out of bounds for axis" in message
    assert says in message
    assert "found before the compiled launch ran" in message
    assert_unchanged(arrays, before)  # not even phase 0, which is right, wrote
    assert not kernel.build("cpu").overloads  # found without compiling


def test_declarations_that_fit_are_not_reported():
    arrays = kb.declared_arrays(obs_dim=kb.OBS_WRITTEN)
    kernel = EnvKernel("bounds_fits", [per_agent(kb.observe)], nargs=1)
    kernel.bounds("cpu", (), 2, 3, (arrays,))  # the check alone: nothing to report, nothing written
    assert not arrays.obs.any()


# ---- the example env, its obs declared two features too small (the case) ---------------------


class ShortObs(custom_env.Foraging):
    name = "foraging_short_obs"

    def groups(self):
        p = self.params
        return {"forager": gpurl.Group(slice(0, p.num_agents), 2 * p.num_food, gymnasium.spaces.Discrete(5))}


def test_the_example_env_with_its_obs_two_too_small_fails_at_reset():
    env = ShortObs(num_envs=3, device="cpu", num_agents=2, num_food=2)
    for _ in range(2):  # not settled by a failure: every launch says it again
        with pytest.raises(KernelIndexError) as info:
            env.reset()
    message = str(info.value)
    line = next(n for n, text in enumerate(open(custom_env.__file__), 1) if "row[2 * num_food] =" in text)
    assert "kernel 'foraging_short_obs' (cpu build): IndexError in env 0, agent 0, phase 8 of 11, observe (per agent)" \
        in message
    assert f'custom_env.py", line {line}, in observe' in message
    assert "index 4 is out of bounds for axis 0 with size 4" in message
    assert ("row is a view of s.obs, which is float32 ndarray of shape [3, 2, 4] (3-d): index 4 on its axis 2, "
            "whose declared size is 4") in message
    assert not env.obs.any() and not env.global_state.any()


# ---- an env whose declarations are drawn ----------------------------------------------------------------


def check_boxes(num_envs: int, params: dict) -> None:
    """Make, reset and step Boxes: it raises at the first mistake's launch, naming it, with nothing written,
    or runs and writes what its phases say."""
    env = kb.Boxes(num_envs=num_envs, device="cpu", seed=1, **params)
    mistake = kb.first_mistake(params)
    actions = torch.ones((num_envs, env.num_agents, 1), dtype=torch.int64)
    launches = [env.reset] + [lambda: env.step(actions)] * 2
    for k, launch in enumerate(launches):
        state = {name: getattr(env.state, name).clone() for name in ("mark", "stock", "trail", "t")}
        obs = env.obs.clone()
        if mistake is not None and kb.BOXES_MISTAKES[mistake][3] == ("reset" if k == 0 else "step"):
            mark, function, kind, _ = kb.BOXES_MISTAKES[mistake]
            with pytest.raises(KernelIndexError) as info:
                launch()
            message, size = str(info.value), kb.declared_size(params, mistake)
            assert f"kernel 'bounds_boxes' (cpu build): IndexError in env 0" in message
            assert f", {function} ({kind}):" in message
            assert f'{FILE} {kb.line_of(mark)}, in {function}' in message
            assert f"index {size} is out of bounds for axis" in message
            assert f"index {size} on its axis" in message and f"whose declared size is {size}" in message
            for name, before in state.items():
                assert torch.equal(getattr(env.state, name), before), name
            assert torch.equal(env.obs, obs)
            return
        launch()
    p = env.params
    written = env.obs[..., :p.width]
    t = env.state.t[:, None, None].float()
    assert torch.equal(written, (torch.arange(p.width, dtype=torch.float32) + t).expand_as(written))
    assert not env.obs[..., p.width:].any()
    assert (env.state.trail[:, :p.items] == 2).all() and (env.state.stock[:, :p.items] > 0).all()


@pytest.mark.parametrize("mistake", list(kb.BOXES_MISTAKES))
def test_each_short_declaration_of_an_env_is_named(mistake):
    check_boxes(2, {mistake: 1})


@st.composite
def boxes_declarations(draw):
    agents, width, items = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    params = dict(num_agents=agents, width=width, items=items)
    for name, whole in (("mark_short", agents), ("stock_short", items), ("obs_short", width - 1),
                        ("trail_short", items)):
        params[name] = draw(st.integers(-1, min(2, whole)))  # up to two too small, or one too large
    return draw(st.integers(1, 3)), params


@seed(40)
@settings(max_examples=12, deadline=None, database=None)
@given(boxes_declarations())
def test_drawn_declarations_raise_exactly_when_too_small(drawn):
    num_envs, params = drawn
    check_boxes(num_envs, params)


# ---- what the check costs once settled, and what it leaves to NUMBA_BOUNDSCHECK ------------------------


def count_plain_runs(monkeypatch, kernel) -> list:
    runs = []
    original = kernel.run_python
    monkeypatch.setattr(kernel, "run_python", lambda *a, **k: runs.append(1) or original(*a, **k))
    return runs


def test_settled_shapes_are_not_checked_again_and_a_later_data_mistake_is_numba_boundschecks(monkeypatch, tmp_path):
    import numba

    monkeypatch.setenv("GPURL_CACHE_DIR", str(tmp_path))  # no record of an earlier run's check
    monkeypatch.setattr(numba.config, "BOUNDSCHECK", 1)  # read when the kernel compiles
    kernel = EnvKernel("bounds_gather", [per_agent(kb.gather)], nargs=1)
    runs = count_plain_runs(monkeypatch, kernel)
    arrays = kb.declared_arrays(counts=4)
    arrays.x[:] = 1
    for _ in range(3):
        kernel.launch("cpu", 2, 3, arrays)
    assert len(runs) == 1  # its one phase ran in the first checked launch: settled
    # An index from the data, after the checked launches: not the check's to see. (In env 0: Numba drops an
    # IndexError raised on another thread of the prange, and the launch ends early without a word.)
    arrays.x[0, 2] = 4
    with pytest.raises(KernelIndexError) as info:
        kernel.launch("cpu", 2, 3, arrays)
    message = str(info.value)
    assert "IndexError in env 0, agent 2, phase 0 of 1, gather (per agent)" in message
    assert f'{FILE} {kb.line_of("data-index")}, in gather' in message
    assert "s.counts is int32 ndarray of shape [2, 4] (2-d): index 4 on its axis 1, whose declared size is 4" in message
    assert "located by re-running the launch" in message


def test_a_settled_check_is_recorded_in_the_build_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("GPURL_CACHE_DIR", str(tmp_path))
    arrays = kb.declared_arrays()
    first = EnvKernel("bounds_recorded", [per_agent(kb.within)], nargs=1)
    first.launch("cpu", 2, 3, arrays)
    assert len(list((tmp_path / bounds.RECORDS).iterdir())) == 1
    again = EnvKernel("bounds_recorded", [per_agent(kb.within)], nargs=1)  # as in a new process
    runs = count_plain_runs(monkeypatch, again)
    again.launch("cpu", 2, 3, arrays)
    assert runs == []
    again.launch("cpu", 2, 4, kb.declared_arrays(num_agents=4))  # other shapes: checked
    assert runs == [1]

    monkeypatch.setenv("GPURL_CACHE_DIR", "off")
    off = EnvKernel("bounds_recorded", [per_agent(kb.within)], nargs=1)
    runs = count_plain_runs(monkeypatch, off)
    off.launch("cpu", 2, 3, arrays)
    assert runs == [1]


def test_only_author_kernels_are_checked(monkeypatch, tmp_path):
    """A built-in env's kernel (every phase gpurl's own) is not run as plain Python at its first launches;
    a kernel with one phase of the author's beside gpurl's lifecycle phases is."""
    # The built-in env's build from the usual cache: an empty one would compile it anew, and this process's
    # later makes of the env would keep that build's cache folder.
    builtin = gpurl.make("simple_spread", num_envs=2, device="cpu")
    assert not builtin.kernel.bounds.checks
    runs = count_plain_runs(monkeypatch, builtin.kernel)
    builtin.reset(seed=0)
    builtin.step(torch.zeros((2, builtin.num_agents, 1), dtype=torch.int64))
    assert runs == []

    monkeypatch.setenv("GPURL_CACHE_DIR", str(tmp_path))  # no record of an earlier run's check
    authored = kb.Boxes(num_envs=5, device="cpu", seed=1)  # shapes no other test of this process launched
    assert authored.kernel.bounds.checks and bounds.authored_outside_gpurl(authored.kernel)
    runs = count_plain_runs(monkeypatch, authored.kernel)
    authored.reset()
    assert runs == [1]
