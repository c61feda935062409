"""What an algorithm declares of the rollout storage: the per-step buffers its actor writes."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Field:
    """A per-step buffer of the rollout storage, written by an actor fragment.

    Allocated once as ``[T + extra_steps, E, N, *shape]`` of ``dtype`` (per agent) or
    ``[T + extra_steps, E, *shape]`` (``per_agent=False``, one row per env). ``extra_steps`` slots
    after the last step hold what the learner needs beyond it (a bootstrap value at T).
    """

    shape: tuple[int, ...] = ()
    dtype: torch.dtype = torch.float32
    per_agent: bool = True
    extra_steps: int = 0
    #: slot T becomes slot 0 of the next iteration (and is saved in checkpoints): a state the actor
    #: carries from step to step, like a recurrent policy's hidden state.
    carried: bool = False


__all__ = ["Field"]
