"""``simple_adversary`` (mpe2 ``simple_adversary_v3``): one adversary and N good agents around N landmarks, one
of them the goal, which the good agents see and the adversary does not (docs/specs/mpe.md)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...kernels import per_agent, per_env
from ...kernels.fields import field
from ..params import MAX_AGENTS, ranged
from .env import ParticleEnv, particle_scratch, particle_start, particle_state, particle_step
from .goals import draw_goal_and_positions, entity_position, goal_distance, zero_fill
from .nearest import observe_relative
from .params import ParticleParams
from .physics import particle_agents
from .phases import particle_finish
from .world import AgentGroup, Kind, Landmarks, World

_ZERO, _INF = np.float32(0.0), np.float32(np.inf)
#: mpe2 makes agent 0 the one adversary (``num_adversaries = 1``), agents 1..N the good ones.
NUM_ADVERSARIES = 1
ADVERSARY = Kind("adversary", size=0.15, collide=False)
GOOD = Kind("agent", size=0.15, collide=False)
LANDMARK = Kind("landmark", size=0.08, movable=False, collide=False)
#: The observation's selections (landmarks, agents) as a fixed-world build fixes them (k, or 0 for all in order;
#: :meth:`SimpleAdversary.build_constants`); -1: read ``c``.
#: Performance idioms: docs/envs.md#performance-idioms-of-scenario-code
ADVERSARY_NEIGHBORS = (-1, -1)


@dataclass(frozen=True)
class SimpleAdversaryParams(ParticleParams):
    N: int = ranged(2, ge=1, le=MAX_AGENTS - NUM_ADVERSARIES)
    """Good agents, and landmarks."""
    num_agent_neighbors: int | None = ranged(None, ge=1, le=MAX_AGENTS)
    """None: every other agent is observed, in agent order. k: the k nearest others, nearest first,
    zero-padded to k slots (mpe2's partial observability)."""
    num_landmark_neighbors: int | None = ranged(None, ge=1, le=MAX_AGENTS)
    """None: every landmark, in order. k: the k nearest landmarks, nearest first, zero-padded to k slots
    (a good agent's goal stays observed apart)."""

    @property
    def num_landmarks(self) -> int:
        return self.N

    @property
    def agent_slots(self) -> int:
        """Other agents in an observation: num_agent_neighbors, or all N others."""
        return self.N if self.num_agent_neighbors is None else self.num_agent_neighbors

    @property
    def landmark_slots(self) -> int:
        """Landmarks in an observation: num_landmark_neighbors, or all N."""
        return self.N if self.num_landmark_neighbors is None else self.num_landmark_neighbors


def simple_adversary_draw(e, s, c, actions):
    draw_goal_and_positions(e, s, c)


def simple_adversary_reward(e, s, c, actions):
    """With d_a agent a's distance to its goal: the adversary -d_0; every good agent d_0 - min over good
    agents of d_a (mpe2's shaped rewards)."""
    adversary_distance = _ZERO
    for a in range(NUM_ADVERSARIES):
        d = goal_distance(e, s, a)
        s.reward[e, a] = -d
        adversary_distance += d
    nearest = _INF
    num_agents = particle_agents(s.pos.shape[1])  # a literal in a fixed-world build
    for a in range(NUM_ADVERSARIES, num_agents):
        nearest = min(nearest, goal_distance(e, s, a))
    for a in range(NUM_ADVERSARIES, num_agents):
        s.reward[e, a] = adversary_distance - nearest
    particle_finish(e, s, c, False)


def simple_adversary_observe(e, i, s, c, actions):
    """Good agents: [goal - p, landmarks - p, others - p] (2 + 2 * landmark_slots + 2 * agent_slots);
    the adversary the same without its goal."""
    row = s.obs[e, i]
    px = s.pos[e, i, 0]
    py = s.pos[e, i, 1]
    col = 0
    if i >= NUM_ADVERSARIES:
        gx, gy = entity_position(e, s, s.goal_a[e, i])
        row[0] = gx - px
        row[1] = gy - py
        col = 2
    fixed = ADVERSARY_NEIGHBORS[0] >= 0
    landmarks, agents = s.landmark_pos[e], s.pos[e]
    # The agents' count is the fixed world's literal; the landmarks' stays the array's: with both literal, the
    # same cached build ran at one of two speeds from process to process (docs/benchmarks.md, seventh session).
    col = observe_relative(row, col, landmarks, landmarks.shape[0], -1, px, py,
                           ADVERSARY_NEIGHBORS[0] if fixed else c.landmark_neighbors)
    col = observe_relative(row, col, agents, particle_agents(agents.shape[0]), i, px, py,
                           ADVERSARY_NEIGHBORS[1] if fixed else c.agent_neighbors)
    zero_fill(row, col)


class SimpleAdversary(ParticleEnv):
    """mpe2's ``simple_adversary_v3``: group ``adversary`` (``adversary_0``) and group ``agent`` (``agent_0``
    .. ``agent_{N-1}``), N landmarks, every agent silent and non-colliding.

    State: the core's ``pos``, ``vel``, ``landmark_pos``, ``timestep``, and ``goal_a`` int32 [E, N + 1], the
    goal landmark's entity index (N + 1 + l), the same for every agent at reset. Reproduces mpe2's shaped
    rewards, its observations with and without partial observability (``num_agent_neighbors``,
    ``num_landmark_neighbors``), and its reset distribution.
    """

    name = "simple_adversary"
    params_type = SimpleAdversaryParams
    state = particle_state(talks=False, goal_a=field("int32", "agents"))
    scratch = particle_scratch(talks=False)
    step_phases = particle_step(per_env(simple_adversary_reward), per_agent(simple_adversary_observe))
    start_phases = particle_start([per_env(simple_adversary_draw)], [per_agent(simple_adversary_observe)])

    def world(self) -> World:
        p = self.params
        landmarks, others = 2 * p.landmark_slots, 2 * p.agent_slots
        return World(groups=(AgentGroup("adversary", NUM_ADVERSARIES, ADVERSARY, obs_dim=landmarks + others,
                                        prefix="adversary"),
                             AgentGroup("agent", p.N, GOOD, obs_dim=2 + landmarks + others, prefix="agent")),
                     landmarks=(Landmarks(p.N, LANDMARK),), dim_c=2)

    def build_constants(self) -> dict:
        fixed = super().build_constants()
        if fixed:  # a fixed world (a large CPU batch): its selections too
            p = self.params
            fixed["ADVERSARY_NEIGHBORS"] = (p.num_landmark_neighbors or 0, p.num_agent_neighbors or 0)
        return fixed

    def scenario_constants(self) -> dict:
        """k of the k-nearest selections, 0 for full observability."""
        p = self.params
        return dict(agent_neighbors=np.int32(p.num_agent_neighbors or 0),
                    landmark_neighbors=np.int32(p.num_landmark_neighbors or 0))
