"""Parameters every mpe2 scenario takes (mpe2 1.1.1's ``env(max_cycles=25, continuous_actions=False,
dynamic_rescaling=True)``); a scenario's params dataclass extends :class:`ParticleParams` with its own."""
from __future__ import annotations

from dataclasses import dataclass

from ..params import MAX_EPISODE_LENGTH, ranged


@dataclass(frozen=True)
class ParticleParams:
    max_cycles: int = ranged(25, ge=1, le=MAX_EPISODE_LENGTH)
    """Steps per episode: truncated when timestep >= max_cycles."""
    continuous_actions: bool = False
    """mpe2's Discrete actions (False) or its Box(0, 1) vectors (True, clipped into [0, 1])."""
    dynamic_rescaling: bool = True
    """Rendering only in mpe2 (on-screen radius): accepted and ignored."""

