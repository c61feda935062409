"""tag_gridworld's CUDA C build (``tag_gridworld.cu``), launched through CuPy over the env's own buffers, then
prepared: a step after a constants tuple's first passes only its actions' and outputs' pointers anew.

``TagGridworld(kernel_source="cuda_c")`` chooses :class:`GridCudaC` as its launcher when it is built
(:mod:`gpurl.envs.launch_path`): every reset and step launch comes here instead of to the Numba kernel. The
launch is the Numba one's: grid = num_envs, block = ``block_size(num_agents)``, and the arguments are the
env's arrays (``env.kernel_tensors()``: torch tensors, zero-copy) and constants, in the order of their
NamedTuples, which is the kernel's parameter order (a cpu-tier test checks the names match).
"""
from __future__ import annotations

import warnings
from pathlib import Path

import torch

from ...kernels.interop import current_stream_handle
from ...kernels.prepared_launch import NotPrepared
from ...kernels.program import block_size
from ..launch_path import OUTPUTS, OutputPointers

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


#: Index of the first array among ``kernel_args``: after num_envs, num_agents and obs_dim.
_FIRST_ARRAY = 3


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
    (default: the Numba build's); prepare: after a constants tuple's first step, launch its steps prepared
    (``module.prepare``: the arguments checked and packed once, then only the actions' and the outputs' data
    pointers rewritten and ``cuLaunchKernel`` called), as the Numba build's CUDA steps are; False: check and
    pack every argument at every step (CuPy's launch).
    """

    def __init__(self, env, module, block: int | None = None, prepare: bool = True):
        self.module = module
        self.block = block
        self._kernel_tensors = env.kernel_tensors
        self._output_pointers = OutputPointers(env)
        self._obs_dim = env.obs_dim
        self._env_name = env.env_name()
        self._prepare = prepare
        #: {id(constants): (constants, the actions' element size, PreparedLaunch or None)}; the tuple is kept so
        #: that its id stays its own
        self._prepared: dict = {}
        fields = env.kernel_tensors()._fields
        self._output_slots = tuple(_FIRST_ARRAY + fields.index(name) for name in OUTPUTS)
        self._after_arrays = _FIRST_ARRAY + len(fields)
        if env.target == "cuda":
            placed = env._placed
            self._stream = lambda: current_stream_handle(placed)
        else:
            self._stream = lambda: 0  # the host build runs synchronously
        kind = "CUDA C via CuPy" if env.target == "cuda" else "CUDA C built for the host (g++, tests)"
        self.path = f"{env.target}: {kind}" + (", prepared launches" if prepare else "")

    def reset(self, consts) -> None:
        self.launch(self._kernel_tensors(), consts, None)

    def step(self, consts, actions: torch.Tensor, out) -> None:
        entry = self._prepared.get(id(consts))
        if entry is not None and entry[2] is not None and entry[1] == actions.element_size():
            entry[2].launch((actions.data_ptr(), *self._output_pointers(out)), self._stream())
            return
        args = self.launch(self._kernel_tensors(out), consts, actions)
        if self._prepare and (entry is None or entry[1] != actions.element_size()):
            self._prepare_steps(consts, actions, args)

    def constants_changed(self) -> None:
        self._prepared.clear()  # prepared for the old constants

    def launch(self, tensors, consts, actions: torch.Tensor | None) -> tuple:
        """One launch through the module's own checks; returns its arguments."""
        num_envs, num_agents = tensors.x.shape
        args = kernel_args(tensors, consts, self._obs_dim, actions)
        self.module.launch(KERNEL, num_envs, self._threads(num_agents), args)
        return args

    def _threads(self, num_agents: int) -> int:
        return self.block or block_size(num_agents)

    def _prepare_steps(self, consts, actions: torch.Tensor, args: tuple) -> None:
        """After an ordinary step with ``consts``: prepare the next ones (warned once where that cannot be done)."""
        if actions.is_cuda and torch.cuda.is_current_stream_capturing():
            return
        num_envs, num_agents = args[0], args[1]
        varying = (self._after_arrays + len(consts), *self._output_slots)  # the actions, then the outputs
        try:
            prepared = self.module.prepare(KERNEL, num_envs, self._threads(num_agents), args, varying)
        except NotPrepared as err:
            warnings.warn(f"{self._env_name}: CUDA C steps stay on CuPy's launch (every argument checked at every "
                          f"call): {err}", RuntimeWarning, stacklevel=4)
            prepared = None
        self._prepared[id(consts)] = (consts, actions.element_size(), prepared)


def attach(env, module, block: int | None = None, prepare: bool = True) -> None:
    """Run ``env``'s launches through ``module`` from now on (how tests put the host build of the CUDA C
    source behind a CPU env; ``TagGridworld(kernel_source="cuda_c")`` chooses :func:`cuda_c_module` at build)."""
    env.kernel_language = "cuda_c"
    env.launcher = GridCudaC(env, module, block, prepare)
