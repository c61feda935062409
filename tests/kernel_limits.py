"""The compile tier's kernel-limit checks of env kernels, shared by tests/test_compile_kernel_limits.py (the
kernel report's configurations) and tests/test_compile_mpe_kernel_limits.py (every MPE scenario): the two
files run on different pytest-xdist workers, and a configuration's checks stay in one process, where its
recorded launches and compiled PTX are cached."""
from __future__ import annotations

import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import kernel_inventory as inv  # noqa: E402

from gpurl.kernels.aot import (assemble_sm90, float64_instructions, kernel_signature, sass_sm90,  # noqa: E402
                               suspect_instructions)
from gpurl.kernels.occupancy import occupancy  # noqa: E402

#: The report's configurations and every MPE scenario (env kernels only).
ENV_KERNEL_CONFIGS = sorted(inv.ENV_KERNEL_CONFIGS)
MPE_CONFIGS = [config for config in ENV_KERNEL_CONFIGS if config.startswith("mpe-")]
OTHER_CONFIGS = [config for config in ENV_KERNEL_CONFIGS if config not in MPE_CONFIGS]


@functools.lru_cache(maxsize=None)
def recorded(config: str):
    """(env, launches) of ``config``: one reset and one step of its CUDA build, recorded, not run."""
    return inv.record_launches(inv.ENV_KERNEL_CONFIGS[config])


def describe(name: str, threads: int, res: inv.Resources) -> str:
    occ = occupancy(threads, res.registers, res.static_shared + res.dynamic_shared)
    return (f"{name} ({threads} threads): {res.registers} regs, spill {res.spill_stores}/{res.spill_loads} B, "
            f"smem {res.static_shared}+{res.dynamic_shared} B, {occ.blocks_per_sm} blocks/SM, "
            f"occupancy {occ.occupancy:.0%} ({'+'.join(occ.limiter)})")


def env_kernel_problems(config: str, ptxas: str) -> list[str]:
    """What of ``config``'s env kernels breaks a per-block limit, spills or holds float64 (one compile per
    kernel, argument types, constants and block size); ``pytest -s`` prints each kernel's resources."""
    env, launches = recorded(config)
    assert {launch.phase for launch in launches} >= {"reset", "step"}, "a reset and a step launch something"
    builds: dict[tuple, list] = {}  # one compile per kernel, argument types, constants and block size
    for launch in launches:
        assert launch.num_envs == inv.ENV_KERNEL_CONFIGS[config].num_envs and launch.num_agents == env.num_agents
        key = (launch.kernel, kernel_signature(launch.args), launch.constants, launch.threads)
        builds.setdefault(key, []).append(launch)
    problems = []
    for same in builds.values():
        launch, phases = same[0], "+".join(dict.fromkeys(x.phase for x in same))
        res = inv.launch_resources(launch, ptxas)
        print(f"\n{config} {phases}: " + describe(launch.kernel.name, launch.threads, res))
        problems += [f"{launch.kernel.name} ({phases}): {p}" for p in res.problems(launch.threads, launch.kernel.name)]
        ptx = inv.cached_ptx_sm90(launch.kernel, launch.args, launch.constants)  # compiled above: cached
        problems += [f"{launch.kernel.name} ({phases}): float64 {op}" for op in float64_instructions(ptx)]
    return problems


def suspect_machine_code(config: str, ptxas: str, cuobjdump: str) -> dict[str, list[str]]:
    """{kernel (phase): instructions} of ``config``'s env builds in a form ptxas 13.0 compiled wrongly
    (gpurl.kernels.aot._SUSPECT_SASS: an int32 clamp of tag_gridworld's actions ran wrongly on an H100)."""
    _, launches = recorded(config)
    found = {}
    for launch in launches:
        ptx = inv.cached_ptx_sm90(launch.kernel, launch.args, launch.constants)  # one compile per build
        for code in suspect_instructions(sass_sm90(assemble_sm90(ptx, ptxas), cuobjdump)):
            found.setdefault(f"{launch.kernel.name} ({launch.phase})", []).append(code)
    return found

