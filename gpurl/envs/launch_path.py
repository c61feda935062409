"""An env's one launch path, chosen when the env is built (:func:`choose_launcher`), so that its ``reset`` and
``step`` launch without asking which target, build or kernel language they run on.

A launcher runs an env's kernel over the env's own arrays:

- ``launcher.reset(consts)``: the reset launch (it restarts the envs whose ``restart`` flag the env just set);
- ``launcher.step(consts, actions, out)``: one step; ``actions`` the torch tensor the kernel reads
  ([E, N, D], contiguous, on the env's device), ``out`` a :class:`~.step_inputs.StepOutputs` or None (the
  env's own buffers);
- ``launcher.constants_changed()``: the env re-seeded, so its constants are new tuples: forget what was
  prepared for the old ones;
- ``launcher.path``: the path in words (``env.launch_path``).

``consts`` is the constants tuple of that launch (the env's step or reset constants), passed at each call.

The paths: :class:`DirectLauncher` (every CPU env), :class:`PreparedLauncher` (CUDA),
:class:`DispatchLauncher` (CUDA builds in Numba's simulator, tests). An env class whose kernel launches
another way overrides ``KernelEnv.choose_launcher`` (tag_gridworld's CUDA C:
:class:`gpurl.envs.tag_gridworld.cuda_c.GridCudaC`).
"""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import torch

from ..kernels.interop import current_stream, current_stream_handle, kernel_view, simulator_enabled
from ..kernels.prepared_launch import NotPrepared

if TYPE_CHECKING:
    from .base import KernelEnv
    from .step_inputs import StepOutputs

#: The outputs a step writes, as fields of the env's arrays: a prepared CUDA launch passes their data pointers
#: anew at each call (a trainer's ``out=`` slot, or the env's own buffers).
OUTPUTS = ("obs", "final_obs", "reward", "terminated", "truncated", "global_state", "final_global_state")


class OutputPointers:
    """The data pointers of a step's outputs, in :data:`OUTPUTS` order, for a prepared launch: ``pointers(out)``
    gives the env's own (allocated once, read here once) when ``out`` is None, else those of ``out``'s tensors
    (a trainer's rollout slot)."""

    def __init__(self, env: "KernelEnv"):
        self._output_tensors = env._output_tensors
        own = env._output_tensors(None)
        self.own = tuple(own[name].data_ptr() for name in OUTPUTS)  # never move: allocated once

    def __call__(self, out: "StepOutputs | None") -> tuple[int, ...]:
        if out is None:
            return self.own
        tensors = self._output_tensors(out)
        return tuple(tensors[name].data_ptr() for name in OUTPUTS)


def choose_launcher(env: "KernelEnv"):
    """The launcher of ``env``'s Numba kernel for its target: direct CPU launches, prepared CUDA launches, or
    (CUDA under NUMBA_ENABLE_CUDASIM=1) the simulator's dispatch."""
    if env.target == "cpu":
        return DirectLauncher(env)
    if simulator_enabled():
        return DispatchLauncher(env)
    return PreparedLauncher(env)


class _KernelLauncher:
    """What the launchers of an env's Numba kernel share: the env's arrays, sizes and build, read once."""

    path = ""

    def __init__(self, env: "KernelEnv"):
        self._kernel, self._target = env.kernel, env.target
        self._num_envs, self._num_agents = env.num_envs, env.num_agents
        self._arrays = env._arrays  # the env's own arrays, as kernel views: allocated once, never moved
        self._output_tensors = env._output_tensors
        self._no_actions = env._no_actions  # a reset reads no actions: a dummy of the steps' type
        self._build_constants = env._build_constants

    def _step_arrays(self, out: "StepOutputs | None"):
        """The env's arrays, with ``out``'s tensors (a trainer's rollout slot) in place of its own outputs: the
        kernel writes there directly."""
        if out is None:
            return self._arrays
        target = self._target
        return self._arrays._replace(**{k: kernel_view(v, target) for k, v in self._output_tensors(out).items()})

    def constants_changed(self) -> None:
        """Nothing here depends on the constants' identity."""


class DirectLauncher(_KernelLauncher):
    """CPU: the build's compiled overload called directly (:class:`~gpurl.kernels.direct_launch.DirectLaunch`),
    the env's own arrays passed as one address table. Every argument keeps its type but the actions', so a
    launch is keyed by the actions' dtype and ndim."""

    path = "cpu: direct launch (numba parallel)"

    def __init__(self, env: "KernelEnv"):
        super().__init__(env)
        self.direct = env.kernel.direct_launch(self._build_constants)
        self.direct.pin(self._arrays)  # the env's own arrays never move

    def reset(self, consts) -> None:
        actions = self._no_actions
        self.direct((actions.dtype, actions.ndim), self._num_envs, self._num_agents, self._arrays, consts, actions)

    def step(self, consts, actions: torch.Tensor, out: "StepOutputs | None") -> None:
        view = kernel_view(actions, "cpu")
        self.direct((view.dtype, view.ndim), self._num_envs, self._num_agents, self._step_arrays(out), consts, view)


class DispatchLauncher(_KernelLauncher):
    """CUDA: every launch through :meth:`~gpurl.kernels.program.EnvKernel.launch` on torch's current stream,
    numba-cuda typing and marshalling every argument (in Numba's simulator: its dispatch)."""

    path = "cuda: numba-cuda dispatch"

    def __init__(self, env: "KernelEnv"):
        super().__init__(env)
        self._device = env.device
        if simulator_enabled():
            self.path = "cuda: numba-cuda dispatch in Numba's simulator"

    def reset(self, consts) -> None:
        self._launch(self._arrays, consts, self._no_actions)

    def step(self, consts, actions: torch.Tensor, out: "StepOutputs | None") -> None:
        self._launch(self._step_arrays(out), consts, kernel_view(actions, self._target))

    def _launch(self, arrays, consts, actions) -> None:
        self._kernel.launch(self._target, self._num_envs, self._num_agents, arrays, consts, actions,
                            stream=current_stream(self._device), constants=self._build_constants)


class PreparedLauncher(DispatchLauncher):
    """CUDA: numba-cuda's dispatch for a constants tuple's first launches, then, once the build's bounds check
    has settled, its launch with the parameters marshalled once (:mod:`gpurl.kernels.prepared_launch`): only
    the actions' and the outputs' data pointers are passed anew. Where a launch cannot be prepared it stays on
    the dispatch (warned once per constants tuple)."""

    path = "cuda: numba-cuda, prepared launches"

    def __init__(self, env: "KernelEnv"):
        super().__init__(env)
        self._env_name = env.env_name()
        self._placed = env._placed  # the device with its index: the stream's
        self._no_action_tensor = env._no_action_tensor
        #: {id(constants): (constants, PreparedLaunch or None)}; the tuple is kept so that its id stays its own.
        self._prepared: dict = {}
        self._varying = ((2,), *((0, self._arrays._fields.index(name)) for name in OUTPUTS))
        self._output_pointers = OutputPointers(env)

    def reset(self, consts) -> None:
        if not self._launch_prepared(consts, self._no_action_tensor, None):
            self._launch(self._arrays, consts, self._no_actions)

    def step(self, consts, actions: torch.Tensor, out: "StepOutputs | None") -> None:
        if not self._launch_prepared(consts, actions, out):
            self._launch(self._step_arrays(out), consts, kernel_view(actions, self._target))

    def constants_changed(self) -> None:
        self._prepared.clear()  # prepared for the old constants

    def _launch(self, arrays, consts, actions) -> None:
        super()._launch(arrays, consts, actions)
        if id(consts) not in self._prepared:
            self._prepare(arrays, consts, actions)

    def _launch_prepared(self, consts, actions: torch.Tensor, out: "StepOutputs | None") -> bool:
        """Launch through the prepared launch of ``consts``; False when there is none."""
        entry = self._prepared.get(id(consts))
        launch = None if entry is None else entry[1]
        if launch is None:
            return False
        launch.launch((actions.data_ptr(), *self._output_pointers(out)), current_stream_handle(self._placed))
        return True

    def _prepare(self, arrays, consts, actions) -> None:
        """After an ordinary launch: prepare the launches with ``consts``, once the build's bounds check has
        settled; where that cannot be done, they stay ordinary (warned once)."""
        if torch.cuda.is_current_stream_capturing():
            return
        try:
            prepared = self._kernel.prepare_launch(self._num_envs, self._num_agents, arrays, consts, actions,
                                                   constants=self._build_constants, varying=self._varying)
        except NotPrepared as err:
            # stacklevel 4: env.reset/env.step's line (after _prepare, _launch, launcher.reset/step), as before
            warnings.warn(f"{self._env_name}: CUDA steps stay on numba-cuda's dispatch (about 0.5 ms of host time "
                          f"per call): {err}", RuntimeWarning, stacklevel=4)
            prepared = None
        else:
            if prepared is None:  # not settled yet: the next launch tries again
                return
        self._prepared[id(consts)] = (consts, prepared)
