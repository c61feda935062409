"""Compile tier: tag_gridworld's kernel compiles to sm_90 PTX with no float64 and assembles with ptxas.

The kernel is typed with the exact arguments a tiny CPU env launches it with (recorded by wrapping
``EnvKernel.launch``, nothing runs): only dtypes, ranks and layouts matter. Full and partial
observations, random and fixed starts, and reset launches (``launch``) are run-time constants, so
every configuration types to one signature; int32 actions, which ``env.step`` also accepts, reach the
kernel widened to int64: one build.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import gpurl
from gpurl.envs.tag_gridworld import TagGridworld
from gpurl.kernels.aot import (assemble_sm90, compile_ptx_sm90, float64_instructions, kernel_signature, sass_sm90,
                              suspect_instructions)
import gpurl.kernels.counted_loops as counted_loops
import gpurl.kernels.program as program
from gpurl.kernels.program import EnvKernel

pytestmark = pytest.mark.compile

CONFIGS = {
    "full_obs": dict(use_full_observation=True),
    "partial_obs_fixed_start": dict(use_full_observation=False, random_start=False),
}
ACTION_DTYPES = {"int64": torch.int64, "int32": torch.int32}


def launch_args(config: str, action_dtype: torch.dtype) -> dict[str, tuple]:
    """{"reset"/"step": args after (target, E, N)} of a tiny CPU env's reset() and step(), not run."""
    env = gpurl.make("tag_gridworld", num_envs=2, device="cpu", seed=1, num_taggers=2, **CONFIGS[config])
    recorded = {}

    def record(kernel, target, num_envs, num_agents, *args, stream=None, constants=()):
        assert kernel is TagGridworld.class_kernel()
        recorded["step" if "reset" in recorded else "reset"] = args

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(EnvKernel, "launch", record)
        env.reset()
        env.step(torch.zeros(env.num_envs, env.num_agents, dtype=action_dtype))
    return recorded


_compiled: dict[tuple, tuple[str, bytes]] = {}


def compiled(args: tuple, ptxas: str) -> tuple[str, bytes]:
    """(PTX, cubin) of the gridworld kernel typed by ``args``; compiled once per signature in this process."""
    key = kernel_signature(args)
    if key not in _compiled:
        ptx = compile_ptx_sm90(TagGridworld.class_kernel(), args)
        _compiled[key] = ptx, assemble_sm90(ptx, ptxas)
    return _compiled[key]


def test_configs_action_dtypes_and_reset_launches_type_to_one_build():
    signatures = set()
    for dtype in ACTION_DTYPES.values():
        for config in CONFIGS:
            args = launch_args(config, dtype)
            signatures.add(kernel_signature(args["step"]))
            signatures.add(kernel_signature(args["reset"]))  # int64 placeholder actions
            assert args["reset"][1].launch == 1 and args["step"][1].launch == 0
            assert args["step"][2].dtype == np.int64  # int32 steps are widened by the env
    assert len(signatures) == 1


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_gridworld_kernel_compiles_for_sm90_without_float64(config, ptxas):
    args = launch_args(config, torch.int64)["step"]
    ptx, cubin = compiled(args, ptxas)
    assert ".target sm_90" in ptx
    assert float64_instructions(ptx) == []
    assert cubin[:4] == b"\x7fELF"


def test_float64_constant_is_caught():
    # The check has teeth on this kernel: a Python float constant (typed float64) promotes the obs division.
    arrays, consts, actions = launch_args("full_obs", torch.int64)["step"]
    ptx = compile_ptx_sm90(TagGridworld.class_kernel(), (arrays, consts._replace(length_f32=10.0), actions))
    assert any("f64" in line for line in float64_instructions(ptx))


_PACKED_SOURCE = program._cuda_source


def _block_per_env_source(name, phases, nargs):
    """The kernel as it was laid out before issue 42's packed geometry: a block per env, whose index is
    ``blockIdx.x`` itself (an int32; the packed layout computes an int64 one)."""
    source = _PACKED_SOURCE(name, phases, nargs)
    packed = source[source.index("    envs_per_block = "):source.index("    has_env = ")]
    source = source.replace(packed, "    e = cuda.blockIdx.x\n    lane = t\n").replace("i += lanes", "i += cuda.blockDim.x")
    return source.replace("    has_env = slot < envs_per_block and e < num_envs", "    has_env = e < num_envs")


def test_int32_action_build_holds_the_form_ptxas_got_wrong(ptxas, cuobjdump, monkeypatch):
    """The machine-code check has teeth: typed for int32 actions (what the env no longer launches), laid out a
    block per env and with its range loops as Numba lowers them (as the env was built when ptxas got it wrong),
    the kernel's clamp of an action compiles to the VIMNMX form that made action 0 act as 4 on an H100."""
    arrays, consts, actions = launch_args("full_obs", torch.int64)["step"]
    monkeypatch.setattr(program, "_cuda_source", _block_per_env_source)
    monkeypatch.setattr(counted_loops, "ENABLED", False)
    ptx = compile_ptx_sm90(TagGridworld.class_kernel(), (arrays, consts, actions.astype(np.int32)))
    found = suspect_instructions(sass_sm90(assemble_sm90(ptx, ptxas), cuobjdump))
    assert found and all("VIMNMX" in code for code in found), found
