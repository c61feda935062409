"""simple_tag's own phases on the particle-world core (:mod:`gpurl.envs.mpe`): the reset draws, the catches
and rewards, and the observation (docs/specs/simple_tag.md). The core moves the world (forces, contacts,
integration, speed caps) and keeps the clock.

Phases take ``(e, [i,] s, c, actions)``: env e, agent i, ``s`` the env's arrays (``env.state``'s fields, the
core's scratch and world tables, the ``collisions`` metric and the toolkit's outputs), ``c`` its constants.
A step is the core's forces | move | caps, then ``simple_tag_end_step`` (per env: catches, rewards,
collisions, timestep and ends) | ``simple_tag_observe_agent``; a new episode draws agents and obstacles |
the core's clock | observe.

Device functions work on one env's views (``pos = s.pos[e]`` float32 [N, 2], ...), taken once per env.
Sizes (agents N, obstacles L, adversaries A) are read through :func:`simple_tag_agents` & co.: the globals
SIMPLE_TAG_AGENTS, ... are 0 (read the arrays' sizes and ``c``) unless a build fixes them as constants, as
the CPU does for large batches of small worlds (env.py), beside the core's own sizes.
"""
import math

import numpy as np

from ...kernels import per_agent, per_env
from ...kernels.targets import device
from ..mpe.env import particle_start, particle_step
from ..mpe.phases import particle_draw_position, particle_finish
from . import params as P

f32 = np.float32
_ZERO, _ONE, _TWO = f32(0.0), f32(1.0), f32(2.0)
_U0, _U1, _U2, _U3 = np.uint64(0), np.uint64(1), np.uint64(2), np.uint64(3)
_CATCH = f32(P.CATCH_REWARD)
_CATCH2 = f32((P.ADVERSARY_SIZE + P.GOOD_SIZE) ** 2)  # 0.125^2 = 0.015625, exact
_BOUND_START, _BOUND_CAP, _BOUND_SLOPE = f32(P.BOUND_START), f32(P.BOUND_CAP), f32(10.0)
_AGENT_LOW, _AGENT_SPAN = f32(-P.AGENT_RESET_RANGE), f32(2 * P.AGENT_RESET_RANGE)
_OBSTACLE_LOW, _OBSTACLE_SPAN = f32(-P.OBSTACLE_RESET_RANGE), f32(2 * P.OBSTACLE_RESET_RANGE)

#: Compile-time world sizes of a build, all three fixed together when SIMPLE_TAG_AGENTS > 0 (else read at
#: run time; L may be 0). With them fixed, LLVM unrolls the loops over agents and obstacles.
SIMPLE_TAG_AGENTS = 0
SIMPLE_TAG_OBSTACLES = 0
SIMPLE_TAG_ADVERSARIES = 0


@device
def simple_tag_agents(n):
    """N: the build's fixed agent count, else ``n`` (an array's size)."""
    return SIMPLE_TAG_AGENTS if SIMPLE_TAG_AGENTS > 0 else n


@device
def simple_tag_obstacles(n):
    """L: the build's fixed obstacle count (when its agent count is fixed), else ``n``."""
    return SIMPLE_TAG_OBSTACLES if SIMPLE_TAG_AGENTS > 0 else n


@device
def simple_tag_adversaries(c):
    """A: the build's fixed adversary count (when its agent count is fixed), else ``c.num_adversaries``."""
    return SIMPLE_TAG_ADVERSARIES if SIMPLE_TAG_AGENTS > 0 else c.num_adversaries


@device
def simple_tag_catches(pos, g, c):
    """Adversaries colliding with good agent g: |p_a - p_g| < 0.125 (strict; as |p_a - p_g|^2 < 0.125^2)."""
    count = 0
    for a in range(simple_tag_adversaries(c)):
        dx = pos[a, 0] - pos[g, 0]
        dy = pos[a, 1] - pos[g, 1]
        if dx * dx + dy * dy < _CATCH2:
            count += 1
    return count


@device
def simple_tag_good_reward(pos, g, count):
    """-10 per catch, minus bound(|x|) and bound(|y|): 0 below 0.9, linear to 1, exp(2q - 2) capped at 10."""
    reward = -_CATCH * f32(count)
    for d in range(2):
        q = abs(pos[g, d])
        if q >= _ONE:
            reward -= min(math.exp(_TWO * q - _TWO), _BOUND_CAP)
        elif q >= _BOUND_START:
            reward -= (q - _BOUND_START) * _BOUND_SLOPE
    return reward


@device
def simple_tag_observe(pos, vel, landmarks, i, c, row):
    """Agent i's observation into ``row`` (float32 [D]): v_i, p_i, obstacles - p_i, other agents - p_i,
    other good agents' v; a good agent's row is 2 shorter than the adversaries' and ends in zeros.

    Unsigned indices: Numba adds a negative-index fixup to every signed index it cannot prove >= 0 (the
    running slot k), which costs this function a good share of its CPU time.
    """
    num_agents = np.uint64(simple_tag_agents(pos.shape[0]))
    me = np.uint64(i)
    px = pos[me, _U0]
    py = pos[me, _U1]
    row[_U0] = vel[me, _U0]
    row[_U1] = vel[me, _U1]
    row[_U2] = px
    row[_U3] = py
    k = np.uint64(4)
    for m in range(np.uint64(simple_tag_obstacles(landmarks.shape[0]))):
        row[k] = landmarks[m, _U0] - px
        row[k + _U1] = landmarks[m, _U1] - py
        k += _U2
    for j in range(num_agents):
        if j != me:
            row[k] = pos[j, _U0] - px
            row[k + _U1] = pos[j, _U1] - py
            k += _U2
    num_adversaries = simple_tag_adversaries(c)
    for j in range(np.uint64(num_adversaries), num_agents):
        if j != me:
            row[k] = vel[j, _U0]
            row[k + _U1] = vel[j, _U1]
            k += _U2
    if i >= num_adversaries:  # a good agent's row is 2 shorter than the adversaries' (= the obs width)
        row[k] = _ZERO
        row[k + _U1] = _ZERO


def simple_tag_draw(e, i, s, c, actions):
    """Agent i uniform in [-1, 1)^2, then obstacles i, i + N, ... (entities N + i, 2N + i, ...) uniform in
    [-0.9, 0.9)^2: every obstacle is drawn by one agent's thread."""
    particle_draw_position(e, i, s, c, _AGENT_LOW, _AGENT_SPAN)
    num_agents = simple_tag_agents(s.pos.shape[1])
    for entity in range(num_agents + i, num_agents + simple_tag_obstacles(s.landmark_pos.shape[1]), num_agents):
        particle_draw_position(e, entity, s, c, _OBSTACLE_LOW, _OBSTACLE_SPAN)


def simple_tag_end_step(e, s, c, actions):
    """Per env: every good agent's catches and reward, the adversaries' shared reward, the collisions
    metric, timestep and ends (terminated where terminate_on_success and every good agent is caught).

    One thread per env on CUDA: a catch is A distance tests per good agent, less than a barrier costs."""
    pos = s.pos[e]
    reward = s.reward[e]
    num_adversaries = simple_tag_adversaries(c)
    total = 0
    all_caught = True
    for g in range(num_adversaries, simple_tag_agents(pos.shape[0])):
        count = simple_tag_catches(pos, g, c)
        total += count
        all_caught = all_caught and count > 0
        reward[g] = simple_tag_good_reward(pos, g, count)
    s.collisions[e] = f32(total)
    particle_finish(e, s, c, c.terminate_on_success != 0 and all_caught)
    adversary_reward = _CATCH * f32(total)
    for a in range(num_adversaries):
        reward[a] = adversary_reward


def simple_tag_observe_agent(e, i, s, c, actions):
    simple_tag_observe(s.pos[e], s.vel[e], s.landmark_pos[e], i, c, s.obs[e, i])


STEP_PHASES = particle_step(per_env(simple_tag_end_step), per_agent(simple_tag_observe_agent))
START_PHASES = particle_start([per_agent(simple_tag_draw)], [per_agent(simple_tag_observe_agent)])
