"""``simple_push`` (mpe2 ``simple_push_v3``): an adversary keeps a good agent away from its goal landmark by
pushing it; the good agent sees which of the two landmarks is the goal, as colours (docs/specs/mpe.md)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...kernels import per_agent, per_env
from ...kernels.fields import field
from ...kernels.targets import device
from .env import ParticleEnv, particle_scratch, particle_start, particle_state, particle_step
from .goals import draw_goal_and_positions, entity_position, goal_distance, zero_fill
from .params import ParticleParams
from .phases import particle_finish
from .world import AgentGroup, Kind, Landmarks, World

f32 = np.float32
#: mpe2's fixed world: agent 0 the adversary, agent 1 the good agent, two landmarks.
NUM_ADVERSARIES = 1
NUM_AGENTS = 2
NUM_LANDMARKS = 2
ADVERSARY = Kind("adversary", size=0.05)
GOOD = Kind("agent", size=0.05)
LANDMARK = Kind("landmark", size=0.05, movable=False, collide=False)
# Colours (RGB) as mpe2's reset_world paints them, in float64 then cast to float32 by the observation:
# landmark l is 0.1 with channel l + 1 raised by 0.8 (0.1 + 0.8 = 0.9000000000000001 -> 0.9f); the good
# agent is 0.25 with channel goal + 1 raised by 0.5.
_LANDMARK_BASE, _LANDMARK_LIT = f32(0.1), f32(0.1 + 0.8)
_AGENT_BASE, _AGENT_LIT = f32(0.25), f32(0.25 + 0.5)
_COLOUR_DIM = 3
_INF = f32(np.inf)
GOOD_OBS_DIM = 2 + 2 + _COLOUR_DIM + (2 + _COLOUR_DIM) * NUM_LANDMARKS + 2 * (NUM_AGENTS - 1)  # 19
ADVERSARY_OBS_DIM = 2 + 2 * NUM_LANDMARKS + 2 * (NUM_AGENTS - 1)  # 8


@dataclass(frozen=True)
class SimplePushParams(ParticleParams):
    """Only the shared parameters (ParticleParams)."""


def simple_push_draw(e, s, c, actions):
    draw_goal_and_positions(e, s, c)


def simple_push_reward(e, s, c, actions):
    """Good agents: -|p - goal|. The adversary: min over good agents of their distance to their goal
    - its own distance to its goal."""
    nearest = _INF
    for a in range(NUM_ADVERSARIES, NUM_AGENTS):
        d = goal_distance(e, s, a)
        s.reward[e, a] = -d
        nearest = min(nearest, d)
    for a in range(NUM_ADVERSARIES):
        s.reward[e, a] = nearest - goal_distance(e, s, a)
    particle_finish(e, s, c, False)


@device
def write_colour(row, col, channel, base, lit):
    """An RGB colour into row[col:col + 3]: ``base`` everywhere, ``lit`` on ``channel``."""
    for d in range(_COLOUR_DIM):
        row[col + d] = lit if d == channel else base


def simple_push_observe(e, i, s, c, actions):
    """The good agent: [v, goal - p, its colour, landmarks - p, landmark colours, others - p] (19);
    the adversary: [v, landmarks - p, others - p] (8). The good agent's colour shows its goal landmark
    (channel goal + 1), derived from ``goal_a``."""
    row = s.obs[e, i]
    px = s.pos[e, i, 0]
    py = s.pos[e, i, 1]
    row[0] = s.vel[e, i, 0]
    row[1] = s.vel[e, i, 1]
    col = 2
    good = i >= NUM_ADVERSARIES
    if good:
        goal = s.goal_a[e, i]
        gx, gy = entity_position(e, s, goal)
        row[2] = gx - px
        row[3] = gy - py
        write_colour(row, 4, goal - NUM_AGENTS + 1, _AGENT_BASE, _AGENT_LIT)
        col = 4 + _COLOUR_DIM
    for l in range(NUM_LANDMARKS):
        row[col] = s.landmark_pos[e, l, 0] - px
        row[col + 1] = s.landmark_pos[e, l, 1] - py
        col += 2
    if good:
        for l in range(NUM_LANDMARKS):
            write_colour(row, col, l + 1, _LANDMARK_BASE, _LANDMARK_LIT)
            col += _COLOUR_DIM
    for j in range(NUM_AGENTS):
        if j != i:
            row[col] = s.pos[e, j, 0] - px
            row[col + 1] = s.pos[e, j, 1] - py
            col += 2
    zero_fill(row, col)


class SimplePush(ParticleEnv):
    """mpe2's ``simple_push_v3``: group ``adversary`` (``adversary_0``) and group ``agent`` (``agent_0``), two
    landmarks; the agents collide with each other (size 0.05), not with the landmarks.

    State: the core's ``pos``, ``vel``, ``landmark_pos``, ``timestep``, and ``goal_a`` int32 [E, 2], the goal
    landmark's entity index (2 + l), the same for both agents at reset. Colours (the good agent's, the
    landmarks') are derived from it. Reproduces mpe2's rewards, observations and reset distribution.
    """

    name = "simple_push"
    params_type = SimplePushParams
    state = particle_state(talks=False, goal_a=field("int32", "agents"))
    scratch = particle_scratch(talks=False)
    step_phases = particle_step(per_env(simple_push_reward), per_agent(simple_push_observe))
    start_phases = particle_start([per_env(simple_push_draw)], [per_agent(simple_push_observe)])

    def world(self) -> World:
        return World(groups=(AgentGroup("adversary", NUM_ADVERSARIES, ADVERSARY, obs_dim=ADVERSARY_OBS_DIM,
                                        prefix="adversary"),
                             AgentGroup("agent", NUM_AGENTS - NUM_ADVERSARIES, GOOD, obs_dim=GOOD_OBS_DIM,
                                        prefix="agent")),
                     landmarks=(Landmarks(NUM_LANDMARKS, LANDMARK),), dim_c=2)
