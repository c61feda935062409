"""The parameters of the off-policy algorithms: what every learner from the device replay buffer reads
(:class:`ReplayParams`), the value-based family's (IQL, VDN, QMIX: :class:`QParams`) and what the actor-critics
for Box actions add to the replay's (:class:`ActorCriticReplayParams`; their own in ``ddpg_params.py`` and
``sac_params.py``)."""
from __future__ import annotations

from dataclasses import dataclass

from .params import AlgoParams, setting


@dataclass
class ReplayParams(AlgoParams):
    """An off-policy algorithm's replay buffer, updates and target networks, beside what every algorithm reads."""

    replay_capacity: int = setting("rollout steps per env the replay buffer keeps (capacity x num_envs transitions, "
                                   "on every learner rank)", default=1000, ge=1)
    replay_in_checkpoint: bool = setting("checkpoints hold the replay buffer's transitions (off: its position only; "
                                         "a resumed run refills it before learning)", default=True)
    q_batch: int = setting("transitions per update (sampled uniformly from the replay buffer)", default=256, ge=1)
    q_updates: int = setting("updates per iteration", default=4, ge=1)
    target_tau: float = setting("how far each target update moves the target networks towards the online ones "
                                "(1 = a copy)", default=0.01, gt=0, le=1)


@dataclass
class QParams(ReplayParams):
    """IQL's, VDN's and QMIX's parameters: the replay's, the target updates' period and the exploration
    schedule."""

    target_period: int = setting("updates between target updates", default=1, ge=1)
    eps_start: float = setting("exploration epsilon at the start", default=1.0, ge=0, le=1)
    eps_end: float = setting("exploration epsilon after the decay", default=0.05, ge=0, le=1)
    eps_decay_frac: float = setting("fraction of the run's steps over which epsilon moves linearly from eps_start "
                                    "to eps_end", default=0.5, ge=0, le=1)


@dataclass
class ActorCriticReplayParams(ReplayParams):
    """The off-policy actor-critics' (MADDPG, MASAC and their kin): the replay's and the actors' learning rate.
    Their learning rates stay constant by default, as in the DDPG and SAC papers and BenchMARL."""

    anneal_lr: bool = setting("anneal the learning rate linearly to 0 over the run", default=False)
    actor_lr: float = setting("the actors' Adam learning rate (lr is the critics')", default=1e-3, gt=0)


__all__ = ["ActorCriticReplayParams", "QParams", "ReplayParams"]
