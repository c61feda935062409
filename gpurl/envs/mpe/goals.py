"""Device helpers of the scenarios whose agents have goal landmarks (docs/specs/mpe.md), and their reset draw.

simple_adversary, simple_crypto, simple_push: mpe2's ``reset_world`` draws the goal first
(``landmarks[np_random.integers(L)]``, the same landmark for every agent), then every agent's and every
landmark's position uniform in [-1, 1)^2. The goal is the state field ``goal_a`` int32 [E, N]: an entity index
(agents first, then landmarks), one per agent as mpe2 keeps it, so that a written state may give agents
different goals and every reward and observation reads the rewarded or observing agent's own.

simple_reference, simple_speaker_listener: a goal landmark per agent, ``goal_b`` int32 [E, N] (-1 for None),
drawn per agent; observations show its colour, derived from the index (:func:`goal_colour`), never stored.
simple_spread shares their uniform positions (:func:`draw_uniform_world`).
"""
import math

import numpy as np

from ...kernels.targets import device
from .phases import particle_draw_index, particle_draw_position
from .physics import particle_agents, particle_obs_width

f32 = np.float32
_ZERO = f32(0.0)
_LOW, _SPAN = f32(-1.0), f32(2.0)
#: ``particle_draw_index`` slot of the goal draw (simple_crypto's key draw takes the next one).
GOAL_SLOT = 0


@device
def draw_landmark(e, slot, s, c):
    """Entity index N + l of a landmark l uniform in [0, L) (mpe2's ``np_random.integers(len(landmarks))``),
    the ``slot``-th index draw of env e's episode."""
    return s.pos.shape[1] + particle_draw_index(e, slot, s, c, s.landmark_pos.shape[1])


@device
def draw_goal_and_positions(e, s, c):
    """mpe2's reset draws of env e: one goal landmark for every agent (``goal_a``), then every agent and
    every landmark uniform in [-1, 1)^2."""
    goal = draw_landmark(e, GOAL_SLOT, s, c)
    num_agents = s.pos.shape[1]
    for i in range(num_agents):
        s.goal_a[e, i] = goal
    for entity in range(num_agents + s.landmark_pos.shape[1]):
        particle_draw_position(e, entity, s, c, _LOW, _SPAN)


@device
def entity_position(e, s, entity):
    """(x, y) of entity ``entity`` of env e: an agent if < N, else landmark ``entity - N``."""
    num_agents = particle_agents(s.pos.shape[1])
    if entity < num_agents:
        return s.pos[e, entity, 0], s.pos[e, entity, 1]
    return s.landmark_pos[e, entity - num_agents, 0], s.landmark_pos[e, entity - num_agents, 1]


@device
def goal_distance(e, s, i):
    """|p_i - p_goal|, float32, agent i to its own goal ``goal_a[e, i]`` (mpe2's
    ``np.sqrt(np.sum(np.square(a.state.p_pos - a.goal_a.state.p_pos)))``)."""
    gx, gy = entity_position(e, s, s.goal_a[e, i])
    dx = s.pos[e, i, 0] - gx
    dy = s.pos[e, i, 1] - gy
    return f32(math.sqrt(dx * dx + dy * dy))


@device
def zero_fill(row, start):
    """row[start:] = 0: the padding after an agent's own obs_dim (obs rows are reused between steps)."""
    for d in range(start, particle_obs_width(row.shape[0])):
        row[d] = _ZERO


def draw_uniform_world(e, i, s, c, actions):
    """Per-agent draw phase: agent i and landmarks i, i + N, i + 2N, ... uniform in [-1, 1)^2 (mpe2's
    ``np_random.uniform(-1, +1, dim_p)`` for every entity), so the agents' threads share the landmarks."""
    num_agents = s.pos.shape[1]
    particle_draw_position(e, i, s, c, _LOW, _SPAN)
    for landmark in range(i, s.landmark_pos.shape[1], num_agents):
        particle_draw_position(e, num_agents + landmark, s, c, _LOW, _SPAN)


@device
def goal_landmark(e, i, s):
    """The landmark (0..L-1) agent i's ``goal_b`` names, or -1 where it names none (None, or an index
    written into the state that is not a landmark's)."""
    landmark = s.goal_b[e, i] - s.pos.shape[1]
    return landmark if 0 <= landmark < s.landmark_pos.shape[1] else -1


@device
def goal_colour(landmark, channel, high, low):
    """Channel ``channel`` of landmark ``landmark``'s RGB colour where landmark l is ``high`` in channel l and
    ``low`` elsewhere (mpe2's three landmark colours in simple_reference and simple_speaker_listener); zeros
    for no landmark (-1)."""
    if landmark < 0:
        return _ZERO
    return high if channel == landmark else low
