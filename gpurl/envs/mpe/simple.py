"""``simple`` (mpe2 ``simple_v3``): one agent, one landmark, reward -|p - landmark|^2 (docs/specs/mpe.md)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...kernels import per_agent, per_env
from .env import ParticleEnv, particle_scratch, particle_start, particle_state, particle_step
from .params import ParticleParams
from .phases import particle_draw_position, particle_finish
from .world import AgentGroup, Kind, Landmarks, World

_LOW, _SPAN = np.float32(-1.0), np.float32(2.0)
AGENT = Kind("agent", size=0.05, collide=False)
LANDMARK = Kind("landmark", size=0.05, movable=False, collide=False)


@dataclass(frozen=True)
class SimpleParams(ParticleParams):
    """Only the shared parameters (ParticleParams)."""


def simple_draw(e, i, s, c, actions):
    """The agent and the landmark uniform in [-1, 1)^2."""
    particle_draw_position(e, i, s, c, _LOW, _SPAN)
    particle_draw_position(e, 1 + i, s, c, _LOW, _SPAN)


def simple_reward(e, s, c, actions):
    dx = s.pos[e, 0, 0] - s.landmark_pos[e, 0, 0]
    dy = s.pos[e, 0, 1] - s.landmark_pos[e, 0, 1]
    s.reward[e, 0] = -(dx * dx + dy * dy)
    particle_finish(e, s, c, False)


def simple_observe(e, i, s, c, actions):
    """[v, landmark - p] (4)."""
    row = s.obs[e, i]
    row[0] = s.vel[e, i, 0]
    row[1] = s.vel[e, i, 1]
    row[2] = s.landmark_pos[e, 0, 0] - s.pos[e, i, 0]
    row[3] = s.landmark_pos[e, 0, 1] - s.pos[e, i, 1]


class Simple(ParticleEnv):
    """mpe2's ``simple_v3``: agent ``agent_0`` learns to reach landmark 0."""

    name = "simple"
    params_type = SimpleParams
    state = particle_state(talks=False)
    scratch = particle_scratch(talks=False)
    step_phases = particle_step(per_env(simple_reward), per_agent(simple_observe))
    start_phases = particle_start([per_agent(simple_draw)], [per_agent(simple_observe)])

    def world(self) -> World:
        return World(groups=(AgentGroup("agent", 1, AGENT, obs_dim=4, prefix="agent"),),
                     landmarks=(Landmarks(1, LANDMARK),))
