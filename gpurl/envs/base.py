"""What every gpurl kernel env shares: argument checks, output buffers, reset/step plumbing.

Subclasses allocate their state, build their kernel arguments once, and implement ``_launch_reset``
and ``_launch_step``. Everything here runs before a kernel launch, so an error never leaves the env
half-updated, and nothing here reads device memory unless ``validate=True`` needs to (the action
range check; see ``step``).
"""
from __future__ import annotations

import numbers
from collections import OrderedDict
from typing import NamedTuple

import numpy as np
import torch

from ..kernels.interop import current_stream, kernel_view, simulator_enabled, target_for
from .spaces import Group, action_bounds


def check_num_envs(num_envs) -> int:
    if isinstance(num_envs, bool) or not isinstance(num_envs, numbers.Integral):
        raise TypeError(f"num_envs must be an int >= 1, got {type(num_envs).__name__} {num_envs!r}")
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    return int(num_envs)


def check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed must be an int in [0, 2**64), got {type(seed).__name__} {seed!r}")
    if not 0 <= seed < 2**64:
        raise ValueError(f"seed must be in [0, 2**64), got {seed}")
    return int(seed)


class StepOutputs(NamedTuple):
    """Where ``env.step(actions, out=...)`` writes: caller-owned tensors, e.g. slot t of a rollout buffer.

    Every row of ``obs``, ``reward``, ``terminated`` and ``truncated`` is written by every step of an env
    that is not frozen (``autoreset=False`` and finished); ``final_obs`` only in rows of envs that ended
    in this step (with ``autoreset=True``).
    """

    obs: torch.Tensor         # float32 [E, N, obs_dim]
    reward: torch.Tensor      # float32 [E, N]
    terminated: torch.Tensor  # bool [E]
    truncated: torch.Tensor   # bool [E]
    final_obs: torch.Tensor   # float32 [E, N, obs_dim]


class KernelEnv:
    """Base class: ``num_envs`` copies of a multi-agent env stepped by device kernels.

    Returned tensors (obs, reward, terminated, truncated, info["final_obs"]) are views of buffers
    allocated once and rewritten in place by the next ``step``/``reset``: copy what you keep.
    """

    def __init__(self, *, num_envs, device, seed, autoreset, validate=True, env_id_offset=0, target=None):
        self.num_envs = check_num_envs(num_envs)
        self.device = torch.device(device)
        self.seed = check_seed(seed)
        self.autoreset = bool(autoreset)
        self.validate = bool(validate)
        if isinstance(env_id_offset, bool) or not isinstance(env_id_offset, numbers.Integral) or env_id_offset < 0:
            raise ValueError(f"env_id_offset must be an int >= 0, got {env_id_offset!r}")
        self.env_id_offset = int(env_id_offset)
        self.target = self._choose_target(target)
        self._needs_reset = True

    def _choose_target(self, target) -> str:
        natural = target_for(self.device)
        if target is None or target == natural:
            return natural
        if target == "cuda" and self.device.type == "cpu" and simulator_enabled():
            return "cuda"  # CUDA build on host memory: Numba's simulator (tests)
        raise ValueError(f"target={target!r} cannot run on device {self.device} "
                         "(the CUDA build runs on a CPU device only under NUMBA_ENABLE_CUDASIM=1)")

    # ---- set-up helpers for subclasses ---------------------------------------------------------

    def _setup_outputs(self, num_agents: int, groups: "OrderedDict[str, Group]") -> None:
        """Allocate the obs/reward/done buffers and the action bounds for ``groups``."""
        self.num_agents = num_agents
        self.groups = groups
        self.obs_dim = max(g.obs_dim for g in groups.values())
        self.action_space = OrderedDict((name, g.action_space) for name, g in groups.items())
        dims = {action_bounds(g.action_space)[0] for g in groups.values()}
        if len(dims) != 1:
            raise ValueError(f"all groups must have the same number of action dims, got {dims}")
        self.action_dims = dims.pop()
        self._discrete = all(action_bounds(g.action_space)[1] is not None for g in groups.values())
        high = np.zeros((num_agents, self.action_dims), dtype=np.int64)
        if self._discrete:
            for g in groups.values():
                high[g.agents] = action_bounds(g.action_space)[1]
        self._action_high = torch.as_tensor(high, device=self.device)
        self._action_high_min = int(high.min()) if high.size else 0
        E, N, D = self.num_envs, num_agents, self.obs_dim
        zeros = lambda *shape, dtype=torch.float32: torch.zeros(shape, dtype=dtype, device=self.device)  # noqa: E731
        self.obs = zeros(E, N, D)
        self.final_obs = zeros(E, N, D)
        self.reward = zeros(E, N)
        self.terminated = zeros(E, dtype=torch.bool)
        self.truncated = zeros(E, dtype=torch.bool)
        self._reset_all = torch.ones(E, dtype=torch.bool, device=self.device)
        self._info = {"final_obs": self.final_obs} if self.autoreset else {}

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
        self._launch_reset(mask)
        self._needs_reset = False
        return self.obs

    def step(self, actions: torch.Tensor, out: StepOutputs | None = None):
        """Advance every env one step. Returns ``(obs, reward, terminated, truncated, info)``.

        ``actions``: [num_envs, num_agents, action_dims] int32/int64 (discrete) or float32 (Box) on
        ``env.device``. With ``validate=True`` the values are range-checked before anything changes;
        on CUDA that check reads one flag back to the host, so training loops pass ``validate=False``.

        ``out``: the kernels write this step's results straight into these tensors instead of the env's
        own buffers (a trainer passes slot t of its rollout storage: no copy per step), and the returned
        tuple holds them. The env's own ``obs`` buffer is then not updated.
        """
        if self._needs_reset:
            raise RuntimeError("call env.reset() before the first env.step()")
        actions = self._check_actions(actions) if self.validate else self._as_action_tensor(actions)
        if out is not None and self.validate:
            self._check_outputs(out)
        self._launch_step(actions, out)
        if out is None:
            return self.obs, self.reward, self.terminated, self.truncated, self._info
        return out.obs, out.reward, out.terminated, out.truncated, ({"final_obs": out.final_obs}
                                                                    if self.autoreset else {})

    def step_metrics(self) -> dict[str, torch.Tensor]:
        """Per-env event counts of the last step, float32 [num_envs] on the device (no host sync).

        Trainers sum them over episodes (e.g. Tag's ``tags``); the base env has none.
        """
        return {}

    def _check_outputs(self, out) -> None:
        if not isinstance(out, StepOutputs):
            raise TypeError(f"out must be a gpurl.envs.StepOutputs, got {type(out).__name__}")
        E, N, D = self.num_envs, self.num_agents, self.obs_dim
        expected = StepOutputs(obs=((E, N, D), torch.float32), reward=((E, N), torch.float32),
                               terminated=((E,), torch.bool), truncated=((E,), torch.bool),
                               final_obs=((E, N, D), torch.float32))
        for name, tensor, (shape, dtype) in zip(StepOutputs._fields, out, expected):
            if not isinstance(tensor, torch.Tensor):
                raise TypeError(f"out.{name} must be a torch.Tensor, got {type(tensor).__name__}")
            if tuple(tensor.shape) != shape or tensor.dtype != dtype:
                raise ValueError(f"out.{name} must be {dtype} of shape {shape}, "
                                 f"got {tensor.dtype} of shape {tuple(tensor.shape)}")
            if tensor.device != self.device:
                raise ValueError(f"out.{name} must be on {self.device}, got {tensor.device}")
            if not tensor.is_contiguous():
                raise ValueError(f"out.{name} must be contiguous (kernels write it in place)")

    # ---- checks ----------------------------------------------------------------------------------

    def _check_mask(self, mask) -> torch.Tensor:
        if not isinstance(mask, torch.Tensor):
            raise TypeError(f"mask must be a torch.Tensor of bool [{self.num_envs}], got {type(mask).__name__}")
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must have dtype torch.bool, got {mask.dtype}")
        if tuple(mask.shape) != (self.num_envs,):
            raise ValueError(f"mask must have shape ({self.num_envs},), got {tuple(mask.shape)}")
        if mask.device != self.device:
            raise ValueError(f"mask must be on {self.device}, got {mask.device}")
        return mask.contiguous()

    def _as_action_tensor(self, actions: torch.Tensor) -> torch.Tensor:
        if actions.dim() == 2 and self.action_dims == 1:
            actions = actions.unsqueeze(-1)
        return actions if actions.is_contiguous() else actions.contiguous()

    def _check_actions(self, actions) -> torch.Tensor:
        E, N, D = self.num_envs, self.num_agents, self.action_dims
        if not isinstance(actions, torch.Tensor):
            raise TypeError(f"actions must be a torch.Tensor, got {type(actions).__name__}")
        if actions.device != self.device:
            raise ValueError(f"actions must be on {self.device}, got {actions.device}")
        allowed = (torch.int32, torch.int64) if self._discrete else (torch.float32,)
        if actions.dtype not in allowed:
            raise TypeError(f"actions must have dtype {' or '.join(map(str, allowed))}, got {actions.dtype}")
        shapes = [(E, N, D)] + ([(E, N)] if self._discrete and D == 1 else [])
        if tuple(actions.shape) not in shapes:
            expected = " or ".join(str(s) for s in shapes)
            raise ValueError(f"actions must have shape {expected} [num_envs, num_agents, action_dims], "
                             f"got {tuple(actions.shape)}")
        actions = self._as_action_tensor(actions)
        # One reduction for the usual case, every action inside the smallest bound (far cheaper than the
        # per-agent comparison); that comparison only when it fails, to name the first bad action.
        if self._discrete and not self._inside_smallest_bound(actions):
            bad = (actions < 0) | (actions >= self._action_high)
            if bool(bad.any()):  # host-ok: validate=True is the documented opt-in check
                e, i, d = (int(v) for v in bad.nonzero()[0])
                raise ValueError(f"actions[{e}, {i}, {d}] = {int(actions[e, i, d])} is out of range "
                                 f"[0, {int(self._action_high[i, d])}) for agent {i}")
        return actions

    def _inside_smallest_bound(self, actions: torch.Tensor) -> bool:
        lo, hi = torch.stack(torch.aminmax(actions)).tolist()  # host-ok: validate=True, one read
        return lo >= 0 and hi < self._action_high_min

    # ---- for subclasses --------------------------------------------------------------------------

    def _rekey(self, mask: torch.Tensor) -> None:
        raise NotImplementedError

    def _launch_reset(self, mask: torch.Tensor) -> None:
        raise NotImplementedError

    def _launch_step(self, actions: torch.Tensor, out: StepOutputs | None) -> None:
        raise NotImplementedError
