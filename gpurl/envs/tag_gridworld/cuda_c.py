"""tag_gridworld's CUDA C build (``tag_gridworld.cu``), launched through CuPy over the env's own buffers.

``TagGridworld(kernel_source="cuda_c")`` sends every reset and step launch here instead of to the Numba
kernel. The launch is the Numba one's: grid = num_envs, block = ``block_size(num_agents)``, and the
arguments are the env's arrays (``env.kernel_tensors()``: torch tensors, zero-copy) and constants, in the
order of their NamedTuples, which is the kernel's parameter order (a cpu-tier test checks the names match).
"""
from __future__ import annotations

from pathlib import Path

import torch

from ...kernels.program import block_size

SOURCE = Path(__file__).resolve().with_name("tag_gridworld.cu")
KERNEL = "tag_gridworld_step"

_module = None


def cuda_c_module():
    """The process-wide :class:`~gpurl.kernels.cuda_c.CudaCModule` of ``tag_gridworld.cu`` (compiled on the
    first launch on each device). Raises CudaCUnavailableError where CuPy sees no GPU."""
    global _module
    from ...kernels.cuda_c import CudaCModule, require_cupy

    require_cupy()
    if _module is None:
        _module = CudaCModule(path=SOURCE)
    return _module


def kernel_args(tensors, consts, obs_dim: int, actions: torch.Tensor | None) -> tuple:
    """Arguments of ``tag_gridworld_step`` after (num_envs, num_agents, ...): see the .cu's parameter list.

    actions: int32/int64 [E, N, 1], or None in a reset launch (a null pointer the kernel never reads).
    """
    num_envs, num_agents = tensors.x.shape
    action_bytes = 0 if actions is None else actions.element_size()
    return (num_envs, num_agents, obs_dim, *tensors, *consts, actions, action_bytes)


class GridCudaC:
    """Launches ``tag_gridworld.cu`` for one env. module: a CudaCModule, or a HostCudaCModule (tests: the
    same source built for the host, over CPU tensors); block: threads per env (default: the Numba build's)."""

    def __init__(self, module, block: int | None = None):
        self.module = module
        self.block = block

    def launch(self, tensors, consts, obs_dim: int, actions: torch.Tensor | None) -> None:
        num_envs, num_agents = tensors.x.shape
        block = self.block or block_size(num_agents)
        self.module.launch(KERNEL, num_envs, block, kernel_args(tensors, consts, obs_dim, actions))


def attach(env, module, block: int | None = None) -> None:
    """Run ``env``'s launches through ``module`` from now on (how tests put the host build of the CUDA C
    source behind a CPU env; ``TagGridworld(kernel_source="cuda_c")`` attaches :func:`cuda_c_module`)."""
    env._cuda_c = GridCudaC(module, block)
    env.kernel_source = "cuda_c"
