"""Parameters of ``tag_continuous`` (docs/specs/tag_continuous.md): defaults, validation, tables."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, fields

import numpy as np

from ..params import checked_params


@dataclass(frozen=True)
class TagContinuousParams:
    num_taggers: int = 1
    """Agents 0..num_taggers-1 are taggers."""
    num_runners: int = 10
    """Agents num_taggers..N-1 are runners."""
    grid_length: float = 10.0
    """The arena is [0, L] x [0, L]; positions are clipped at the walls (no wrap)."""
    episode_length: int = 100
    """Steps before truncation."""
    max_speed: float = 1.0
    """Speed cap before the skill multiplier."""
    skill_level_tagger: float = 1.0
    """Taggers' multiplier of max_speed."""
    skill_level_runner: float = 1.0
    """Runners' multiplier of max_speed."""
    max_acceleration: float = 1.0
    """Largest acceleration action."""
    min_acceleration: float = -1.0
    """Smallest acceleration action."""
    max_turn: float = math.pi / 2
    """Largest turn action (radians)."""
    min_turn: float = -math.pi / 2
    """Smallest turn action (radians)."""
    num_acceleration_levels: int = 10
    """Acceleration actions evenly spaced in [min, max] (plus the no-op at index 0)."""
    num_turn_levels: int = 10
    """Turn actions evenly spaced in [min, max] (plus the no-op at index 0)."""
    edge_hit_penalty: float = 0.0
    """Reward added when an agent hits a wall (<= 0)."""
    use_full_observation: bool = True
    """Observe every other agent (True) or the k nearest alive ones (False)."""
    num_other_agents_observed: int = 2
    """k for the partial observation."""
    tagging_distance: float = 0.01
    """A runner is tagged when its nearest tagger is closer than tagging_distance * L."""
    tag_reward_for_tagger: float = 1.0
    """Tagger's reward per runner it tags (>= 0)."""
    step_penalty_for_tagger: float = 0.0
    """Tagger's reward every step it is in the game (<= 0)."""
    tag_penalty_for_runner: float = -1.0
    """Runner's reward when tagged (<= 0)."""
    step_reward_for_runner: float = 0.0
    """Runner's reward every step it is in the game (>= 0)."""
    end_of_game_reward_for_runner: float = 1.0
    """Reward of every runner still in the game at the last step (>= 0)."""
    runner_exits_game_after_tagged: bool = True
    """Tagged runners leave the game (else they run on and can be tagged again)."""

    @classmethod
    def from_kwargs(cls, **kwargs) -> "TagContinuousParams":
        return checked_params(cls, "tag_continuous", kwargs)

    @property
    def num_agents(self) -> int:
        return self.num_taggers + self.num_runners

    @property
    def obs_dim(self) -> int:
        others = self.num_agents - 1 if self.use_full_observation else self.num_other_agents_observed
        return 7 * others + 1

    def validate(self) -> None:
        """Raise ValueError naming the first parameter outside its allowed range."""
        # Types first: the range rules below compare, which a str would turn into a bare TypeError.
        int_fields = {"num_taggers", "num_runners", "episode_length", "num_acceleration_levels",
                      "num_turn_levels", "num_other_agents_observed"}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "bool" and not isinstance(value, (bool, np.bool_)):
                raise ValueError(f"tag_continuous parameter {f.name} must be a bool, got {value!r}")
            if f.name in int_fields and (isinstance(value, bool) or not isinstance(value, (int, np.integer))):
                raise ValueError(f"tag_continuous parameter {f.name} must be an int, got {value!r}")
            if f.type in ("float",) and (isinstance(value, bool) or not isinstance(value, (int, float, np.number))
                                         or not math.isfinite(value)):
                raise ValueError(f"tag_continuous parameter {f.name} must be a finite number, got {value!r}")
        rules = [
            ("num_taggers", self.num_taggers >= 1, ">= 1"),
            ("num_runners", self.num_runners >= 1, ">= 1"),
            ("grid_length", self.grid_length > 0, "> 0"),
            ("episode_length", self.episode_length >= 1, ">= 1"),
            ("num_acceleration_levels", self.num_acceleration_levels >= 1, ">= 1"),
            ("num_turn_levels", self.num_turn_levels >= 1, ">= 1"),
            ("edge_hit_penalty", self.edge_hit_penalty <= 0, "<= 0"),
            ("tagging_distance", 0 <= self.tagging_distance <= 1, "in [0, 1]"),
            ("tag_reward_for_tagger", self.tag_reward_for_tagger >= 0, ">= 0"),
            ("step_penalty_for_tagger", self.step_penalty_for_tagger <= 0, "<= 0"),
            ("tag_penalty_for_runner", self.tag_penalty_for_runner <= 0, "<= 0"),
            ("step_reward_for_runner", self.step_reward_for_runner >= 0, ">= 0"),
            ("end_of_game_reward_for_runner", self.end_of_game_reward_for_runner >= 0, ">= 0"),
            ("num_other_agents_observed", 1 <= self.num_other_agents_observed <= self.num_agents,
             f"in [1, num_agents={self.num_agents}]"),
        ]
        for name, ok, rule in rules:
            if not ok:
                raise ValueError(f"tag_continuous parameter {name} must be {rule}, got {getattr(self, name)!r}")

    def replace(self, **changes) -> "TagContinuousParams":
        return TagContinuousParams.from_kwargs(**{**dataclasses.asdict(self), **changes})


def float32_linspace(lo: float, hi: float, n: int) -> np.ndarray:
    """``np.linspace(f32(lo), f32(hi), n)`` as NumPy 2 computes it for float32 endpoints (spec)."""
    lo32, hi32 = np.float32(lo), np.float32(hi)
    if n == 1:
        return np.array([lo32], dtype=np.float32)
    step = np.float32((hi32 - lo32) / np.float32(n - 1))
    table = np.arange(n, dtype=np.float32) * step + lo32
    table[-1] = hi32
    return table.astype(np.float32)


def action_table(lo: float, hi: float, levels: int) -> np.ndarray:
    """float32 [levels + 1]: index 0 is the no-op (0.0), then the evenly spaced levels."""
    return np.concatenate([np.zeros(1, np.float32), float32_linspace(lo, hi, levels)]).astype(np.float32)


#: The benchmark configuration of the literature ("tag-10v100").
TAG_10V100 = dict(
    num_taggers=10, num_runners=100, grid_length=20.0, episode_length=500,
    max_acceleration=0.1, min_acceleration=-0.1, max_turn=2.356, min_turn=-2.356,
    num_acceleration_levels=20, num_turn_levels=20, use_full_observation=False,
    num_other_agents_observed=10, tagging_distance=0.02, tag_reward_for_tagger=10.0,
    tag_penalty_for_runner=-10.0, end_of_game_reward_for_runner=1.0,
)
#: The larger GPU configuration: 5 taggers, 1000 runners, otherwise tag-10v100.
TAG_5V1000 = {**TAG_10V100, "num_taggers": 5, "num_runners": 1000}
