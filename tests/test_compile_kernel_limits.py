"""Compile tier: every kernel gpurl launches on a GPU, at the kernel report's configurations
(bench/kernel_report.py: tag-10v100 x 1000 envs, simple_tag 3v1v2 x 4096, grid-4 x 2000, and every MPE
scenario at mpe2's defaults x 4096 (env kernels only, in tests/test_compile_mpe_kernel_limits.py, which
runs on another pytest-xdist worker; the checks are in tests/kernel_limits.py); the fused actor
of each preset's policy at 1e5 rows, the fused GRU step of that policy made recurrent and, for a Discrete group,
the fused epsilon-greedy step of its Q-network; GAE over each
preset's rollout), fits the H100's per-block limits and does not spill.

Env kernels are not listed here: each configuration's env is built with the CUDA target over host memory
and the launches of one reset and one step are recorded (bench/kernel_inventory.py; nothing runs), so a
kernel that is renamed, split or added is covered as it is. Each is compiled with its exact argument
types and build constants and launch geometry (one block per env, ``block_size(agents)`` threads).
tag_gridworld's CUDA C build is launched like its Numba kernel. Triton kernels use their launchers'
constexprs and warps.

Limits (gpurl.kernels.occupancy.block_limits): threads <= 1024, registers <= 255, registers x threads
<= 65536 (also as allocated: 256-register units, warps rounded up to 4), static shared memory <= 48 KiB,
static + dynamic <= 227 KiB; at least one block per SM. Spills: no spill stores or loads in any function
of the kernel's PTX (``ptxas -v``). Env kernels: no float64 instruction either, and no machine-code form
that ptxas has been seen to compile wrongly (``cuobjdump -sass``; gpurl.kernels.aot.suspect_instructions;
an int32 clamp of tag_gridworld's actions ran wrongly on an H100). ``pytest -s`` prints each kernel's registers
and occupancy.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from kernel_limits import (OTHER_CONFIGS, describe, env_kernel_problems, inv, occupancy, recorded,
                           suspect_machine_code)

pytestmark = pytest.mark.compile

CONFIGS = sorted(inv.ENV_CONFIGS)


def test_configurations_cover_every_builtin_env():
    # What `import gpurl` registers, in a fresh process: tests and examples register envs of their own.
    done = subprocess.run([sys.executable, "-c", "import json, gpurl; print(json.dumps(gpurl.registered()))"],
                          capture_output=True, text=True, check=True)
    builtin = set(json.loads(done.stdout.strip().splitlines()[-1]))
    assert builtin and builtin <= {c.env for c in inv.ENV_KERNEL_CONFIGS.values()}


@pytest.mark.parametrize("config", OTHER_CONFIGS)
def test_env_kernels_fit_the_block_and_do_not_spill(config, ptxas):
    assert env_kernel_problems(config, ptxas) == []


def test_a_kernel_with_launch_bounds_keeps_its_register_budget(ptxas):
    """tag_continuous's CUDA build declares launch bounds (256 threads, 2 blocks per SM: 128 registers a thread):
    the PTX carries them, ptxas keeps to them spilling no more than its allowance (none), and
    tag-10v100's blocks of 128 threads keep 4 to an SM (ptxas takes 136 registers and 3 blocks unbounded)."""
    _, launches = recorded("tag-10v100")
    step = next(launch for launch in launches if launch.phase == "step")
    assert step.kernel.launch_bounds == (256, 2) and step.threads == 128
    ptx = inv.cached_ptx_sm90(step.kernel, step.args, step.constants)
    assert re.search(r"\.maxntid 256, 1, 1", ptx) and re.search(r"\.minnctapersm 2\b", ptx)
    res = inv.launch_resources(step, ptxas)
    allowance = inv.SPILL_ALLOWANCE.get("tag_continuous", 0)
    within = res.registers <= 128 and max(res.spill_stores, res.spill_loads) <= allowance
    assert within, describe("tag_continuous", 128, res)
    assert occupancy(step.threads, res.registers, res.static_shared + res.dynamic_shared).blocks_per_sm == 4


@pytest.mark.parametrize("config", OTHER_CONFIGS)
def test_env_kernels_hold_no_machine_code_form_ptxas_got_wrong(config, ptxas, cuobjdump):
    """The sm_90 machine code of every env build has no instruction in a form ptxas 13.0 compiled wrongly."""
    assert suspect_machine_code(config, ptxas, cuobjdump) == {}


@pytest.mark.parametrize("env_name", sorted(inv.cuda_c_kernels()))
def test_cuda_c_kernels_fit_the_block_and_do_not_spill(env_name, ptxas):
    source, kernel = inv.cuda_c_kernels()[env_name]
    configs = [name for name, c in inv.ENV_CONFIGS.items() if c.env == env_name]
    assert configs, f"no report configuration runs {env_name}"
    res = inv.cuda_c_resources(source, kernel, ptxas)
    for config in configs:
        _, launches = recorded(config)
        threads = max(launch.threads for launch in launches)  # launched like the Numba kernel
        print(f"\n{config}: " + describe(kernel, threads, res))
        assert res.problems(threads) == []


def triton_launches(config: str, name: str) -> list[inv.TritonLaunch]:
    env, _ = recorded(config)
    found = [t for t in inv.triton_launches(inv.ENV_CONFIGS[config], env) if t.name == name]
    assert found, f"{config}: no {name} launch"
    return found


#: (kernel, configuration) of every Triton launch: the epsilon-greedy actor only where a group acts in a
#: Discrete space (tag-10v100's groups act in MultiDiscrete([21, 21])), the Box actor only on MPE (whose
#: scenarios take continuous actions).
TRITON_LAUNCHES = [(kernel, config) for config in CONFIGS
                   for kernel in ("actor_fused_kernel", "gru_actor_fused_kernel", "q_actor_fused_kernel",
                                  "box_actor_fused_kernel", "gae_fused_kernel")
                   if not (kernel == "q_actor_fused_kernel" and config == "tag-10v100")
                   and not (kernel == "box_actor_fused_kernel" and config != "simple-tag-3v1v2")]


@pytest.mark.parametrize("kernel,config", TRITON_LAUNCHES)
def test_triton_kernels_fit_the_block_and_do_not_spill(kernel, config, ptxas):
    for launch in triton_launches(config, kernel):
        res = inv.triton_resources(launch, ptxas)
        print(f"\n{config} {launch.detail}: " + describe(kernel, launch.threads, res))
        assert res.problems(launch.threads) == [], f"{launch.detail}: " + describe(kernel, launch.threads, res)
