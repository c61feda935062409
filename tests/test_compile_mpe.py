"""Compile tier: every MPE scenario's kernel compiles to sm_90 PTX with no float64 and assembles with ptxas.

The kernel (one per env class: step and reset) is typed with the exact arguments a tiny CPU env launches it
with (recorded by wrapping ``EnvKernel.launch``; nothing runs). Discrete and continuous actions are a
run-time constant: both branches compile in either action dtype, so the int64 signature covers a scenario's
code. ``ptxas -v``'s report is printed (``pytest -s``).
"""
from __future__ import annotations

import pytest
import torch

import gpurl
from gpurl.envs.mpe import SCENARIOS
from gpurl.kernels.aot import assemble_sm90, compile_ptx_sm90, float64_instructions
from gpurl.kernels.program import EnvKernel

pytestmark = pytest.mark.compile


def step_args(name: str) -> tuple[EnvKernel, tuple]:
    """(kernel, the arguments after (target, E, N) of a tiny CPU env's step)."""
    env = gpurl.make(name, num_envs=2, device="cpu", seed=1)
    recorded = []

    def record(kernel, target, num_envs, num_agents, *args, stream=None, constants=()):
        recorded.append(args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(EnvKernel, "launch", record)
        env.reset()
        env.step(torch.zeros((2, env.num_agents), dtype=torch.int64))
    return env.kernel, recorded[-1]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_compiles_for_sm90_without_float64(name, ptxas):
    kernel, args = step_args(name)
    ptx = compile_ptx_sm90(kernel, args)
    assert ".target sm_90" in ptx
    assert float64_instructions(ptx) == []
    assert assemble_sm90(ptx, ptxas)[:4] == b"\x7fELF"
