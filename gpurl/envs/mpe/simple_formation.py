"""``simple_formation`` (mpe2 ``simple_formation_v1``): N agents form a circle of radius 0.5 around a
landmark, matched to their places by a minimum-cost assignment (docs/specs/mpe.md)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...kernels import cos32, per_agent, per_env, sin32
from ...kernels.fields import field
from .env import ParticleEnv, particle_scratch, particle_start, particle_state, particle_step
from .matching import (MatchingParams, matching_constants, matching_scratch, target_cost_phase,
                       target_reward_phase)
from .phases import particle_draw_position, particle_observe_motion
from .world import AgentGroup, Kind, Landmarks, World

f32 = np.float32
_ZERO = f32(0.0)
_TWO_PI = f32(2.0 * math.pi)
_AGENT_LOW, _AGENT_SPAN = f32(-1.0), f32(2.0)
_LANDMARK_LOW, _LANDMARK_SPAN = f32(-0.5), f32(1.0)
#: mpe2's TARGET_RADIUS: the circle's radius.
TARGET_RADIUS = 0.5
_RADIUS = f32(TARGET_RADIUS)
AGENT = Kind("agent", size=0.05, collide=True)
LANDMARK = Kind("landmark", size=0.03, movable=False, collide=False)


@dataclass(frozen=True)
class SimpleFormationParams(MatchingParams):
    """N and terminate_on_success (MatchingParams), as mpe2 takes them."""


def formation_draw(e, i, s, c, actions):
    """Agent i uniform in [-1, 1)^2; the landmark uniform in [-0.5, 0.5)^2 (agent 0's thread)."""
    particle_draw_position(e, i, s, c, _AGENT_LOW, _AGENT_SPAN)
    if i == 0:
        particle_draw_position(e, s.pos.shape[1], s, c, _LANDMARK_LOW, _LANDMARK_SPAN)


def formation_angle(e, i, s, c, actions):
    """Agent i's angle around the landmark in [0, 2 pi) (mpe2's _find_angle: atan2, + 2 pi where < 0)."""
    angle = math.atan2(s.pos[e, i, 1] - s.landmark_pos[e, 0, 1], s.pos[e, i, 0] - s.landmark_pos[e, 0, 0])
    if angle < _ZERO:
        angle += _TWO_PI
    s.ring_angle[e, i] = angle


def formation_targets(e, i, s, c, actions):
    """Place i = lm + 0.5 (cos, sin)(theta_min + i 2 pi / N), theta_min the smallest agent angle: mpe2
    recomputes the circle every step, anchored to the agent at the smallest angle."""
    theta = s.ring_angle[e, 0]
    for k in range(1, s.ring_angle.shape[1]):
        theta = min(theta, s.ring_angle[e, k])
    theta += f32(i) * c.ring_step
    s.target[e, i, 0] = s.landmark_pos[e, 0, 0] + _RADIUS * cos32(theta)
    s.target[e, i, 1] = s.landmark_pos[e, 0, 1] + _RADIUS * sin32(theta)


def formation_observe(e, i, s, c, actions):
    """[v, p, lm - p] (6)."""
    row = s.obs[e, i]
    px, py = particle_observe_motion(row, e, i, s)
    row[4] = s.landmark_pos[e, 0, 0] - px
    row[5] = s.landmark_pos[e, 0, 1] - py


class SimpleFormation(ParticleEnv):
    """mpe2's ``simple_formation_v1``: agents ``agent_0..agent_{N-1}`` (group ``agent``) spread evenly on the
    circle of radius 0.5 around landmark 0.

    State: ``pos``, ``vel`` [E, N, 2], ``landmark_pos`` [E, 1, 2], ``timestep`` [E]; the places are
    recomputed from the state every step, as mpe2 does. Reward: every agent gets -mean clip(d, 0, 2) over
    the distances of a minimum-cost matching of agents to places; with ``terminate_on_success`` the episode
    ends once every matched distance is below 0.05.
    """

    name = "simple_formation"
    params_type = SimpleFormationParams
    state = particle_state(talks=False)
    scratch = {**particle_scratch(talks=False), **matching_scratch(),
               "ring_angle": field("float32", "agents")}
    step_phases = particle_step(per_agent(formation_angle), per_agent(formation_targets),
                                per_agent(target_cost_phase), per_env(target_reward_phase),
                                per_agent(formation_observe))
    start_phases = particle_start([per_agent(formation_draw)], [per_agent(formation_observe)])

    def world(self) -> World:
        return World(groups=(AgentGroup("agent", self.params.N, AGENT, obs_dim=6, prefix="agent"),),
                     landmarks=(Landmarks(1, LANDMARK),))

    def scenario_constants(self) -> dict:
        return {**matching_constants(self.params.terminate_on_success),
                "ring_step": f32(2.0 * math.pi / self.params.N)}
