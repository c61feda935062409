"""Compile tier: simple_tag's kernel compiles to sm_90 PTX with no float64 and assembles with ptxas.

The kernel (one per env class: step and reset) is typed with the exact arguments a tiny CPU env launches
it with (recorded by wrapping ``EnvKernel.launch``, nothing runs); only dtypes, ranks and layouts matter.
Discrete/continuous and terminate_on_success are run-time constants, so every configuration with one
action dtype types to one signature. ``ptxas -v``'s report is printed (``pytest -s``).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import gpurl
from gpurl.kernels.aot import assemble_sm90, compile_ptx_sm90, float64_instructions, kernel_signature
from gpurl.kernels.program import EnvKernel

pytestmark = pytest.mark.compile

CONFIGS = {
    "discrete_int64": (dict(), torch.int64),
    "discrete_int32": (dict(), torch.int32),
    "continuous": (dict(continuous_actions=True), torch.float32),
    "no_obstacles_terminate": (dict(num_obstacles=0, terminate_on_success=True), torch.int64),
}


def launch_args(config: str) -> tuple[EnvKernel, dict[str, tuple]]:
    """(kernel, {"reset" / "step": args after (target, E, N)}) of a tiny CPU env's reset() and step()."""
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
    return env.kernel, recorded


_compiled: dict[tuple, tuple[str, bytes]] = {}


def compiled(kernel: EnvKernel, args: tuple, ptxas: str) -> tuple[str, bytes]:
    key = (kernel.name, kernel_signature(args))
    if key not in _compiled:
        ptx = compile_ptx_sm90(kernel, args)
        _compiled[key] = ptx, assemble_sm90(ptx, ptxas)
    return _compiled[key]


def test_reset_and_step_share_one_signature_per_action_kind():
    """Discrete steps, int64 or int32 (widened by the env), share the reset's build; Box steps have their own."""
    signatures = {}
    for name in CONFIGS:
        _, args = launch_args(name)
        assert kernel_signature(args["reset"]) == kernel_signature(args["step"]), name
        signatures.setdefault(CONFIGS[name][1] == torch.float32, set()).add(kernel_signature(args["step"]))
    assert all(len(s) == 1 for s in signatures.values()), signatures


@pytest.mark.parametrize("config", ["discrete_int64", "continuous"])
def test_kernel_compiles_for_sm90_without_float64(config, ptxas):
    kernel, args = launch_args(config)
    ptx, cubin = compiled(kernel, args["step"], ptxas)
    assert ".target sm_90" in ptx
    assert float64_instructions(ptx) == []
    assert cubin[:4] == b"\x7fELF"


def test_float64_actions_would_be_caught():
    # The check has teeth on this kernel: float64 actions promote the action decoding to float64.
    kernel, args = launch_args("continuous")
    arrays, consts, actions = args["step"]
    ptx = compile_ptx_sm90(kernel, (arrays, consts, actions.astype(np.float64)))
    assert float64_instructions(ptx)
