"""The parameters of the policy-gradient family: PPO's, A2C's (PPO's with A2C's defaults) and MAPPO's."""
from __future__ import annotations

from dataclasses import dataclass

from .params import AlgoParams, choice, setting

RECURRENT_CHOICES = ("none", "gru")


@dataclass
class PPOParams(AlgoParams):
    """PPO's parameters (clipped surrogate, GAE), beside what every algorithm reads."""

    epochs: int = setting("passes over each rollout", default=4, ge=1)
    minibatches: int = setting("minibatches per epoch (per group)", default=4, ge=1)
    gae_lambda: float = setting("GAE lambda", default=0.95, ge=0, le=1)
    clip_coef: float = setting("PPO ratio clip (0 disables clipping)", default=0.2, ge=0)
    clip_vloss: bool | None = setting("clip the value loss around the old values (by clip_coef, in the critic's "
                                      "output units); None: exactly where those units are normalised (value_norm), "
                                      "since on raw returns of tens a step of 0.2 per update holds the critic back",
                                      default=None)
    vf_coef: float = setting("value loss weight", default=0.5, ge=0)
    ent_coef: float = setting("entropy bonus weight", default=0.01, ge=0)
    norm_adv: bool = setting("normalise advantages per minibatch", default=True)
    norm_obs: bool = setting("normalise policy inputs by running mean/std (updated between iterations)",
                             default=True)
    recurrent: str = setting("'gru': a GRU after the actor's first layer, its state carried from step to step and "
                             "replayed over whole rollout sequences by the learner; 'none': MLP", default="none")

    #: critics predict values normalised by running statistics of the returns (MAPPO's ``value_norm``)
    normalised_values = False

    def check(self, num_envs: int, rollout_len: int) -> None:
        choice("recurrent", self.recurrent, RECURRENT_CHOICES)
        if self.clip_vloss is None:
            self.clip_vloss = self.normalised_values
        if self.minibatches > num_envs * rollout_len:  # also keeps the learner's sizes within int64
            raise ValueError(f"minibatches ({self.minibatches}) must be <= the samples of a one-agent group per "
                             f"rollout, num_envs x rollout_len = {num_envs * rollout_len}")
        if self.recurrent != "none" and num_envs < self.minibatches:
            raise ValueError(f"a recurrent policy's minibatches are drawn over envs: num_envs ({num_envs}) must be "
                             f">= minibatches ({self.minibatches})")


@dataclass
class A2CParams(PPOParams):
    """Advantage actor-critic: PPO's parameters with one epoch, one minibatch and no clipping by default."""

    epochs: int = setting("passes over each rollout", default=1, ge=1)
    minibatches: int = setting("minibatches per epoch (per group)", default=1, ge=1)
    clip_coef: float = setting("PPO ratio clip (0: A2C's unclipped policy gradient)", default=0.0, ge=0)
    clip_vloss: bool | None = setting("clip the value loss around the old values (by clip_coef)", default=False)


@dataclass
class MAPPOParams(PPOParams):
    """MAPPO's: PPO's, and how its critics read the env's global state."""

    critic_agent_id: bool = setting("the critic reads the global state with the agent's one-hot id (the MAPPO "
                                    "paper's agent-specific global state); off: one value per env and group",
                                    default=True)
    value_norm: bool = setting("the critic predicts values normalised by running statistics of the returns",
                               default=False)

    @property
    def normalised_values(self) -> bool:
        return self.value_norm


__all__ = ["A2CParams", "MAPPOParams", "PPOParams", "RECURRENT_CHOICES"]
