"""Parameters of ``tag_continuous`` (docs/specs/tag_continuous.md): defaults, validation, tables."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ..params import MAX_AGENTS, MAX_EPISODE_LENGTH, checked_params, ranged

#: Most acceleration (or turn) levels. The tables index levels as float32 (exact up to 2**24), but every
#: level is also one logit of a policy's categorical head and one entry of a table on every device:
#: 2**16 levels keep both small (a 256 KiB table), far finer than any speed or angle in float32 needs.
MAX_ACTION_LEVELS = 2**16


@dataclass(frozen=True)
class TagContinuousParams:
    num_taggers: int = ranged(1, ge=1, le=MAX_AGENTS)
    """Agents 0..num_taggers-1 are taggers."""
    num_runners: int = ranged(10, ge=1, le=MAX_AGENTS)
    """Agents num_taggers..N-1 are runners."""
    grid_length: float = ranged(10.0, gt=0)
    """The arena is [0, L] x [0, L]; positions are clipped at the walls (no wrap)."""
    episode_length: int = ranged(100, ge=1, le=MAX_EPISODE_LENGTH)
    """Steps before truncation."""
    max_speed: float = ranged(1.0, gt=0)
    """Speed cap before the skill multiplier."""
    skill_level_tagger: float = ranged(1.0, ge=0)
    """Taggers' multiplier of max_speed."""
    skill_level_runner: float = ranged(1.0, ge=0)
    """Runners' multiplier of max_speed."""
    max_acceleration: float = ranged(1.0)
    """Largest acceleration action."""
    min_acceleration: float = ranged(-1.0)
    """Smallest acceleration action (<= max_acceleration)."""
    max_turn: float = ranged(math.pi / 2)
    """Largest turn action (radians)."""
    min_turn: float = ranged(-math.pi / 2)
    """Smallest turn action (radians, <= max_turn)."""
    num_acceleration_levels: int = ranged(10, ge=1, le=MAX_ACTION_LEVELS)
    """Acceleration actions evenly spaced in [min, max] (plus the no-op at index 0)."""
    num_turn_levels: int = ranged(10, ge=1, le=MAX_ACTION_LEVELS)
    """Turn actions evenly spaced in [min, max] (plus the no-op at index 0)."""
    edge_hit_penalty: float = ranged(0.0, le=0)
    """Reward added when an agent hits a wall (<= 0)."""
    use_full_observation: bool = True
    """Observe every other agent (True) or the k nearest alive ones (False)."""
    num_other_agents_observed: int = ranged(2, ge=1, le=MAX_AGENTS)
    """k for the partial observation (at most num_agents)."""
    tagging_distance: float = ranged(0.01, ge=0, le=1)
    """A runner is tagged when its nearest tagger is closer than tagging_distance * L."""
    tag_reward_for_tagger: float = ranged(1.0, ge=0)
    """Tagger's reward per runner it tags (>= 0)."""
    step_penalty_for_tagger: float = ranged(0.0, le=0)
    """Tagger's reward every step it is in the game (<= 0)."""
    tag_penalty_for_runner: float = ranged(-1.0, le=0)
    """Runner's reward when tagged (<= 0)."""
    step_reward_for_runner: float = ranged(0.0, ge=0)
    """Runner's reward every step it is in the game (>= 0)."""
    end_of_game_reward_for_runner: float = ranged(1.0, ge=0)
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

    def rules(self) -> list[tuple[str, bool, str]]:
        """Rules between parameters (:func:`~gpurl.envs.params.check_rules`), after each one's own range."""
        return [
            ("num_runners", self.num_agents <= MAX_AGENTS,
             f"<= {MAX_AGENTS - self.num_taggers} (2**20 agents in all, num_taggers={self.num_taggers})"),
            ("min_acceleration", self.min_acceleration <= self.max_acceleration,
             f"<= max_acceleration={self.max_acceleration!r}"),
            ("min_turn", self.min_turn <= self.max_turn, f"<= max_turn={self.max_turn!r}"),
            ("num_other_agents_observed", self.num_other_agents_observed <= self.num_agents,
             f"in [1, num_agents={self.num_agents}]"),
        ]

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
#: The default CPU run ("tag-small"): learns within minutes on 2 vCPUs. Runners move at a fifth of the taggers'
#: speed, so taggers that learn to steer catch all four; random taggers catch about one.
TAG_SMALL = dict(
    num_taggers=2, num_runners=4, grid_length=6.0, episode_length=100, max_speed=0.3,
    skill_level_runner=0.2, use_full_observation=False, num_other_agents_observed=3,
    tagging_distance=0.035, tag_reward_for_tagger=10.0, tag_penalty_for_runner=-10.0,
)
