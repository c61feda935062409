"""Drawing transitions from a replay buffer's device arrays, as functions of tensors alone.

The buffer itself (:class:`gpurl.train.replay.ReplayBuffer`) fills its ring from the rollout storage. An
off-policy learner draws the rows of all of an iteration's updates at once with :func:`draw_rows` (the
counter RNG, on the device: nothing read from the host) and each update gathers its own with
:func:`gather_rows` inside its compiled region. (The hash stays outside the compiled region: inductor's CPU
code generation of its chained integer mixes takes minutes.)
"""
from __future__ import annotations

import torch

from ..fusion.counter_rng import uniform_ref

#: The buffers of a replay buffer, in checkpoint order.
REPLAY_FIELDS = ("inputs", "actions", "reward", "next_inputs", "terminated", "state", "next_state")
#: The counter RNG's streams of a replay draw: which slot (by age), which env.
AGE_STREAM, ENV_STREAM = 4001, 4002


def draw_rows(ring: torch.Tensor, seed: torch.Tensor, draw: torch.Tensor, updates: int, batch: int, capacity: int,
              num_envs: int, total_envs: int, env_offset: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(slot, env, weight)``, each [updates, batch]: the rows of ``updates`` draws of ``batch`` transitions,
    uniform with replacement over the ``ring`` (int64 [2]: position, size > 0) filled slots of a ring of
    ``capacity`` and all ``total_envs`` envs. Update u's row b is keyed by (``seed``, ``draw`` + u, b): the same
    on every rank and device. This buffer holds envs ``env_offset ..`` (``num_envs`` of them); rows of other
    envs get weight 0 (and this buffer's env 0), so every rank's tensors keep their shape."""
    rows = torch.arange(batch, device=ring.device)
    draws = draw + torch.arange(updates, device=ring.device).unsqueeze(1)           # [U, 1]
    position, size = ring[0], ring[1]
    age = (uniform_ref(seed, rows, draws, AGE_STREAM) * size).long().clamp(max=size - 1)
    env = (uniform_ref(seed, rows, draws, ENV_STREAM) * total_envs).long().clamp(max=total_envs - 1) - env_offset
    slot = (position - size + age) % capacity  # the filled slots end at position - 1
    mine = (env >= 0) & (env < num_envs)
    return slot, env.clamp(0, num_envs - 1), mine.to(torch.float32)


def gather_rows(buffers: tuple[torch.Tensor, ...], slot: torch.Tensor, env: torch.Tensor,
                weight: torch.Tensor) -> dict[str, torch.Tensor]:
    """The transitions at (``slot``, ``env``) [B] of ``buffers`` (REPLAY_FIELDS order, [C, E, ...]) as
    {name: [B, ...]}, with ``weight`` [B]."""
    out = {name: buffer[slot, env] for name, buffer in zip(REPLAY_FIELDS, buffers)}
    out["weight"] = weight
    return out


__all__ = ["AGE_STREAM", "ENV_STREAM", "REPLAY_FIELDS", "draw_rows", "gather_rows"]
