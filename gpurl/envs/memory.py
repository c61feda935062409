"""Refuse a batch whose buffers would not fit, before allocating any of them.

An env of a million envs used to start allocating and die somewhere inside torch (or be killed by the
kernel's OOM killer on a CPU) with nothing naming the cause. :func:`check_env_fits` estimates the bytes of
an env's declared arrays and output buffers from its declarations alone, and :func:`require_memory`
compares any such estimate with what the device has free, raising a ValueError that names the flag to
lower and both byte counts. The trainer's rollout storage uses the same check.
"""
from __future__ import annotations

import math
import os
from types import SimpleNamespace

import torch

from ..kernels.fields import Field
from .lifecycle import default_global_state_dim
from .spaces import check_groups

#: Bytes per element of each declared field dtype (:mod:`gpurl.kernels.fields`).
ITEM_BYTES = {"bool": 1, "uint8": 1, "int32": 4, "float32": 4, "int64": 8}


class InsufficientMemory(ValueError):
    """Buffers that would not fit into the device's free memory, refused before allocating (names the flag
    to lower and both byte counts): a usage error (``gpurl train`` reports it as one)."""


def available_bytes(device) -> int | None:
    """Bytes that allocations on ``device`` can still get, or None where that is unknown (no check).

    CUDA: the driver's free memory plus what torch's caching allocator holds unused. CPU: the smaller of
    the kernel's MemAvailable and the room left under this process's cgroup memory limit.
    """
    device = torch.device(device)
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))
    if device.type != "cpu":
        return None
    known = [n for n in (_mem_available(), _cgroup_room()) if n is not None]
    return min(known) if known else None


def require_memory(needed: int, device, what: str, fix: str) -> None:
    """Raise :class:`InsufficientMemory` (a ValueError) when ``needed`` bytes exceed :func:`available_bytes`.

    ``what`` says what would be allocated ("tag_continuous: num_envs=10000000 ..."), ``fix`` which flag to
    lower; the message adds both byte counts.
    """
    available = available_bytes(device)
    if available is not None and needed > available:
        raise InsufficientMemory(f"{what} needs {format_bytes(needed)} ({needed} bytes) on {torch.device(device)}, "
                                 f"but only {format_bytes(available)} ({available} bytes) is available; {fix}")


def env_bytes(env) -> int:
    """Bytes a declared env of ``env.num_envs`` envs allocates for its declared arrays (``state``,
    ``scratch``, ``metrics``), its output buffers (the global state's only when ``env.writes_global_state``)
    and its episode bookkeeping; the env's lookup tables (without an env axis) are left out. Needs only
    what ``KernelEnv.__init__`` sets before allocating: ``params``, ``num_envs``, ``target``,
    ``writes_global_state`` (``field_sizes`` and ``groups`` read only ``params``)."""
    cls = type(env)
    groups = dict(cls.groups(env))  # the declaring method (a built env's ``groups`` is its result)
    num_agents = check_groups(groups, env.env_name())
    obs_dim = max(g.obs_dim for g in groups.values())
    # Field.shape reads only these attributes of the env (shape_of callables: target, num_envs, num_agents).
    sizing = SimpleNamespace(num_envs=env.num_envs, num_agents=num_agents, obs_dim=obs_dim, target=env.target,
                             params=getattr(env, "params", None), device=env.device)
    declared = {**cls.state, **cls.scratch}
    for name in cls.metrics:
        declared.setdefault(name, Field("float32"))
    sizes = {"agents": num_agents, "obs": obs_dim, **cls.field_sizes(env)}
    total = sum(math.prod(f.shape(sizing, sizes, name)) * ITEM_BYTES[f.dtype] for name, f in declared.items())
    E = env.num_envs
    outputs = 2 * E * num_agents * obs_dim * 4 + E * num_agents * 4  # obs, final_obs, reward (float32)
    writes_state = getattr(env, "writes_global_state", True)  # global_state=False: [E, 0] placeholders
    if cls.state_phases:  # global_state, final_global_state (float32 [E, S])
        outputs += 2 * E * cls.global_state_dim(env) * 4 if writes_state else 0
    else:  # the default state, and its layout table (int32 [N, 2])
        outputs += (2 * E * default_global_state_dim(groups) * 4 if writes_state else 0) + num_agents * 2 * 4
    bookkeeping = 3 * E + E * 4 + 2 * E  # terminated, truncated, reset mask; episode int32; status, restart
    return total + outputs + bookkeeping


def check_env_fits(env) -> None:
    """Refuse (ValueError naming ``num_envs``) a declared env whose arrays would not fit on its device;
    called by ``KernelEnv.__init__`` before it allocates anything."""
    if not type(env).step_phases:
        return  # not a declared env: it allocates its own buffers
    needed = env_bytes(env)
    require_memory(needed, env.device, f"{env.env_name()}: num_envs={env.num_envs} (arrays of "
                   f"{format_bytes(needed / env.num_envs)} per env)", "lower num_envs (--num-envs)")


def format_bytes(n: float) -> str:
    """``n`` bytes in binary units: ``"1.5 GiB"``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _mem_available() -> int | None:
    """MemAvailable of /proc/meminfo in bytes (free plus reclaimable cache), else free pages by sysconf."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _cgroup_room() -> int | None:
    """Bytes left under the cgroup v2 memory limit of this process (a container's limit), or None.

    The cgroup's usage counts page cache, which the kernel reclaims before refusing memory: its inactive
    file pages count as room (the "working set" measure of container runtimes).
    """
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        if limit == "max":
            return None
        with open("/sys/fs/cgroup/memory.current") as f:
            used = int(f.read().strip())
        with open("/sys/fs/cgroup/memory.stat") as f:
            stat = dict(line.split() for line in f if line.strip())
        return max(int(limit) - used + int(stat.get("inactive_file", 0)), 0)
    except (OSError, ValueError):
        return None
