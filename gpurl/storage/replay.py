"""Replay buffer on the device: a ring of transition slots ``[capacity, E, ...]`` filled from the rollout
storage without a host sync, sampled uniformly over (slot, env) transitions.

A transition of env e at step t holds, for all N agents, the policy input the actor saw, the actions, the
rewards, the input after the step and whether the episode terminated there (the TD target bootstraps
unless it did; a truncation bootstraps). Where step t ended an episode (autoreset), the next input is
built from the env's final observation, never the first observation of the next episode. With a global
state (QMIX's mixer), the state before and after the step travel the same way.

The write position advances by the rollout length every iteration, a number the host knows: filling and
sampling never read the device. Sampling draws slot and env indices from the counter RNG keyed by the run's
seed, a draw number and the row, on the device (``LearnContext.batches.replay_rows``:
:class:`gpurl.multigpu.minibatches.LearnerBatches`), so the draws are reproducible from the draw number alone
and every update's are drawn at once; each update gathers its own rows with :func:`gather_rows` inside its
compiled region.
"""
from __future__ import annotations

import torch

from ..envs.memory import format_bytes, require_memory
from .rollout import RolloutStorage

#: The buffers of a replay buffer, in checkpoint order.
REPLAY_FIELDS = ("inputs", "actions", "reward", "next_inputs", "terminated", "state", "next_state")


def transition_bytes(num_agents: int, input_dim: int, action_dims: int, action_dtype: torch.dtype,
                     state_dim: int = 0) -> int:
    """Bytes one env-step transition (all ``num_agents`` agents) takes in a :class:`ReplayBuffer`."""
    N = num_agents
    return (2 * N * input_dim * 4  # inputs, next_inputs float32
            + N * action_dims * action_dtype.itemsize
            + N * 4  # reward float32
            + 1  # terminated bool
            + 2 * state_dim * 4)  # state, next_state float32


class ReplayBuffer:
    """A ring of ``capacity`` rollout steps of E envs x N agents on ``device``: ``capacity * E`` transitions.

    - ``inputs``, ``next_inputs`` float32 [C, E, N, input_dim]: the policy input before and after the step;
    - ``actions`` [C, E, N, action_dims] (the env's action dtype); ``reward`` float32 [C, E, N];
    - ``terminated`` bool [C, E]: the episode terminated at this step (no bootstrap);
    - ``state``, ``next_state`` float32 [C, E, state_dim] (state_dim 0: no global state).

    ``position`` is the next slot written, ``size`` the slots holding transitions (at most ``capacity``).
    """

    def __init__(self, capacity: int, num_envs: int, num_agents: int, input_dim: int, action_dims: int,
                 action_dtype: torch.dtype, device: torch.device, state_dim: int = 0):
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"replay capacity must be a positive int (rollout steps kept per env), "
                             f"got {capacity!r}")
        per_slot = num_envs * transition_bytes(num_agents, input_dim, action_dims, action_dtype, state_dim)
        require_memory(capacity * per_slot, device,
                       f"a replay buffer of capacity={capacity} steps x num_envs={num_envs} "
                       f"({format_bytes(per_slot // max(num_envs, 1))} per transition)",
                       "lower the replay capacity (--replay-capacity) or num_envs (--num-envs)")
        C, E, N = capacity, num_envs, num_agents
        f32 = dict(dtype=torch.float32, device=device)
        self.capacity, self.num_envs = C, E
        self.inputs = torch.zeros(C, E, N, input_dim, **f32)
        self.next_inputs = torch.zeros(C, E, N, input_dim, **f32)
        self.actions = torch.zeros(C, E, N, action_dims, dtype=action_dtype, device=device)
        self.reward = torch.zeros(C, E, N, **f32)
        self.terminated = torch.zeros(C, E, dtype=torch.bool, device=device)
        self.state = torch.zeros(C, E, state_dim, **f32)
        self.next_state = torch.zeros(C, E, state_dim, **f32)
        self.position = 0
        self.size = 0
        #: int64 [2]: (position, size) on the device, for sampling without a host value in the graph
        self.ring = torch.zeros(2, dtype=torch.int64, device=device)

    def _moved(self, position: int, size: int) -> None:
        self.position, self.size = position, size
        self.ring[0].fill_(position)
        self.ring[1].fill_(size)

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, name).nbytes for name in REPLAY_FIELDS)

    def _slots(self, steps: int) -> torch.Tensor | slice:
        """Where the next ``steps`` steps go: a slice when they do not wrap, else an index tensor."""
        start = self.position
        if start + steps <= self.capacity:
            return slice(start, start + steps)
        return torch.arange(start, start + steps, device=self.inputs.device) % self.capacity

    def insert(self, inputs: torch.Tensor, actions: torch.Tensor, reward: torch.Tensor,
               next_inputs: torch.Tensor, terminated: torch.Tensor, state: torch.Tensor | None = None,
               next_state: torch.Tensor | None = None) -> None:
        """Append T steps of transitions (shapes as the buffers', with T for C; T may exceed the capacity,
        then only the last ``capacity`` steps stay). Asynchronous: nothing is read back to the host."""
        steps = inputs.shape[0]
        if steps > self.capacity:  # only the last capacity steps would survive the ring
            cut = steps - self.capacity
            self._moved((self.position + cut) % self.capacity, self.capacity)
            parts = (inputs, actions, reward, next_inputs, terminated, state, next_state)
            inputs, actions, reward, next_inputs, terminated, state, next_state = (
                None if p is None else p[cut:] for p in parts)
            steps = self.capacity
        slots = self._slots(steps)
        self.inputs[slots] = inputs
        self.actions[slots] = actions
        self.reward[slots] = reward
        self.next_inputs[slots] = next_inputs
        self.terminated[slots] = terminated
        if self.state.shape[-1]:
            self.state[slots] = state
            self.next_state[slots] = next_state
        self._moved((self.position + steps) % self.capacity, min(self.size + steps, self.capacity))

    def buffers(self) -> tuple[torch.Tensor, ...]:
        """The buffers in REPLAY_FIELDS order."""
        return tuple(getattr(self, name) for name in REPLAY_FIELDS)

    # ---- checkpoints -----------------------------------------------------------------------------------

    def state_dict(self, contents: bool = True) -> dict:
        """Position and size, and with ``contents`` every stored transition (the buffers, moved to the CPU by
        the checkpoint writer). Without them a resumed run refills the buffer before it learns again."""
        out = {"position": self.position, "size": self.size, "capacity": self.capacity}
        if contents:
            out["buffers"] = {name: getattr(self, name) for name in REPLAY_FIELDS}
        return out

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`'s output; checked whole before anything changes."""
        if state.get("capacity") != self.capacity:
            raise ValueError(f"replay checkpoint: capacity {state.get('capacity')!r} != this buffer's "
                             f"{self.capacity}")
        buffers = state.get("buffers")
        if buffers is not None:
            for name in REPLAY_FIELDS:
                mine, theirs = getattr(self, name), buffers.get(name)
                if not isinstance(theirs, torch.Tensor) or theirs.shape != mine.shape or theirs.dtype != mine.dtype:
                    raise ValueError(f"replay checkpoint: buffer {name!r} is "
                                     f"{None if theirs is None else (tuple(theirs.shape), theirs.dtype)}, "
                                     f"expected {(tuple(mine.shape), mine.dtype)}")
        position, size = state.get("position"), state.get("size")
        if not (isinstance(position, int) and 0 <= position < self.capacity
                and isinstance(size, int) and 0 <= size <= self.capacity):
            raise ValueError(f"replay checkpoint: position {position!r} / size {size!r} outside a ring of "
                             f"{self.capacity} slots")
        if buffers is not None:
            for name in REPLAY_FIELDS:
                getattr(self, name).copy_(buffers[name])
            self._moved(position, size)
        else:  # contents not saved: start empty, at the saved position
            self._moved(position, 0)


def rollout_transitions(storage: RolloutStorage, obs_dim: int) -> dict[str, torch.Tensor]:
    """The T transitions of every env in ``storage`` as :meth:`ReplayBuffer.insert` takes them: policy
    inputs [T, E, N, obs_dim * (H + 1)] before and after each step, where a step that ended its episode
    gets the input of the final observation (and the final global state), not the next episode's first.
    Computed on the device for every (t, e) and selected with ``where``: no host sync."""
    T, E = storage.steps, storage.terminated.shape[1]
    every = slice(None)
    inputs = storage.policy_input(0, T, every, obs_dim)
    ended = (storage.terminated | storage.truncated)[..., None, None]  # [T, E, 1, 1]
    t = torch.arange(T, device=ended.device).repeat_interleave(E)
    e = torch.arange(E, device=ended.device).repeat(T)
    final = storage.final_input(t, e, every, obs_dim).view(T, E, *inputs.shape[2:])
    next_inputs = torch.where(ended, final, storage.policy_input(1, T + 1, every, obs_dim))
    out = dict(inputs=inputs, actions=storage.actions, reward=storage.reward, next_inputs=next_inputs,
               terminated=storage.terminated, state=None, next_state=None)
    if storage.state_dim:
        out["state"] = storage.global_state[:T]
        out["next_state"] = torch.where(ended[..., 0], storage.final_global_state, storage.global_state[1:])
    return out


def gather_rows(buffers: tuple[torch.Tensor, ...], slot: torch.Tensor, env: torch.Tensor,
                weight: torch.Tensor) -> dict[str, torch.Tensor]:
    """The transitions at (``slot``, ``env``) [B] of ``buffers`` (REPLAY_FIELDS order, [C, E, ...]) as
    {name: [B, ...]}, with ``weight`` [B]."""
    out = {name: buffer[slot, env] for name, buffer in zip(REPLAY_FIELDS, buffers)}
    out["weight"] = weight
    return out


def group_inputs(rows: torch.Tensor, agents: slice, obs_dim: int, frames: int) -> torch.Tensor:
    """A group's policy inputs [B, n, frames * obs_dim] from replay rows [B, N, frames * the env's obs_dim] (each
    frame zero-padded to the widest group's observation)."""
    x = rows[:, agents]
    B, n = x.shape[:2]
    return x.view(B, n, frames, -1)[..., :obs_dim].reshape(B, n, -1)


__all__ = ["REPLAY_FIELDS", "ReplayBuffer", "gather_rows", "group_inputs", "rollout_transitions", "transition_bytes"]
