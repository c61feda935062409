"""Rollout storage: every buffer of one iteration, allocated once on the device, ``[T, E, N, ...]``.

The env writes each step straight into slot t (``step_outputs(t)``); the algorithm's actor writes the
actions and the fields it declared (:class:`gpurl.storage.Field`: log-probs, values, ...) beside them.
With a frame history (``history`` = frame_stack - 1 > 0) the observation buffer keeps the last
``history`` observations of the previous iteration in front, so a policy input at t can look back
across the iteration boundary.
"""
from __future__ import annotations

import math

import torch

from ..envs.base import StepOutputs
from ..envs.memory import require_memory
from .fields import Field
from .frames import stack_frames

#: Buffers every storage has; an algorithm's fields may not reuse these names.
ENV_FIELDS = ("obs", "starts", "final_obs", "reward", "terminated", "truncated", "actions")
#: The env's global state, kept when an algorithm reads it (``state_dim`` > 0: MAPPO's critic).
STATE_FIELDS = ("global_state", "final_global_state")


def rollout_bytes(steps: int, num_envs: int, num_agents: int, obs_dim: int, action_dims: int,
                  action_dtype: torch.dtype, history: int, fields: dict[str, Field] | None = None,
                  state_dim: int = 0) -> int:
    """Bytes of every buffer :class:`RolloutStorage` allocates for these sizes (checked before allocating)."""
    T, E, N, D, H = steps, num_envs, num_agents, obs_dim, history
    total = (H + T + 1) * E * (N * D * 4 + 1)  # obs float32, starts bool
    total += T * E * N * D * 4 + T * E * N * 4 + 2 * T * E  # final_obs, reward, terminated + truncated
    total += T * E * N * action_dims * action_dtype.itemsize
    total += (2 * T + 1) * E * state_dim * 4  # global_state, final_global_state
    for f in (fields or {}).values():
        rows = E * N if f.per_agent else E
        total += (T + f.extra_steps) * rows * math.prod(f.shape) * f.dtype.itemsize
    return total


class RolloutStorage:
    """Buffers for T steps of E envs x N agents.

    - ``obs`` float32 [H + T + 1, E, N, D]: the observation the policy acts on at step t is slot H + t;
      slot H + T is the one after the last step (bootstrap value). H = ``history``.
    - ``starts`` bool [H + T + 1, E]: that slot's observation is the first of its episode.
    - ``final_obs`` float32 [T, E, N, D]: last observation of an episode that ended at step t (rows of
      other envs are stale).
    - ``reward`` float32 [T, E, N]; ``terminated``/``truncated`` bool [T, E]; ``actions`` [T, E, N, A].
    - one attribute per field of ``fields`` (an algorithm's declaration), [T + extra, E, (N,) *shape];
      a ``carried`` field's slot T moves to slot 0 at :meth:`roll_over` (a recurrent state).
    - with ``state_dim`` S > 0 (an algorithm that reads the env's global state): ``global_state``
      float32 [T + 1, E, S] (slot t: the state the actor sees at step t) and ``final_global_state``
      [T, E, S] (the last state of an episode that ended at step t; rows of other envs are stale).
    """

    def __init__(self, steps: int, num_envs: int, num_agents: int, obs_dim: int, action_dims: int,
                 action_dtype: torch.dtype, history: int, device: torch.device,
                 fields: dict[str, Field] | None = None, state_dim: int = 0):
        T, E, N, D, H = steps, num_envs, num_agents, obs_dim, history
        needed = rollout_bytes(T, E, N, D, action_dims, action_dtype, H, fields, state_dim)
        require_memory(needed, device, f"the rollout storage of num_envs={E} x rollout_len={T} steps "
                       f"({N} agents, obs {D})", "lower num_envs (--num-envs) or rollout_len (--rollout-len)")
        self.steps, self.history = T, H
        f32 = dict(dtype=torch.float32, device=device)
        flag = dict(dtype=torch.bool, device=device)
        self.obs = torch.zeros(H + T + 1, E, N, D, **f32)
        self.starts = torch.zeros(H + T + 1, E, **flag)
        self.final_obs = torch.zeros(T, E, N, D, **f32)
        self.reward = torch.zeros(T, E, N, **f32)
        self.terminated = torch.zeros(T, E, **flag)
        self.truncated = torch.zeros(T, E, **flag)
        self.actions = torch.zeros(T, E, N, action_dims, dtype=action_dtype, device=device)
        self.state_dim = state_dim
        self.global_state = torch.zeros(T + 1, E, state_dim, **f32)
        self.final_global_state = torch.zeros(T, E, state_dim, **f32)
        self.fields = dict(fields or {})
        for name, f in self.fields.items():
            if name in ENV_FIELDS + STATE_FIELDS or name.startswith("_") or hasattr(self, name):
                raise ValueError(f"an algorithm's rollout field may not be called {name!r} "
                                 f"(taken: {ENV_FIELDS + STATE_FIELDS})")
            if f.carried and f.extra_steps < 1:
                raise ValueError(f"rollout field {name!r} is carried: it needs extra_steps >= 1 (slot T)")
            rows = (E, N) if f.per_agent else (E,)
            setattr(self, name, torch.zeros(T + f.extra_steps, *rows, *f.shape, dtype=f.dtype, device=device))

    def buffers(self) -> dict[str, torch.Tensor]:
        """Every buffer by name (envs on dim 1): what a central learner gathers from the actors."""
        state = STATE_FIELDS if self.state_dim else ()
        return {name: getattr(self, name) for name in (*ENV_FIELDS, *state, *self.fields)}

    def start(self, first_obs: torch.Tensor, first_state: torch.Tensor | None = None) -> None:
        """Begin from freshly reset envs: ``first_obs`` [E, N, D] is every env's first observation,
        ``first_state`` [E, S] their global state (needed when ``state_dim`` > 0)."""
        H = self.history
        self.obs[:H].zero_()
        self.obs[H].copy_(first_obs)
        self.starts[:H + 1] = True
        if self.state_dim:
            self.global_state[0].copy_(first_state)
        for name, f in self.fields.items():
            if f.carried:
                getattr(self, name)[0].zero_()

    def step_outputs(self, t: int) -> StepOutputs:
        """Where the env's step t writes: next observation into slot H + t + 1, the rest into slot t."""
        state = dict(global_state=self.global_state[t + 1], final_global_state=self.final_global_state[t])
        return StepOutputs(obs=self.obs[self.history + t + 1], reward=self.reward[t],
                           terminated=self.terminated[t], truncated=self.truncated[t],
                           final_obs=self.final_obs[t], **(state if self.state_dim else {}))

    def mark_starts(self, t: int) -> None:
        """After step t: the next observation starts an episode where step t ended one."""
        torch.logical_or(self.terminated[t], self.truncated[t], out=self.starts[self.history + t + 1])

    def roll_over(self) -> None:
        """Carry the last H + 1 observations, the global state after the last step and the carried
        fields' slot T to the front for the next iteration."""
        T, H = self.steps, self.history
        # clone: with T < H + 1 the two ranges overlap.
        self.obs[:H + 1] = self.obs[T:T + H + 1].clone()
        self.starts[:H + 1] = self.starts[T:T + H + 1].clone()
        if self.state_dim:
            self.global_state[0].copy_(self.global_state[T])
        for name in self.carried():
            buffer = getattr(self, name)
            buffer[0].copy_(buffer[T])

    def carried(self) -> list[str]:
        """The fields whose slot 0 continues the previous iteration (saved in checkpoints)."""
        return [name for name, f in self.fields.items() if f.carried]

    # ---- policy inputs ---------------------------------------------------------------------------

    def policy_input(self, t0: int, t1: int, agents: slice, obs_dim: int) -> torch.Tensor:
        """Inputs of steps t0..t1-1 for ``agents``: float32 [t1 - t0, E, n, obs_dim * (H + 1)].

        Frame h (h = 0 the current one) is the observation h steps back, zeroed when an episode start
        lies between it and the current one (it belongs to an earlier episode).
        """
        return stack_frames(*self.frame_views(t0, t1, agents, obs_dim))

    def frame_views(self, t0: int, t1: int, agents: slice, obs_dim: int) -> tuple[tuple, tuple]:
        """``(frames, starts)`` of :meth:`policy_input`, as views of the buffers (no copy, no kernel): what
        :func:`~gpurl.storage.frames.stack_frames` makes the input of (a compiled acting step, inside its
        region). frames: [t1 - t0, E, n, obs_dim] each, the current first; starts: [t1 - t0, E] each."""
        H = self.history
        frames = tuple(self.obs[H + t0 - h:H + t1 - h, :, agents, :obs_dim] for h in range(H + 1))
        starts = tuple(self.starts[H + t0 - h + 1:H + t1 - h + 1] for h in range(1, H + 1))
        return frames, starts

    def final_input(self, t: torch.Tensor, e: torch.Tensor, agents: slice, obs_dim: int) -> torch.Tensor:
        """Inputs at the final observation of the episodes that ended at (t[i], e[i]): [len(t), n, in_dim].

        The final observation plays the part of slot H + t + 1 of its own episode; older frames come
        from the observation buffer, zeroed across an earlier episode start.
        """
        H = self.history
        frames = [self.final_obs[t, e][:, agents, :obs_dim]]
        valid = None
        for h in range(1, H + 1):
            slot = H + t + 1 - h
            if h > 1:
                start_between = self.starts[slot + 1, e]
                valid = ~start_between if valid is None else valid & ~start_between
            frame = self.obs[slot, e][:, agents, :obs_dim]
            frames.append(frame if valid is None else frame * valid[:, None, None])
        return frames[0] if H == 0 else torch.cat(frames, -1)
