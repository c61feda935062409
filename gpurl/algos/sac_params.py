"""The parameters of the SAC family (MASAC, ISAC): the replay's, the actors' learning rate and the entropy
temperature's."""
from __future__ import annotations

from dataclasses import dataclass

from .params import setting
from .q_params import ActorCriticReplayParams


@dataclass
class SACParams(ActorCriticReplayParams):
    """MASAC's and ISAC's parameters, beside the replay's. The temperature alpha is learned: ``log alpha`` moves
    so the policy's entropy approaches ``target_entropy`` times the action dimensions (SAC's usual -1 per
    dimension, BenchMARL's "auto")."""

    alpha_lr: float = setting("the temperature's Adam learning rate", default=3e-4, gt=0)
    init_alpha: float = setting("the temperature alpha at the start", default=1.0, gt=0)
    target_entropy: float = setting("the target entropy per action dimension, in nats (the target is this times the "
                                    "action dimensions)", default=-1.0, ge=-20, le=20)


__all__ = ["SACParams"]
