"""Compile tier: simple_tag's kernels compile to sm_90 PTX with no float64 and assemble with ptxas.

The kernels are typed with the exact arguments a tiny CPU env launches them with (recorded by wrapping
``EnvKernel.launch``, nothing runs); only dtypes, ranks and layouts matter. Every action dtype reaches the
kernels as float32 (discrete actions through the env's float32 buffer), and discrete/continuous is a
run-time constant, so one signature per kernel covers every configuration. The CUDA build launches
``simple_tag_step``/``simple_tag_reset``; the CPU's env-major kernel is compiled for CUDA too, so it stays
valid GPU code (it shares every device function). ``ptxas -v``'s report is printed (``pytest -s``).
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
from gpurl.envs.simple_tag.env_major import simple_tag_env_major
from gpurl.envs.simple_tag.kernels import simple_tag_reset, simple_tag_step
from gpurl.kernels.aot import assemble_sm90, compile_ptx_sm90, float64_instructions, kernel_signature
from gpurl.kernels.program import EnvKernel

pytestmark = pytest.mark.compile

CONFIGS = {
    "discrete_int64": (dict(), torch.int64),
    "discrete_int32": (dict(), torch.int32),
    "continuous": (dict(continuous_actions=True), torch.float32),
    "no_obstacles_terminate": (dict(num_obstacles=0, terminate_on_success=True), torch.int64),
}
KERNELS = [simple_tag_step, simple_tag_reset, simple_tag_env_major]


def launch_args(config: str) -> dict[str, tuple]:
    """{"step" / "reset": args after (target, E, N)} of a tiny CPU env's reset() and step(), not run."""
    params, dtype = CONFIGS[config]
    env = gpurl.make("simple_tag", num_envs=2, device="cpu", seed=1, num_adversaries=2, num_good=3, **params)
    recorded = {}

    def record(kernel, target, num_envs, num_agents, *args, stream=None, constants=()):
        recorded["reset" if "reset" not in recorded else "step"] = args

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(EnvKernel, "launch", record)
        env.reset()
        shape = (2, 5, 5) if params.get("continuous_actions") else (2, 5)
        env.step(torch.zeros(shape, dtype=dtype))
    assert set(recorded) == {"reset", "step"}
    return recorded


def args_for(kernel: EnvKernel, config: str = "discrete_int64") -> tuple:
    return launch_args(config)["reset" if kernel is simple_tag_reset else "step"]


_compiled: dict[tuple, tuple[str, bytes]] = {}


def compiled(kernel: EnvKernel, args: tuple, ptxas: str) -> tuple[str, bytes]:
    key = (kernel.name, kernel_signature(args))
    if key not in _compiled:
        ptx = compile_ptx_sm90(kernel, args)
        _compiled[key] = ptx, assemble_sm90(ptx, ptxas)
    return _compiled[key]


def test_every_configuration_types_to_one_signature():
    signatures = {name: {k: kernel_signature(v) for k, v in launch_args(name).items()} for name in CONFIGS}
    first = signatures["discrete_int64"]
    assert first["reset"] == first["step"]  # the reset's dummy actions are float32 [1, 1, 1] too
    for name, sig in signatures.items():
        assert sig == first, name


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
def test_kernel_compiles_for_sm90_without_float64(kernel, ptxas):
    ptx, cubin = compiled(kernel, args_for(kernel), ptxas)
    assert ".target sm_90" in ptx
    assert float64_instructions(ptx) == []
    assert cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("kernel", [simple_tag_step, simple_tag_reset], ids=lambda k: k.name)
def test_ptxas_resource_usage_is_reported(kernel, ptxas):
    ptx, _ = compiled(kernel, args_for(kernel), ptxas)
    with tempfile.TemporaryDirectory(prefix="gpurl-ptxas-v-") as tmp:
        src = os.path.join(tmp, "kernel.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        done = subprocess.run([ptxas, "-arch=sm_90", "-v", "-o", os.path.join(tmp, "k.cubin"), src],
                              capture_output=True, text=True, check=True)
    registers = int(re.search(r"Used (\d+) registers", done.stdout + done.stderr).group(1))
    print(f"\n{kernel.name} sm_90: {registers} registers")
    assert 0 < registers <= 255


def test_float64_actions_would_be_caught():
    # The check has teeth on this kernel: float64 actions promote the action decoding to float64.
    arrays, consts, actions = args_for(simple_tag_step)
    ptx = compile_ptx_sm90(simple_tag_step, (arrays, consts, actions.astype(np.float64)))
    assert float64_instructions(ptx)
