"""tag_gridworld's CUDA C build (``tag_gridworld.cu``), launched through CuPy over the env's own buffers.

``TagGridworld(kernel_source="cuda_c")`` chooses :class:`GridCudaC` as its launcher when it is built
(:mod:`gpurl.envs.launch_path`): every reset and step launch comes here instead of to the Numba kernel. The
launch is the Numba one's: grid = num_envs, block = ``block_size(num_agents)``, and the arguments are the
env's arrays (``env.kernel_tensors()``: torch tensors, zero-copy) and constants, in the order of their
NamedTuples, which is the kernel's parameter order (a cpu-tier test checks the names match).
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
    """The launcher of a tag_gridworld env (:mod:`gpurl.envs.launch_path`) whose kernel is ``tag_gridworld.cu``.

    env: the TagGridworld whose buffers it launches over (``env.kernel_tensors()``); module: a CudaCModule, or
    a HostCudaCModule (tests: the same source built for the host, over CPU tensors); block: threads per env
    (default: the Numba build's).
    """

    def __init__(self, env, module, block: int | None = None):
        self.module = module
        self.block = block
        self._kernel_tensors = env.kernel_tensors
        self._obs_dim = env.obs_dim
        self.path = ("cuda: CUDA C via CuPy" if env.target == "cuda"
                     else "cpu: CUDA C built for the host (g++, tests)")

    def reset(self, consts) -> None:
        self.launch(self._kernel_tensors(), consts, None)

    def step(self, consts, actions: torch.Tensor, out) -> None:
        self.launch(self._kernel_tensors(out), consts, actions)

    def constants_changed(self) -> None:
        """Nothing to forget: the constants are passed by value at every launch."""

    def launch(self, tensors, consts, actions: torch.Tensor | None) -> None:
        num_envs, num_agents = tensors.x.shape
        block = self.block or block_size(num_agents)
        self.module.launch(KERNEL, num_envs, block, kernel_args(tensors, consts, self._obs_dim, actions))


def attach(env, module, block: int | None = None) -> None:
    """Run ``env``'s launches through ``module`` from now on (how tests put the host build of the CUDA C
    source behind a CPU env; ``TagGridworld(kernel_source="cuda_c")`` chooses :func:`cuda_c_module` at build)."""
    env.kernel_language = "cuda_c"
    env.launcher = GridCudaC(env, module, block)
