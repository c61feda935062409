"""Parameters and constants of ``simple_tag`` (docs/specs/simple_tag.md): defaults, validation, sizes."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..params import MAX_AGENTS, MAX_EPISODE_LENGTH, checked_params, ranged

# ---- world constants (spec "Constants"; mpe2 1.1.1 hard-codes them) ---------------------------------------
DT = 0.1
DAMPING = 0.25
CONTACT_FORCE = 100.0
CONTACT_MARGIN = 0.001
ADVERSARY_SIZE, GOOD_SIZE, OBSTACLE_SIZE = 0.075, 0.05, 0.2
ADVERSARY_ACCEL, GOOD_ACCEL = 3.0, 4.0
ADVERSARY_MAX_SPEED, GOOD_MAX_SPEED = 1.0, 1.3
CATCH_REWARD = 10.0               # +10 per adversary-good collision to every adversary, -10 to the good agent
BOUND_START, BOUND_CAP = 0.9, 10.0  # good agents' boundary penalty: 0 below 0.9, capped at 10
AGENT_RESET_RANGE, OBSTACLE_RESET_RANGE = 1.0, 0.9  # reset positions ~ U(-r, r)^2
#: Discrete action k -> u = (ux, uy): 0 no-op, 1 left, 2 right, 3 down, 4 up.
DISCRETE_MOVES = ((0.0, 0.0), (-1.0, 0.0), (1.0, 0.0), (0.0, -1.0), (0.0, 1.0))
NUM_MOVES = 5


@dataclass(frozen=True)
class SimpleTagParams:
    num_adversaries: int = ranged(3, ge=1, le=MAX_AGENTS)
    """A >= 1: agents 0..A-1 are adversaries (mpe2's adversary_0..)."""
    num_good: int = ranged(1, ge=1, le=MAX_AGENTS)
    """G >= 1: agents A..A+G-1 are good agents (mpe2's agent_0..)."""
    num_obstacles: int = ranged(2, ge=0, le=MAX_AGENTS)
    """L >= 0 fixed circular obstacles (mpe2's landmarks)."""
    max_cycles: int = ranged(25, ge=1, le=MAX_EPISODE_LENGTH)
    """Steps per episode: truncated when timestep >= max_cycles."""
    continuous_actions: bool = False
    """Discrete(5) actions (False) or Box(0, 1, (5,)) (True, clipped into [0, 1])."""
    terminate_on_success: bool = False
    """End the episode (terminated) when every good agent collides with an adversary."""
    dynamic_rescaling: bool = True
    """Rendering only in mpe2 (on-screen radius): accepted and ignored."""

    @classmethod
    def from_kwargs(cls, **kwargs) -> "SimpleTagParams":
        return checked_params(cls, "simple_tag", kwargs)

    @property
    def num_agents(self) -> int:
        return self.num_adversaries + self.num_good

    @property
    def num_landmarks(self) -> int:
        """The obstacles are the world's landmarks (the particle core's name)."""
        return self.num_obstacles

    @property
    def adversary_obs_dim(self) -> int:
        """v, p, obstacles, other agents, good agents' velocities: 4 + 2L + 2(N-1) + 2G."""
        return 4 + 2 * self.num_obstacles + 2 * (self.num_agents - 1) + 2 * self.num_good

    @property
    def good_obs_dim(self) -> int:
        """A good agent skips its own velocity in block 5: two features fewer than an adversary."""
        return self.adversary_obs_dim - 2

    @property
    def obs_dim(self) -> int:
        return self.adversary_obs_dim

    @property
    def action_dims(self) -> int:
        return NUM_MOVES if self.continuous_actions else 1

    def rules(self) -> list[tuple[str, bool, str]]:
        """Rules between parameters (:func:`~gpurl.envs.params.check_rules`), after each one's own range."""
        # Agents and obstacles share the entity index space of the RNG keys and the obs rows.
        others = self.num_adversaries + self.num_good
        return [("num_good", others <= MAX_AGENTS,
                 f"<= {MAX_AGENTS - self.num_adversaries} (2**20 agents in all, "
                 f"num_adversaries={self.num_adversaries})"),
                ("num_obstacles", others + self.num_obstacles <= MAX_AGENTS,
                 f"<= {MAX_AGENTS - others} (2**20 agents + obstacles in all, {others} agents)")]

    def replace(self, **changes) -> "SimpleTagParams":
        return SimpleTagParams.from_kwargs(**{**dataclasses.asdict(self), **changes})
