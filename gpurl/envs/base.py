"""What every gpurl kernel env shares: declared arrays, output buffers, episodes (argument checks: .step_inputs).

An env class declares its groups, arrays, constants and phases (see :class:`KernelEnv`); this module
allocates the arrays, builds the one kernel of the class (:mod:`.lifecycle`: resets, autoresets and
ended envs are the toolkit's), picks the one launcher of its kernel (:mod:`.launch_path`), redirects outputs
(``step(out=...)``), re-seeds and launches. Everything
here runs before a kernel launch, so an error never leaves the env half-updated, and nothing here reads
device memory unless ``validate=True`` needs to (the action range check; see ``step``).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import ClassVar

import numpy as np
import torch

from ..kernels.interop import current_stream, kernel_view, simulator_enabled, target_for
from ..kernels.errors import KernelIndexError, KernelTypingError, raised_here
from ..kernels.fields import Field, struct_type
from ..kernels.program import FIXED_AGENTS
from ..kernels.targets import freeze_constants
from . import launch_path, lifecycle, memory
from .checks import check_env_id_offset, check_flag, check_num_envs, check_seed
from .params import checked_params
from .spaces import Group, action_bounds, action_layout, check_groups
from .state_class import check_constant_types, check_state_dim, state_dataclass
from .step_inputs import StepInputChecks, StepOutputs


#: A CPU batch of at least FIXED_AGENTS_MIN_ENVS envs of at most SMALL_WORLD_AGENTS agents gets a build with
#: its agent count compiled in (:data:`gpurl.kernels.program.FIXED_AGENTS`: phases inlined, agent loops
#: unrolled): one more compile per agent count, which only a large batch repays.
FIXED_AGENTS_MIN_ENVS = 256
SMALL_WORLD_AGENTS = 16


class KernelEnv(StepInputChecks):
    """Base class: ``num_envs`` copies of a multi-agent env stepped by device kernels.

    An env class declares (docs/kernels_api.md, "Declaring an env"):

    - ``params_type``: a dataclass of its parameters (``make``'s extra keyword arguments);
    - ``groups(self) -> {name: Group}``: which agents share an obs layout and an action space, consecutive
      slices covering the agents in order (after construction ``env.groups`` is that dict);
    - ``state`` / ``scratch`` / ``metrics``: its arrays (:func:`gpurl.envs.field`); ``state`` is ``env.state``,
      ``scratch`` is kernel-private, ``metrics`` names per-env float32 counts of the last step
      (``env.step_metrics()``), zero for ended envs;
    - ``constants(self) -> {name: NumPy scalar}``: the kernels' ``c`` (float32 values as ``np.float32``);
    - optionally ``field_sizes(self) -> {name: int}``: named dims its fields use that are not params;
    - ``step_phases`` and ``start_phases``: the kernels (:mod:`.lifecycle` says what each must write);
    - optionally ``state_phases`` and ``global_state_dim(self) -> int`` (S, from ``self.params``: it is
      called before the arrays exist): the phases write the global state ``s.global_state[e, :S]`` after
      the step phases and after the start phases (docs/specs/global_state.md). Without them the toolkit
      writes every agent's observation, its group's ``obs_dim`` features, concatenated in agent order
      (after construction ``env.global_state_dim`` is S);
    - optionally ``cuda_launch_bounds``: what ptxas may assume of its CUDA launches, ``(256, 2)`` to hold a
      phase-heavy kernel to 128 registers a thread (``bench/kernel_report.py`` shows registers and occupancy).

    The kernels see ``s`` (every declared array, plus ``obs``, ``final_obs``, ``reward``, ``terminated``,
    ``truncated``, ``global_state``, ``final_global_state``, ``episode``, ``status``, ``restart``), ``c``
    (the constants, plus ``seed``, ``env_id_offset``, ``autoreset``, ``launch``, ``write_global_state``)
    and the actions.

    ``global_state=False`` (for algorithms that read none): no global state is written or allocated,
    ``env.global_state`` is None, ``info`` has no ``"final_global_state"``, ``step(out=...)`` refuses a
    given one; ``env.global_state_dim`` is still S. One compiled kernel serves both settings.

    Returned tensors (obs, reward, terminated, truncated, info["final_obs"], info["final_global_state"],
    env.global_state) are views of buffers allocated once and rewritten in place by the next
    ``step``/``reset``: copy what you keep.
    """

    params_type: ClassVar[type | None] = None
    state: ClassVar[dict[str, Field]] = {}
    scratch: ClassVar[dict[str, Field]] = {}
    #: The CUDA build's launch bounds (``EnvKernel(launch_bounds=)``), e.g. ``(256, 2)`` to hold a phase-heavy
    #: kernel to 128 registers a thread; None: ptxas chooses.
    cuda_launch_bounds: ClassVar[tuple[int, ...] | None] = None
    metrics: ClassVar[tuple[str, ...]] = ()
    step_phases: ClassVar[list] = []
    start_phases: ClassVar[list] = []
    #: Phases writing ``s.global_state`` (empty: the toolkit's default, the agents' observations).
    state_phases: ClassVar[list] = []
    #: One name per env class: its kernel's name and the name in error messages.
    name: ClassVar[str] = ""

    def __init__(self, *, num_envs=1024, device="cpu", seed=0, autoreset=True, validate=True, env_id_offset=0,
                 target=None, global_state=True, **env_params):
        if self.params_type is not None:
            self.params = checked_params(self.params_type, self.env_name(), env_params)
        elif env_params:
            raise TypeError(f"{self.env_name()} takes no parameters, got {sorted(env_params)}")
        self.num_envs = check_num_envs(num_envs)
        self.device = torch.device(device)
        self.seed = check_seed(seed)
        self.autoreset = check_flag("autoreset", autoreset)
        self.validate = check_flag("validate", validate)
        self.writes_global_state = check_flag("global_state", global_state)  # False: env.global_state is None
        self.env_id_offset = check_env_id_offset(env_id_offset, self.num_envs)
        self.target = self._choose_target(target)
        memory.check_env_fits(self)  # a num_envs whose arrays would not fit is refused before any allocation
        self._needs_reset = True
        if self.step_phases:
            self._setup_declared()

    @classmethod
    def env_name(cls) -> str:
        """The env's name: ``name``, else the class name."""
        return cls.name or cls.__name__

    @classmethod
    def class_kernel(cls):
        """The class's one kernel (step and reset, :func:`.lifecycle.episode_kernel`), built once per class:
        every env of the class shares its compiled builds."""
        if "_kernel" not in cls.__dict__:
            cls._kernel = lifecycle.episode_kernel(cls.env_name(), cls.step_phases, cls.start_phases,
                                                   tuple(cls.metrics), cls.state_phases, cls.cuda_launch_bounds)
        return cls._kernel

    def _choose_target(self, target) -> str:
        natural = target_for(self.device)
        if target is None or target == natural:
            return natural
        if target == "cuda" and self.device.type == "cpu" and simulator_enabled():
            return "cuda"  # CUDA build on host memory: Numba's simulator (tests)
        raise ValueError(f"target={target!r} cannot run on device {self.device} "
                         "(the CUDA build runs on a CPU device only under NUMBA_ENABLE_CUDASIM=1)")

    # ---- what a declaring class may override -----------------------------------------------------

    def groups(self) -> "OrderedDict[str, Group] | dict[str, Group]":
        """The env's groups of agents, in agent order (see :class:`~.spaces.Group`)."""
        raise NotImplementedError(f"{type(self).__name__} must define groups(self)")

    def constants(self) -> dict:
        """The env's kernel constants ``{name: NumPy scalar}`` (``c.name`` in the phases)."""
        return {}

    def global_state_dim(self) -> int:
        """S, the width of the global state ``env.global_state`` [E, S] that ``state_phases`` write; called
        before any array exists (read ``self.params``). Default: the toolkit's default state's, sum over
        groups of agents x obs_dim. After construction ``env.global_state_dim`` is S."""
        return lifecycle.default_global_state_dim(OrderedDict(type(self).groups(self)))

    def field_sizes(self) -> dict[str, int]:
        """Named dims the env's fields may use beside ``"agents"``, ``"obs"`` and its params' attributes
        (e.g. sizes its world declares). Default: none."""
        return {}

    def tables(self) -> dict[str, np.ndarray]:
        """Read-only arrays without an env axis (lookup tables), copied to the device once (``s.name``)."""
        return {}

    def build_constants(self) -> dict[str, int]:
        """Module globals fixed for this env's build (:func:`~gpurl.kernels.freeze_constants`), e.g. sizes of
        small worlds; a build per distinct value set. Default: none."""
        return {}

    def check_actions(self, actions: torch.Tensor) -> None:
        """Extra checks of ``validate=True`` after the shape/dtype/range checks (raise to reject)."""

    # ---- declared envs: arrays, kernel, launches ---------------------------------------------------

    def _setup_declared(self) -> None:
        groups = OrderedDict(self.groups())
        num_agents = check_groups(groups, self.env_name())
        own_dim = type(self).global_state_dim is not KernelEnv.global_state_dim
        if own_dim != bool(type(self).state_phases):
            has, lacks = ("global_state_dim()", "state_phases") if own_dim else ("state_phases", "global_state_dim()")
            raise ValueError(f"{self.env_name()} declares {has} but no {lacks}: an env's own global state needs "
                             "both (or neither, for the default: the agents' observations)")
        self._setup_outputs(num_agents, groups)
        cls = type(self)
        declared = {**cls.state, **cls.scratch}
        for name in cls.metrics:
            declared.setdefault(name, Field("float32"))
        clash = sorted(set(declared) & set(lifecycle.TOOLKIT_ARRAYS))
        if clash:
            raise ValueError(f"{self.env_name()} declares {clash}: these names are the toolkit's own arrays")
        sizes = {"agents": num_agents, "obs": self.obs_dim, **self.field_sizes()}
        self._tensors = {name: f.allocate(f.shape(self, sizes, name), self.device, self.target)
                         for name, f in declared.items()}
        bad_metrics = [m for m in cls.metrics if self._tensors[m].shape != (self.num_envs,)
                       or self._tensors[m].dtype != torch.float32]
        if bad_metrics:
            raise ValueError(f"{self.env_name()}: metrics {bad_metrics} must be float32 fields of shape [num_envs]")
        # The metrics as rows of one [M, E] block, in name order: a trainer's bookkeeping reads them in one go.
        self._metric_rows = torch.zeros(len(cls.metrics), self.num_envs, device=self.device)
        for row, name in zip(self._metric_rows, sorted(cls.metrics)):
            self._tensors[name] = row
        for name, table in self.tables().items():
            self._tensors[name] = torch.as_tensor(np.ascontiguousarray(table), device=self.device)
        if not cls.state_phases:  # the default state's table: where each agent's observation goes
            self._tensors["global_state_layout"] = torch.as_tensor(lifecycle.global_state_layout(groups),
                                                                   device=self.device)
        self._tensors["episode"] = torch.zeros(self.num_envs, dtype=torch.int32, device=self.device)
        self._tensors["status"] = torch.zeros(self.num_envs, dtype=torch.uint8, device=self.device)
        self._tensors["restart"] = torch.zeros(self.num_envs, dtype=torch.uint8, device=self.device)
        state_type = state_dataclass(cls)
        self.state = state_type(**{name: self._tensors[name] for name in (*cls.state, "episode")})
        outputs = self._output_tensors(None)
        names = tuple(outputs) + tuple(n for n in self._tensors)
        self._arrays = struct_type(f"{cls.__name__}Arrays", names)(**{n: self._view(t) for n, t in {**outputs, **self._tensors}.items()})
        user_constants = self.constants()
        clash = sorted(set(user_constants) & set(lifecycle.TOOLKIT_CONSTANTS))
        if clash:
            raise ValueError(f"{self.env_name()}.constants() returns {clash}: these names are the toolkit's own")
        check_constant_types(user_constants, self.env_name())
        consts = {**user_constants, "seed": np.uint64(self.seed), "env_id_offset": np.int64(self.env_id_offset),
                  "autoreset": np.int32(self.autoreset), "launch": np.int32(lifecycle.STEP),
                  "write_global_state": np.int32(self.writes_global_state)}
        self._consts = struct_type(f"{cls.__name__}Constants", tuple(consts))(**consts)
        self._reset_consts = self._consts._replace(launch=np.int32(lifecycle.RESET))
        self.kernel = cls.class_kernel()
        fixed = {}
        if self.target == "cpu" and self.num_envs >= FIXED_AGENTS_MIN_ENVS and num_agents <= SMALL_WORLD_AGENTS:
            fixed[FIXED_AGENTS] = num_agents
        self._build_constants = freeze_constants({**fixed, **self.build_constants()})
        # A reset reads no actions; it passes a dummy of the dtype steps pass, so both share one compile.
        self._no_action_tensor = torch.zeros((1, 1, self.action_dims), dtype=self.action_dtype, device=self.device)
        self._no_actions = self._view(self._no_action_tensor)
        #: What launches the kernel, chosen here once (see gpurl.envs.launch_path): reset and step call it.
        self.launcher = self.choose_launcher()

    def choose_launcher(self):
        """The launcher of this env's kernel (:mod:`.launch_path`), chosen once when the env is built: by target
        (direct CPU launches, prepared CUDA launches, the simulator's dispatch). An env class whose kernel
        launches another way overrides it (tag_gridworld's CUDA C)."""
        return launch_path.choose_launcher(self)

    @property
    def launch_path(self) -> str:
        """How this env's kernel launches, in words (e.g. "cpu: direct launch (numba parallel)")."""
        return self.launcher.path

    def _rekey(self, mask: torch.Tensor) -> None:
        self._consts = self._consts._replace(seed=np.uint64(self.seed))
        self._reset_consts = self._reset_consts._replace(seed=np.uint64(self.seed))
        self.launcher.constants_changed()
        self.state.episode.masked_fill_(mask, 0)  # the next reset draws episode 0 of the new seed

    def _output_tensors(self, out: "StepOutputs | None") -> dict[str, torch.Tensor]:
        """The tensors a step writes, in the kernel's argument order: ``out``'s, the env's own where ``out``
        is None or leaves a global state None (with ``global_state=False``: [E, 0] placeholders)."""
        own = dict(obs=self.obs, final_obs=self.final_obs, reward=self.reward, terminated=self.terminated,
                   truncated=self.truncated, global_state=self._state_buffers[0],
                   final_global_state=self._state_buffers[1])
        if out is not None:
            own.update((k, v) for k, v in out._asdict().items() if v is not None)
        return own

    def step_metrics(self) -> dict[str, torch.Tensor]:
        """Per-env event counts of the last step, float32 [num_envs] on the device (no host sync): the
        declared ``metrics``, 0 for an env that has ended (autoreset=False). Trainers sum them over episodes
        (e.g. Tag's ``tags``). Views rewritten by the next step."""
        return {name: self._tensors[name] for name in type(self).metrics} if self.step_phases else {}

    def step_metric_rows(self) -> torch.Tensor:
        """:meth:`step_metrics` as one float32 [M, num_envs] tensor, a row per metric in name order (the
        same memory: ``step_metrics()[name]`` is a row of it)."""
        return self._metric_rows if self.step_phases else torch.zeros(0, self.num_envs, device=self.device)

    def kernel_source(self, target: str | None = None) -> str:
        """The source gpurl generates around this env's phases for ``target`` ("cpu" or "cuda"; default: the
        env's own), with the env's build constants (:meth:`gpurl.kernels.EnvKernel.source`)."""
        return self.kernel.source(target or self.target, self._build_constants)

    def kernel_arguments(self) -> tuple:
        """``(s, c, actions)`` of the env's kernel, for tools that compile it alone: ``s`` and ``c`` as a step
        passes them, ``actions`` the reset's dummy (``env.action_dtype`` [1, 1, action_dims]), enough to type
        the kernel; a run (``env.kernel.run_python``) needs real actions [num_envs, num_agents, action_dims]."""
        return self._arrays, self._consts, self._no_actions

    # ---- set-up helpers ----------------------------------------------------------------------------

    def _setup_outputs(self, num_agents: int, groups: "OrderedDict[str, Group]") -> None:
        """Allocate the obs/reward/done buffers and the action bounds for ``groups``."""
        self.num_agents = num_agents
        self.groups = groups
        self.obs_dim = max(g.obs_dim for g in groups.values())
        self.action_space = OrderedDict((name, g.action_space) for name, g in groups.items())
        self.action_dims, self._discrete = action_layout(groups, self.env_name())
        high = np.zeros((num_agents, self.action_dims), dtype=np.int64)
        if self._discrete:
            for g in groups.values():
                high[g.agents] = action_bounds(g.action_space)[1]
        self._action_high = torch.as_tensor(high, device=self.device)
        self._placed = self._action_high.device  # self.device with its index ("cuda" -> "cuda:0"): tensors' own
        E, N, D = self.num_envs, num_agents, self.action_dims
        self._action_dtypes = (torch.int32, torch.int64) if self._discrete else (torch.float32,)
        self._action_shapes = ((E, N, D),) + (((E, N),) if self._discrete and D == 1 else ())
        self._action_high_min = int(high.min()) if high.size else 0
        self._int64_actions: torch.Tensor | None = None  # int32 steps' widened copy (see _widened)
        E, N, D = self.num_envs, num_agents, self.obs_dim
        zeros = lambda *shape, dtype=torch.float32: torch.zeros(shape, dtype=dtype, device=self.device)  # noqa: E731
        self.obs = zeros(E, N, D)
        self.final_obs = zeros(E, N, D)
        self.reward = zeros(E, N)
        self.terminated = zeros(E, dtype=torch.bool)
        self.truncated = zeros(E, dtype=torch.bool)
        declared_state = bool(type(self).state_phases)
        S = (check_state_dim(self.global_state_dim(), self.env_name()) if declared_state
             else lifecycle.default_global_state_dim(groups))
        self.global_state_dim = S
        if self.writes_global_state:
            self.global_state = zeros(E, S)
            self.final_global_state = zeros(E, S)
            self._state_buffers = (self.global_state, self.final_global_state)
        else:  # nothing to write: the kernels get [E, 0] arrays (the types of [E, S]: the same build)
            self.global_state = self.final_global_state = None
            self._state_buffers = (zeros(E, 0), zeros(E, 0))
        self._reset_all = torch.ones(E, dtype=torch.bool, device=self.device)
        self._info = self._step_info(self.final_obs, self.final_global_state)

    def _step_info(self, final_obs: torch.Tensor, final_global_state: torch.Tensor | None) -> dict:
        if not self.autoreset:
            return {}
        if final_global_state is None:  # global_state=False
            return {"final_obs": final_obs}
        return {"final_obs": final_obs, "final_global_state": final_global_state}

    @property
    def action_dtype(self) -> torch.dtype:
        """What ``step`` takes: int64 actions for Discrete/MultiDiscrete groups, float32 for Box ones."""
        return torch.int64 if self._discrete else torch.float32

    def _view(self, tensor: torch.Tensor):
        return kernel_view(tensor, self.target)

    def _stream(self):
        return current_stream(self.device)

    # ---- public API ------------------------------------------------------------------------------

    def reset(self, seed=None, mask=None) -> torch.Tensor:
        """Reset every env (or those where ``mask`` [num_envs] bool is true); return the whole obs.

        A new ``seed`` becomes the env's seed (one per env object: later autoresets of every env draw
        from it); the envs being reset restart their episode counters, so a full ``reset(seed=s)``
        reproduces a fresh ``make(..., seed=s)`` exactly.
        """
        if seed is not None:
            seed = check_seed(seed)
        mask = self._reset_all if mask is None else self._check_mask(mask)
        if self._needs_reset and mask is not self._reset_all:
            raise RuntimeError("the first reset() must reset every env (call reset() without mask)")
        if seed is not None:
            self.seed = seed
            self._rekey(mask)
        try:
            self._tensors["restart"].copy_(mask)  # the envs the reset launch restarts
            self.launcher.reset(self._reset_consts)
        except (KernelTypingError, KernelIndexError) as err:  # an author's mistake, found at a first launch
            raise raised_here(err)
        self._needs_reset = False
        return self.obs

    def step(self, actions: torch.Tensor, out: StepOutputs | None = None):
        """Advance every env one step. Returns ``(obs, reward, terminated, truncated, info)``.

        ``actions``: [num_envs, num_agents, action_dims] int32/int64 (discrete) or float32 (Box) on
        ``env.device``; int32 ones are copied into an int64 buffer of the env's (kernels read int64). Their
        type, dtype, shape, device and layout (and those of ``out``) are checked on every call: host
        metadata, no synchronisation. With ``validate=True`` the values are range-checked too, before
        anything changes; on CUDA that check reads one flag back to the host, so training loops pass
        ``validate=False``: then an out-of-range discrete action acts as the nearest valid one (clamped
        into ``0..n-1``, :func:`gpurl.kernels.clamp_action`; docs/specs/API.md, "Errors").

        ``out``: the kernels write this step's results straight into these tensors instead of the env's
        own buffers (a trainer passes slot t of its rollout storage: no copy per step), and the returned
        tuple holds them. The env's own ``obs`` buffer is then not updated; ``env.global_state`` neither, when
        ``out.global_state`` is given (the returned ``info["final_global_state"]`` is ``out``'s when given).
        An env made with ``global_state=False`` refuses ``out.global_state`` / ``out.final_global_state``
        (ValueError, before anything changes).
        """
        if self._needs_reset:
            raise RuntimeError("call env.reset() before the first env.step()")
        actions = self._action_tensor(actions)
        if out is not None:
            self._check_outputs(out)
        if self.validate:
            self._check_action_values(actions)
        try:
            self.launcher.step(self._consts, actions, out)
        except (KernelTypingError, KernelIndexError) as err:
            raise raised_here(err)
        if out is None:
            return self.obs, self.reward, self.terminated, self.truncated, self._info
        final_global_state = self.final_global_state if out.final_global_state is None else out.final_global_state
        return out.obs, out.reward, out.terminated, out.truncated, self._step_info(out.final_obs, final_global_state)
