"""``simple_speaker_listener`` (mpe2 ``simple_speaker_listener_v4``): an immovable speaker that sees the goal
landmark's colour and talks, a silent listener that must reach it (docs/specs/mpe.md)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...kernels import per_agent, per_env
from ...kernels.fields import field
from .env import ParticleEnv, particle_scratch, particle_start, particle_state, particle_step
from .goals import draw_landmark, draw_uniform_world, goal_colour, goal_landmark, zero_fill
from .params import ParticleParams
from .phases import particle_finish
from .world import AgentGroup, Kind, Landmarks, World

NUM_LANDMARKS, DIM_C = 3, 3
SPEAKER_INDEX, LISTENER_INDEX = 0, 1
SPEAKER_OBS_DIM = 3                                # the goal landmark's colour
LISTENER_OBS_DIM = 2 + 2 * NUM_LANDMARKS + DIM_C   # v, landmarks relative to it, the speaker's message
SPEAKER = Kind("speaker", size=0.075, movable=False, collide=False, silent=False)
LISTENER = Kind("listener", size=0.075, collide=False)
LANDMARK = Kind("landmark", size=0.04, movable=False, collide=False)
#: mpe2's landmark colours: landmark l is 0.65 in channel l, 0.15 in the others.
_COLOUR_HIGH, _COLOUR_LOW = np.float32(0.65), np.float32(0.15)
_ZERO = np.float32(0.0)


@dataclass(frozen=True)
class SimpleSpeakerListenerParams(ParticleParams):
    """Only the shared parameters (ParticleParams)."""



def speaker_listener_draw_goal(e, s, c, actions):
    """The speaker's goal_b: a landmark drawn uniformly; the listener has none (-1)."""
    s.goal_b[e, SPEAKER_INDEX] = draw_landmark(e, 0, s, c)
    s.goal_b[e, LISTENER_INDEX] = -1


def speaker_listener_reward(e, s, c, actions):
    """Both agents: -|listener - the speaker's goal_b|^2 (mpe2 has no local_ratio here: the reward as is);
    0 where goal_b names no landmark (mpe2 fails there)."""
    landmark = goal_landmark(e, SPEAKER_INDEX, s)
    reward = _ZERO
    if landmark >= 0:
        dx = s.pos[e, LISTENER_INDEX, 0] - s.landmark_pos[e, landmark, 0]
        dy = s.pos[e, LISTENER_INDEX, 1] - s.landmark_pos[e, landmark, 1]
        reward = -(dx * dx + dy * dy)
    for k in range(s.pos.shape[1]):
        s.reward[e, k] = reward
    particle_finish(e, s, c, False)


def speaker_listener_observe(e, i, s, c, actions):
    """Speaker (3): the colour of its goal_b. Listener (11): v, q_l - p for each landmark, the speaker's
    message. Rows zero-padded to the listener's 11."""
    row = s.obs[e, i]
    if i == SPEAKER_INDEX:
        goal = goal_landmark(e, i, s)
        for channel in range(3):
            row[channel] = goal_colour(goal, channel, _COLOUR_HIGH, _COLOUR_LOW)
        zero_fill(row, 3)
        return
    px = s.pos[e, i, 0]
    py = s.pos[e, i, 1]
    row[0] = s.vel[e, i, 0]
    row[1] = s.vel[e, i, 1]
    at = 2
    for landmark in range(s.landmark_pos.shape[1]):
        row[at] = s.landmark_pos[e, landmark, 0] - px
        row[at + 1] = s.landmark_pos[e, landmark, 1] - py
        at += 2
    for d in range(s.comm.shape[2]):
        row[at + d] = s.comm[e, SPEAKER_INDEX, d]
    zero_fill(row, at + s.comm.shape[2])


class SimpleSpeakerListener(ParticleEnv):
    """mpe2's ``simple_speaker_listener_v4``.

    Groups: ``speaker`` (``speaker_0``: immovable, talks, dim_c = 3: Discrete(3) or Box(3)) and ``listener``
    (``listener_0``: moves, silent: Discrete(5) or Box(5); continuous actions are [E, 2, 5], the speaker's row
    zero-padded after its 3). Both size 0.075, accel 5, no speed cap, no collisions; three landmarks of size
    0.04. State: ``pos``, ``vel`` (the speaker's stays 0), ``comm`` [E, 2, 3] (the listener's is 0),
    ``landmark_pos`` [E, 3, 2], ``timestep``, ``goal_b`` int32 [E, 2] (the speaker's drawn goal landmark as an
    entity index 2..4; -1 for the listener). goal_a (the listener) is fixed and not stored.
    """

    name = "simple_speaker_listener"
    params_type = SimpleSpeakerListenerParams
    state = particle_state(talks=True, goal_b=field("int32", "agents"))
    scratch = particle_scratch(talks=True)
    step_phases = particle_step(per_env(speaker_listener_reward), per_agent(speaker_listener_observe))
    start_phases = particle_start([per_agent(draw_uniform_world), per_env(speaker_listener_draw_goal)],
                                  [per_agent(speaker_listener_observe)])

    def world(self) -> World:
        return World(groups=(AgentGroup("speaker", 1, SPEAKER, obs_dim=SPEAKER_OBS_DIM, prefix="speaker"),
                             AgentGroup("listener", 1, LISTENER, obs_dim=LISTENER_OBS_DIM, prefix="listener")),
                     landmarks=(Landmarks(NUM_LANDMARKS, LANDMARK),), dim_c=DIM_C)
