"""``simple_line`` (mpe2 ``simple_line_v1``): N agents spread evenly on the segment between two landmarks,
matched to their places by a minimum-cost assignment (docs/specs/mpe.md)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...kernels import cos32, per_agent, per_env, sin32
from ...kernels.targets import device
from .env import ParticleEnv, particle_scratch, particle_start, particle_state, particle_step
from .matching import (MatchingParams, matching_constants, matching_scratch, target_cost_phase,
                       target_reward_phase)
from .phases import particle_draw_position, particle_observe_motion, particle_uniform
from .world import AgentGroup, Kind, Landmarks, World

f32 = np.float32
_ONE = f32(1.0)
_AGENT_LOW, _AGENT_SPAN = f32(-1.0), f32(2.0)
_FIRST_LOW, _FIRST_SPAN = f32(-0.25), f32(0.5)
#: mpe2's TOTAL_SEP: landmark 1 lies this far from landmark 0.
TOTAL_SEP = 1.25
_SEP = f32(TOTAL_SEP)
_ZERO, _TWO_PI = f32(0.0), f32(2.0 * math.pi)
#: mpe2 turns a direction that puts landmark 1 outside (-1, 1)^2 by 5 degrees until it fits.
_TURN = f32(math.radians(5.0))
#: A full circle of turns. Every landmark 0 in [-0.25, 0.25]^2 has a fitting arc at least 16 degrees wide, so
#: 5-degree turns reach one within a circle (~51 turns from the worst start); the bound keeps the loop finite.
_MAX_TURNS = 72
AGENT = Kind("agent", size=0.03, collide=True)
LANDMARK = Kind("landmark", size=0.02, movable=False, collide=False)


@dataclass(frozen=True)
class SimpleLineParams(MatchingParams):
    """N and terminate_on_success (MatchingParams), as mpe2 takes them."""


@device
def line_draw_landmarks(e, s, c):
    """mpe2's reset of the landmarks: landmark 0 uniform in [-0.25, 0.25)^2; landmark 1 at 1.25 from it in a
    uniform direction theta, turned by 5 degrees until it lies inside (-1, 1)^2 (theta is the uniform draw
    keyed by landmark 1, stream 0)."""
    num_agents = s.pos.shape[1]
    particle_draw_position(e, num_agents, s, c, _FIRST_LOW, _FIRST_SPAN)
    x0 = s.landmark_pos[e, 0, 0]
    y0 = s.landmark_pos[e, 0, 1]
    theta = particle_uniform(e, num_agents + 1, 0, s, c, _ZERO, _TWO_PI)
    x = x0 + _SEP * cos32(theta)
    y = y0 + _SEP * sin32(theta)
    for _ in range(_MAX_TURNS):
        if abs(x) < _ONE and abs(y) < _ONE:
            break
        theta += _TURN
        x = x0 + _SEP * cos32(theta)
        y = y0 + _SEP * sin32(theta)
    s.landmark_pos[e, 1, 0] = x
    s.landmark_pos[e, 1, 1] = y


def line_draw(e, i, s, c, actions):
    """Agent i uniform in [-1, 1)^2; the landmarks (agent 0's thread)."""
    particle_draw_position(e, i, s, c, _AGENT_LOW, _AGENT_SPAN)
    if i == 0:
        line_draw_landmarks(e, s, c)


def line_targets(e, i, s, c, actions):
    """Place i = lm0 + i (lm1 - lm0) / (N - 1) (lm0 alone when N = 1): mpe2's evenly spaced places, derived
    from the landmarks (mpe2 keeps them from its reset, where lm1 - lm0 = 1.25 * direction)."""
    x0 = s.landmark_pos[e, 0, 0]
    y0 = s.landmark_pos[e, 0, 1]
    k = f32(i)
    s.target[e, i, 0] = x0 + k * (s.landmark_pos[e, 1, 0] - x0) / c.line_gaps
    s.target[e, i, 1] = y0 + k * (s.landmark_pos[e, 1, 1] - y0) / c.line_gaps


def line_observe(e, i, s, c, actions):
    """[v, p, lm0 - p, lm1 - p] (8)."""
    row = s.obs[e, i]
    px, py = particle_observe_motion(row, e, i, s)
    for m in range(2):
        row[4 + 2 * m] = s.landmark_pos[e, m, 0] - px
        row[5 + 2 * m] = s.landmark_pos[e, m, 1] - py


class SimpleLine(ParticleEnv):
    """mpe2's ``simple_line_v1``: agents ``agent_0..agent_{N-1}`` (group ``agent``) line up evenly between
    landmark 0 and landmark 1.

    State: ``pos``, ``vel`` [E, N, 2], ``landmark_pos`` [E, 2, 2], ``timestep`` [E]; the places on the line
    are derived from ``landmark_pos`` every step, so a written state determines the next step. Reward: every
    agent gets -mean clip(d, 0, 2) over the distances of a minimum-cost matching of agents to places;
    with ``terminate_on_success`` the episode ends once every matched distance is below 0.05.
    """

    name = "simple_line"
    params_type = SimpleLineParams
    state = particle_state(talks=False)
    scratch = {**particle_scratch(talks=False), **matching_scratch()}
    step_phases = particle_step(per_agent(line_targets), per_agent(target_cost_phase),
                                per_env(target_reward_phase), per_agent(line_observe))
    start_phases = particle_start([per_agent(line_draw)], [per_agent(line_observe)])

    def world(self) -> World:
        return World(groups=(AgentGroup("agent", self.params.N, AGENT, obs_dim=8, prefix="agent"),),
                     landmarks=(Landmarks(2, LANDMARK),))

    def scenario_constants(self) -> dict:
        return {**matching_constants(self.params.terminate_on_success),
                "line_gaps": f32(max(self.params.N - 1, 1))}
