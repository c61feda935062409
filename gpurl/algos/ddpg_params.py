"""The parameters of the deterministic-policy family: MADDPG and IDDPG, and MATD3 (the same code with twin
critics, target policy smoothing and delayed actor updates: other defaults)."""
from __future__ import annotations

from dataclasses import dataclass

from .params import setting
from .q_params import ActorCriticReplayParams


@dataclass
class DDPGParams(ActorCriticReplayParams):
    """MADDPG's and IDDPG's parameters, beside the replay's. Noise scales are fractions of each action
    dimension's half range ((high - low) / 2)."""

    exploration_std: float = setting("standard deviation of the Gaussian noise added to the actions while acting",
                                     default=0.1, ge=0)
    twin_critics: bool = setting("two critics per group, the target the minimum of their target values (TD3)",
                                 default=False)
    target_noise: float = setting("standard deviation of the noise on the target actions (TD3's target policy "
                                  "smoothing; 0: none)", default=0.0, ge=0)
    target_noise_clip: float = setting("the target noise is clipped to +- this", default=0.5, ge=0)
    policy_delay: int = setting("critic updates per actor update (TD3: 2)", default=1, ge=1)


@dataclass
class TD3Params(DDPGParams):
    """MATD3's: DDPG's with TD3's defaults."""

    twin_critics: bool = setting("two critics per group, the target the minimum of their target values (TD3)",
                                 default=True)
    target_noise: float = setting("standard deviation of the noise on the target actions (TD3's target policy "
                                  "smoothing; 0: none)", default=0.2, ge=0)
    policy_delay: int = setting("critic updates per actor update (TD3: 2)", default=2, ge=1)


__all__ = ["DDPGParams", "TD3Params"]
