"""Sim tier: the CUDA build's first launches are bounds-checked like the CPU build's (gpurl/kernels/bounds.py):
the same mistakes of tests/kernel_bounds_cases.py raise the same KernelIndexError, naming the CUDA build,
before the kernel runs in Numba's CUDA simulator (on a GPU: before it writes device memory). Tiny sizes:
the simulator runs about a thousand agent-steps per second."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
import torch

from gpurl.kernels import EnvKernel, KernelIndexError, lane, num_lanes, per_agent, per_env

import kernel_bounds_cases as kb

pytestmark = pytest.mark.sim

FILE = 'kernel_bounds_cases.py", line'


@pytest.mark.parametrize("phase, make, mark", [(kb.observe_row, per_agent, "obs-view"),
                                               (kb.pass_right, per_agent, "next-agent"),
                                               (kb.count_at_size, per_env, "at-size")])
def test_the_cuda_build_reports_what_the_cpu_build_reports(phase, make, mark):
    messages = []
    for target in ("cpu", "cuda"):
        kernel = EnvKernel(f"sim_bounds_{phase.__name__}", [make(phase)], nargs=1)
        arrays = kb.declared_arrays(num_envs=2, num_agents=2)
        before = {k: v.copy() for k, v in arrays._asdict().items()}
        with pytest.raises(KernelIndexError) as info:
            kernel.launch(target, 2, 2, arrays)
        messages.append(str(info.value))
        for name, value in before.items():
            np.testing.assert_array_equal(getattr(arrays, name), value)
    cpu, cuda = messages
    assert cuda.startswith(f"kernel 'sim_bounds_{phase.__name__}' (cuda build): IndexError in env 0")
    assert f'{FILE} {kb.line_of(mark)}, in {phase.__name__}' in cuda
    assert cuda == cpu.replace("(cpu build)", "(cuda build)")


@pytest.mark.parametrize("mistake", ["obs_short", "trail_short"])
def test_an_env_of_the_cuda_build_with_a_short_declaration(mistake):
    env = kb.Boxes(num_envs=2, device="cpu", target="cuda", seed=1, **{mistake: 1})
    mark, function, kind, launch = kb.BOXES_MISTAKES[mistake]
    actions = torch.ones((2, env.num_agents, 1), dtype=torch.int64)
    if launch == "step":
        env.reset()
    trail = env.state.trail.clone()
    with pytest.raises(KernelIndexError) as info:
        env.reset() if launch == "reset" else env.step(actions)
    message = str(info.value)
    size = kb.declared_size({mistake: 1}, mistake)
    assert message.startswith("kernel 'bounds_boxes' (cuda build): IndexError in env 0")
    assert f", {function} ({kind}):" in message and f'{FILE} {kb.line_of(mark)}, in {function}' in message
    assert f"index {size} on its axis" in message and f"whose declared size is {size}" in message
    assert torch.equal(env.state.trail, trail)


def test_an_env_of_the_cuda_build_that_fits_runs():
    env = kb.Boxes(num_envs=1, device="cpu", target="cuda", seed=1, obs_short=-1)
    env.reset()
    env.step(torch.zeros((1, env.num_agents, 1), dtype=torch.int64))
    p = env.params
    assert torch.equal(env.obs[..., :p.width], torch.arange(p.width, dtype=torch.float32).expand(1, 2, -1) + 1)
    assert not env.obs[..., p.width:].any()


class LaneArrays(NamedTuple):
    scratch: np.ndarray  # float32 [lanes, 1]
    out: np.ndarray      # float32 [E, N]


def through_lane(e, i, s):
    row = lane(e, i, s.out.shape[1])
    s.scratch[row, 0] = np.float32(i)
    s.out[e, i] = s.scratch[row, 0]


@pytest.mark.parametrize("lanes_of", ["cuda", "cpu"])
def test_the_cuda_builds_check_runs_helpers_as_the_cuda_build_does(lanes_of):
    """The check runs each helper's CUDA implementation over the CUDA build's arrays: ``lane`` is
    ``e * N + i`` there (``e`` on the CPU), so per-lane scratch sized for the CUDA build passes and scratch
    sized for the CPU build (one row per env) is an index past its declared size."""
    E, N = 2, 3
    arrays = LaneArrays(np.zeros((num_lanes(lanes_of, E, N), 1), np.float32), np.zeros((E, N), np.float32))
    kernel = EnvKernel(f"sim_bounds_lane_{lanes_of}", [per_agent(through_lane)], nargs=1)
    if lanes_of == "cuda":
        kernel.launch("cuda", E, N, arrays)
        np.testing.assert_array_equal(arrays.out, np.tile(np.arange(N, dtype=np.float32), (E, 1)))
        return
    with pytest.raises(KernelIndexError) as info:
        kernel.launch("cuda", E, N, arrays)
    assert f"index {E} is out of bounds for axis 0 with size {E}" in str(info.value)
    assert not arrays.out.any()
