"""Compile tier: tag_continuous's kernel compiles to sm_90 PTX with no float64 and assemble with ptxas.

The kernels are typed with the exact arguments a tiny CPU env launches them with (recorded by wrapping
``EnvKernel.launch``, nothing runs): only dtypes, ranks and layouts matter, so the CPU env's arrays
stand in for device arrays even though the CUDA build's k-nearest scratch has other *shapes*
(``knn_scratch_shapes``). Full and k-nearest observations are the same kernel (``full_obs`` is a
run-time constant), so both configurations must type to one signature and one compile serves both.
Step actions may be int64 or int32 (both accepted by ``env.step``); the env widens int32 ones to int64, so
the kernel has one build.

``ptxas -v``'s register / spill report is printed (``pytest -s`` shows it) to keep an eye on the
phase-heavy kernel; it is not asserted (the number moves with every kernel change).
"""
from __future__ import annotations

import os
import re
import subprocess
import tempfile

import numpy as np
import pytest
import torch

import gpurl
from gpurl.kernels.aot import assemble_sm90, compile_ptx_sm90, float64_instructions, kernel_signature
from gpurl.kernels.program import EnvKernel

pytestmark = pytest.mark.compile

CONFIGS = {
    "full_obs": dict(use_full_observation=True),
    "k_nearest": dict(use_full_observation=False, num_other_agents_observed=3),
}
ACTION_DTYPES = {"int64": torch.int64, "int32": torch.int32}


def launch_args(config: str, action_dtype: torch.dtype) -> dict[str, tuple]:
    """{"reset" / "step": args after (target, E, N)} of a tiny CPU env's reset() and step(), not run;
    ``recorded["kernel"]``: the env's kernel."""
    env = gpurl.make("tag_continuous", num_envs=2, device="cpu", seed=1, num_taggers=2, num_runners=5,
                     **CONFIGS[config])
    recorded = {}

    def record(kernel, target, num_envs, num_agents, *args, stream=None, constants=()):
        recorded["reset" if "reset" not in recorded else "step"] = args
        recorded["kernel"] = kernel

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(EnvKernel, "launch", record)
        env.reset()
        env.step(torch.zeros(env.num_envs, env.num_agents, 2, dtype=action_dtype))
    assert set(recorded) == {"reset", "step", "kernel"}
    return recorded


_compiled: dict[tuple, tuple[str, bytes]] = {}


def compiled(kernel: EnvKernel, args: tuple, ptxas: str) -> tuple[str, bytes]:
    """(PTX, cubin) of ``kernel`` typed by ``args``; compiled once per signature in this process."""
    key = (kernel.name, kernel_signature(args))
    if key not in _compiled:
        ptx = compile_ptx_sm90(kernel, args)
        _compiled[key] = ptx, assemble_sm90(ptx, ptxas)
    return _compiled[key]


def ptxas_report(ptx: str, ptxas: str) -> dict[str, int]:
    """Registers, spill stores/loads and stack frame bytes that ``ptxas -arch=sm_90 -v`` reports."""
    with tempfile.TemporaryDirectory(prefix="gpurl-ptxas-v-") as tmp:
        src = os.path.join(tmp, "kernel.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        done = subprocess.run([ptxas, "-arch=sm_90", "-v", "-o", os.path.join(tmp, "k.cubin"), src],
                              capture_output=True, text=True, check=True)
    text = done.stdout + done.stderr
    fields = dict(registers=r"Used (\d+) registers", stack_frame=r"(\d+) bytes stack frame",
                  spill_stores=r"(\d+) bytes spill stores", spill_loads=r"(\d+) bytes spill loads")
    return {name: int(re.search(pattern, text).group(1)) for name, pattern in fields.items()}


def test_configs_and_action_dtypes_type_to_one_build():
    signatures = {kernel_signature(launch_args(config, dtype)[name]) for dtype in ACTION_DTYPES.values()
                  for config in ("full_obs", "k_nearest") for name in ("reset", "step")}
    assert len(signatures) == 1


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_tag_kernel_compiles_for_sm90_without_float64(config, ptxas):
    recorded = launch_args(config, torch.int64)
    ptx, cubin = compiled(recorded["kernel"], recorded["step"], ptxas)
    assert ".target sm_90" in ptx
    assert float64_instructions(ptx) == []
    assert cubin[:4] == b"\x7fELF"


def test_ptxas_resource_usage_is_reported(ptxas):
    recorded = launch_args("k_nearest", torch.int64)
    ptx, _ = compiled(recorded["kernel"], recorded["step"], ptxas)
    report = ptxas_report(ptx, ptxas)
    print(f"\n{recorded['kernel'].name} sm_90: {report}")
    assert 0 < report["registers"] <= 255


def test_float64_constant_in_the_tag_kernel_is_caught():
    # The check has teeth on this kernel: a Python float constant (typed float64) promotes the tag test.
    recorded = launch_args("k_nearest", torch.int64)
    arrays, consts, actions = recorded["step"]
    ptx = compile_ptx_sm90(recorded["kernel"], (arrays, consts._replace(tag_radius=0.75), actions))
    assert any("f64" in line for line in float64_instructions(ptx))
