"""Compile tier: the example env's kernel (examples/custom_env.py) compiles to sm_90 PTX with no float64
and assembles with ptxas.

The kernel is typed with the exact arguments a tiny CPU env launches it with (recorded by wrapping
``EnvKernel.launch``, nothing runs): only dtypes, ranks and layouts matter. Reset launches pass int64
placeholder actions, so they share the int64 step build; int32 step actions reach the kernel widened to
int64 by the env: one build.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import gpurl
from gpurl.kernels import KernelTypingError
from gpurl.kernels.aot import assemble_sm90, compile_ptx_sm90, float64_instructions, kernel_signature
from gpurl.kernels.program import EnvKernel

from custom_env_harness import custom_env

pytestmark = pytest.mark.compile

def launch_args(action_dtype: torch.dtype) -> dict[str, tuple]:
    """{"reset"/"step": args after (target, E, N)} of a tiny CPU env's reset() and step(), not run."""
    env = gpurl.make("foraging", num_envs=2, device="cpu", seed=1, num_agents=3)
    recorded = {}

    def record(kernel, target, num_envs, num_agents, *args, stream=None, constants=()):
        assert kernel is custom_env.Foraging.class_kernel()
        recorded["step" if "reset" in recorded else "reset"] = args

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(EnvKernel, "launch", record)
        env.reset()
        env.step(torch.zeros(env.num_envs, env.num_agents, dtype=action_dtype))
    return recorded


def test_reset_and_step_of_either_action_dtype_type_to_one_build():
    int64, int32 = launch_args(torch.int64), launch_args(torch.int32)
    assert len({kernel_signature(args[name]) for args in (int64, int32) for name in ("reset", "step")}) == 1
    assert int64["reset"][1].launch == 1 and int64["step"][1].launch == 0  # lifecycle.RESET / STEP


def test_foraging_kernel_compiles_for_sm90_without_float64(ptxas):
    ptx = compile_ptx_sm90(custom_env.Foraging.class_kernel(), launch_args(torch.int64)["step"])
    assert ".target sm_90" in ptx
    assert float64_instructions(ptx) == []
    assert assemble_sm90(ptx, ptxas)[:4] == b"\x7fELF"


def test_float64_constant_is_caught():
    # The check has teeth on this kernel: a Python float (typed float64) promotes the obs division.
    arrays, consts, actions = launch_args(torch.int64)["step"]
    ptx = compile_ptx_sm90(custom_env.Foraging.class_kernel(), (arrays, consts._replace(size_f32=8.0), actions))
    assert any("f64" in line for line in float64_instructions(ptx))


def test_cuda_typing_error_names_the_authors_phase_and_line():
    # A wrong rank: numba-cuda's own message has no location; gpurl's names the example's line.
    arrays, consts, actions = launch_args(torch.int64)["step"]
    with pytest.raises(KernelTypingError) as info:
        compile_ptx_sm90(custom_env.Foraging.class_kernel(), (arrays._replace(hit=np.zeros(2, np.uint8)), consts, actions))
    message = str(info.value)
    assert "(cuda build)" in message and "move" in message
    assert 'custom_env.py", line' in message and "s.hit is uint8 ndarray of shape [2] (1-d)" in message
