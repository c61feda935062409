"""``simple_reference`` (mpe2 ``simple_reference_v3``): two agents that move and talk, three coloured
landmarks; each agent knows the landmark the other one must reach (docs/specs/mpe.md)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...kernels import per_agent, per_env
from ...kernels.targets import device
from ...kernels.fields import field
from ..params import ranged
from .env import ParticleEnv, particle_scratch, particle_start, particle_state, particle_step
from .goals import draw_landmark, draw_uniform_world, goal_colour, goal_landmark, zero_fill
from .params import ParticleParams
from .phases import particle_finish
from .world import AgentGroup, Kind, Landmarks, World

NUM_AGENTS, NUM_LANDMARKS, DIM_C = 2, 3, 10
#: v, landmarks relative to the agent, the colour of the agent's own goal_b, the other agent's message.
OBS_DIM = 2 + 2 * NUM_LANDMARKS + 3 + DIM_C * (NUM_AGENTS - 1)
AGENT = Kind("agent", size=0.05, collide=False, silent=False)
LANDMARK = Kind("landmark", size=0.05, movable=False, collide=False)
#: mpe2's landmark colours: landmark l is 0.75 in channel l, 0.25 in the others.
_COLOUR_HIGH, _COLOUR_LOW = np.float32(0.75), np.float32(0.25)
_ZERO = np.float32(0.0)


@dataclass(frozen=True)
class SimpleReferenceParams(ParticleParams):
    local_ratio: float = ranged(0.5, ge=0.0, le=1.0)
    """Weight of an agent's own reward; the shared one (the agents' mean) gets 1 - local_ratio."""




def reference_draw_goals(e, s, c, actions):
    """goal_b of each agent: a landmark drawn uniformly (draw slot k for agent k)."""
    for k in range(s.pos.shape[1]):
        s.goal_b[e, k] = draw_landmark(e, k, s, c)


@device
def reference_own_reward(e, i, s):
    """mpe2's ``reward(agent i)``: -|p(goal_a) - q(goal_b)|, goal_a being the other agent (agent 0's is agent 1
    and agent 1's agent 0); 0 when goal_b names no landmark (mpe2's None branch)."""
    landmark = goal_landmark(e, i, s)
    if landmark < 0:
        return _ZERO
    other = 1 - i
    dx = s.pos[e, other, 0] - s.landmark_pos[e, landmark, 0]
    dy = s.pos[e, other, 1] - s.landmark_pos[e, landmark, 1]
    return -np.float32(math.sqrt(dx * dx + dy * dy))


def reference_reward(e, s, c, actions):
    """r_i = global * (1 - local_ratio) + own_i * local_ratio, global the mean of the own rewards."""
    num_agents = s.pos.shape[1]
    total = _ZERO
    for k in range(num_agents):
        total += reference_own_reward(e, k, s)
    shared = total / np.float32(num_agents)
    for k in range(num_agents):
        s.reward[e, k] = shared * c.global_weight + reference_own_reward(e, k, s) * c.local_ratio
    particle_finish(e, s, c, False)


def reference_observe(e, i, s, c, actions):
    """[v (2), q_l - p for each landmark (2L), colour of the agent's own goal_b (3), the other agent's message
    (dim_c)] (21), as mpe2's observation."""
    row = s.obs[e, i]
    px = s.pos[e, i, 0]
    py = s.pos[e, i, 1]
    row[0] = s.vel[e, i, 0]
    row[1] = s.vel[e, i, 1]
    at = 2
    for landmark in range(s.landmark_pos.shape[1]):
        row[at] = s.landmark_pos[e, landmark, 0] - px
        row[at + 1] = s.landmark_pos[e, landmark, 1] - py
        at += 2
    goal = goal_landmark(e, i, s)
    for channel in range(3):
        row[at + channel] = goal_colour(goal, channel, _COLOUR_HIGH, _COLOUR_LOW)
    at += 3
    for other in range(s.pos.shape[1]):
        if other != i:
            for d in range(s.comm.shape[2]):
                row[at + d] = s.comm[e, other, d]
            at += s.comm.shape[2]
    zero_fill(row, at)


class SimpleReference(ParticleEnv):
    """mpe2's ``simple_reference_v3``.

    Group ``agent`` (``agent_0``, ``agent_1``): size 0.05, accel 5, no speed cap, no collisions, both move and
    talk (dim_c = 10: Discrete(50) = 5 moves x 10 words, or Box(15)). Three landmarks (size 0.05). State:
    ``pos``, ``vel``, ``comm`` [E, 2, 10], ``landmark_pos`` [E, 3, 2], ``timestep``, ``goal_b`` int32 [E, 2]
    (each agent's drawn goal landmark as an entity index 2..4). goal_a is fixed (the other agent) and not
    stored. Agent i sees the colour of its own goal_b, which is the landmark the *other* agent must reach; its
    own reward is the other agent's distance to it, blended with the mean by ``local_ratio``.
    """

    name = "simple_reference"
    params_type = SimpleReferenceParams
    state = particle_state(talks=True, goal_b=field("int32", "agents"))
    scratch = particle_scratch(talks=True)
    step_phases = particle_step(per_env(reference_reward), per_agent(reference_observe))
    start_phases = particle_start([per_agent(draw_uniform_world), per_env(reference_draw_goals)],
                                  [per_agent(reference_observe)])

    def world(self) -> World:
        return World(groups=(AgentGroup("agent", NUM_AGENTS, AGENT, obs_dim=OBS_DIM, prefix="agent"),),
                     landmarks=(Landmarks(NUM_LANDMARKS, LANDMARK),), dim_c=DIM_C)

    def scenario_constants(self) -> dict:
        ratio = self.params.local_ratio
        return dict(local_ratio=np.float32(ratio), global_weight=np.float32(1.0 - ratio))
