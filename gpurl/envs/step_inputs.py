"""What ``env.step`` takes: the checks of its actions and of the caller's output tensors (``StepOutputs``).

Shape, dtype, device and layout are host metadata: checked on every call whatever ``validate`` says (a
wrong shape would make a kernel read or write outside an array). Only the value checks, which read the
device, are ``validate=True``'s. Every check runs before anything changes.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from .checks import check_buffer, refuse_state_outputs


class StepOutputs(NamedTuple):
    """Where ``env.step(actions, out=...)`` writes: caller-owned tensors, e.g. slot t of a rollout buffer.

    Every row of ``obs``, ``reward``, ``terminated``, ``truncated`` and ``global_state`` is written by every
    step of an env that is not frozen (``autoreset=False`` and finished); ``final_obs`` and
    ``final_global_state`` only in rows of envs that ended in this step (with ``autoreset=True``).
    ``global_state`` / ``final_global_state`` None (the default): the kernels write the env's own
    ``env.global_state`` / ``env.final_global_state`` (docs/specs/global_state.md). An env made with
    ``global_state=False`` writes neither: both must be None.
    """

    obs: torch.Tensor         # float32 [E, N, obs_dim]
    reward: torch.Tensor      # float32 [E, N]
    terminated: torch.Tensor  # bool [E]
    truncated: torch.Tensor   # bool [E]
    final_obs: torch.Tensor   # float32 [E, N, obs_dim]
    global_state: torch.Tensor | None = None        # float32 [E, S], S = env.global_state_dim
    final_global_state: torch.Tensor | None = None  # float32 [E, S]


class StepInputChecks:
    """The checks of :class:`~.base.KernelEnv`'s step inputs (a mixin: it reads the env's layout, set up by
    ``KernelEnv._setup_outputs``: ``_action_dtypes``, ``_action_shapes``, ``_action_high`` and the rest)."""

    def _check_outputs(self, out) -> None:
        if not isinstance(out, StepOutputs):
            raise TypeError(f"out must be a gpurl.envs.StepOutputs, got {type(out).__name__}")
        if not self.writes_global_state:
            refuse_state_outputs(out, self.env_name())
        E, N, D, S = self.num_envs, self.num_agents, self.obs_dim, self.global_state_dim
        expected = StepOutputs(obs=((E, N, D), torch.float32), reward=((E, N), torch.float32),
                               terminated=((E,), torch.bool), truncated=((E,), torch.bool),
                               final_obs=((E, N, D), torch.float32), global_state=((E, S), torch.float32),
                               final_global_state=((E, S), torch.float32))
        for name, tensor, (shape, dtype) in zip(StepOutputs._fields, out, expected):
            if tensor is None and name in ("global_state", "final_global_state"):
                continue  # the env's own buffer
            check_buffer(tensor, f"out.{name}", shape, (dtype,), self.device, self._placed, in_place=True)

    def _check_mask(self, mask) -> torch.Tensor:
        check_buffer(mask, "mask", (self.num_envs,), (torch.bool,), self.device, self._placed)
        return mask.contiguous()

    def _action_tensor(self, actions) -> torch.Tensor:
        """``actions`` as the kernels read them ([E, N, D], contiguous), after the metadata checks."""
        if (not isinstance(actions, torch.Tensor) or actions.dtype not in self._action_dtypes
                or actions.shape not in self._action_shapes or actions.device != self._placed
                or actions.layout != torch.strided):
            self._raise_bad_actions(actions)
        if actions.dim() == 2:
            actions = actions.unsqueeze(-1)
        if actions.dtype == torch.int32:
            return self._widened(actions)
        return actions if actions.is_contiguous() else actions.contiguous()

    def _widened(self, actions: torch.Tensor) -> torch.Tensor:
        """int32 ``actions`` [E, N, D] copied into the env's int64 buffer: one build per env, and no int32
        clamp for sm_90's ptxas 13.0 to get wrong (docs/custom_env.md, section 14)."""
        if self._int64_actions is None:
            self._int64_actions = torch.empty(self._action_shapes[0], dtype=torch.int64, device=self._placed)
        return self._int64_actions.copy_(actions)

    def _raise_bad_actions(self, actions) -> None:
        shapes = " or ".join(str(tuple(s)) for s in self._action_shapes)
        check_buffer(actions, "actions", self._action_shapes[0], self._action_dtypes, self.device, self._placed,
                     shapes=self._action_shapes,
                     shape_text=f"{shapes} [num_envs, num_agents, action_dims]")
        raise AssertionError("unreachable: check_buffer accepted actions that _action_tensor rejected")

    def _check_action_values(self, actions: torch.Tensor) -> None:
        """``validate=True``: every discrete action inside its space (one device read), then the env's
        :meth:`check_actions`."""
        # One reduction for the usual case, every action inside the smallest bound (far cheaper than the
        # per-agent comparison); that comparison only when it fails, to name the first bad action.
        if self._discrete and not self._inside_smallest_bound(actions):
            bad = (actions < 0) | (actions >= self._action_high)
            if bool(bad.any()):  # host-ok: validate=True is the documented opt-in check
                e, i, d = (int(v) for v in bad.nonzero()[0])  # host-ok: only to name the bad action, then raise
                raise ValueError(f"actions[{e}, {i}, {d}] = {int(actions[e, i, d])} is out of range "
                                 f"[0, {int(self._action_high[i, d])}) for agent {i}")
        self.check_actions(actions)

    def _inside_smallest_bound(self, actions: torch.Tensor) -> bool:
        lo, hi = torch.stack(torch.aminmax(actions)).tolist()  # host-ok: validate=True, one read
        return lo >= 0 and hi < self._action_high_min
