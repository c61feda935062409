"""Parameters of ``tag_gridworld`` (docs/specs/tag_gridworld.md): defaults with their ranges, reward table."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..params import MAX_AGENTS, MAX_EPISODE_LENGTH, checked_params, ranged

#: Largest grid_length: cells 0..L must stay exact in float32 (obs x/L) and L+1 must fit int32.
MAX_GRID_LENGTH = 2**24


@dataclass(frozen=True)
class TagGridworldParams:
    num_taggers: int = ranged(10, ge=1, le=MAX_AGENTS - 1)
    """Agents 0..num_taggers-1 are taggers; agent num_taggers is the one runner."""
    grid_length: int = ranged(10, ge=1, le=MAX_GRID_LENGTH)
    """Integer L: cells 0..L on each axis; moves are clipped to [0, L] (no wrap)."""
    episode_length: int = ranged(100, ge=1, le=MAX_EPISODE_LENGTH)
    """Steps before truncation."""
    wall_hit_penalty: float = ranged(0.1)
    """Subtracted from the reward of an agent whose move was clipped at a wall."""
    tag_reward_for_tagger: float = ranged(10.0)
    """Every tagger's reward in a step where some tagger is on the runner's cell."""
    tag_penalty_for_runner: float = ranged(2.0)
    """Subtracted from the runner's reward when it is tagged."""
    step_cost_for_tagger: float = ranged(0.01)
    """Untagged step: subtracted from every tagger's reward and added to the runner's."""
    use_full_observation: bool = True
    """Every agent's position (obs_dim 4(N+1)+1) or own + target position (obs_dim 6)."""
    random_start: bool = True
    """Uniform random cells per env and episode (True) or the original's fixed start (False)."""

    @classmethod
    def from_kwargs(cls, **kwargs) -> "TagGridworldParams":
        return checked_params(cls, "tag_gridworld", kwargs)

    @property
    def num_agents(self) -> int:
        return self.num_taggers + 1

    @property
    def runner(self) -> int:
        """Index of the runner (the last agent)."""
        return self.num_taggers

    @property
    def obs_dim(self) -> int:
        return 4 * self.num_agents + 1 if self.use_full_observation else 6

    def replace(self, **changes) -> "TagGridworldParams":
        return TagGridworldParams.from_kwargs(**{**dataclasses.asdict(self), **changes})


def reward_table(p: TagGridworldParams) -> np.ndarray:
    """float32 [2 (tagger, runner), 2 (untagged, tagged), 2 (no wall, wall)]: every possible reward.

    Each entry is the float64 sum rounded once to float32, as the original computes it
    (``reward_tag + reward_penalty`` in float64): the spec's "-= penalty, then +/- tag term" in exact
    arithmetic, and the kernels need no float64 to get it.
    """
    tag_term = {(0, 0): -float(p.step_cost_for_tagger), (0, 1): float(p.tag_reward_for_tagger),
                (1, 0): float(p.step_cost_for_tagger), (1, 1): -float(p.tag_penalty_for_runner)}
    table = np.zeros((2, 2, 2), np.float32)
    for (kind, tagged), term in tag_term.items():
        table[kind, tagged, 0] = np.float32(term)
        table[kind, tagged, 1] = np.float32(-float(p.wall_hit_penalty) + term)
    return table


#: The benchmark configuration "grid-4" (run with 2000 envs).
TAG_GRID_4 = dict(num_taggers=4, grid_length=100, episode_length=100, tag_penalty_for_runner=5.0)
#: The large configuration: grid-4 with 1000 taggers.
TAG_GRID_LARGE = {**TAG_GRID_4, "num_taggers": 1000}
