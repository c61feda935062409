"""simple_tag's device functions: the spec's physics, rewards, observation and reset draws, called by the
phases of :mod:`.kernels`.

They work on one env's views (``pos = s.pos[e]`` float32 [N, 2], ``vel`` [N, 2], ``landmarks`` [L, 2],
``force`` [N, 2], ``moves`` = ``actions[e]`` float32 [N, 1 or 5]), taken once per env: indexing a view
skips the env offset, its negative-index fixup and the reload of strides that the kernels' many
argument arrays keep on the stack, which was a large part of the CPU step's time.
Every float is float32 (NumPy scalar constants: a Python float literal would promote to float64).

Sizes (agents N, obstacles L, adversaries A) are read through :func:`simple_tag_agents` & co.: the
globals SIMPLE_TAG_AGENTS, ... are 0 (read the arrays' sizes) unless a build fixes them as constants
(``KernelEnv.build_constants``), as the CPU does for large batches of small worlds (env.py).
"""
import math

import numpy as np

from ...kernels import clamp_action, clip_action, random_uniform
from ...kernels.targets import device
from . import params as P

f32 = np.float32
_ZERO, _ONE, _TWO = f32(0.0), f32(1.0), f32(2.0)
_DT = f32(P.DT)
_KEEP = f32(1.0 - P.DAMPING)                              # velocity kept per step: 0.75
_INV_MARGIN = f32(1.0 / P.CONTACT_MARGIN)                 # z = (d_min - d) / k = (d_min - d) * 1000
_CONTACT_SCALE = f32(P.CONTACT_FORCE * P.CONTACT_MARGIN)  # contact_force * k = 0.1
_ADV_ACCEL, _GOOD_ACCEL = f32(P.ADVERSARY_ACCEL), f32(P.GOOD_ACCEL)
_ADV_MAX_SPEED, _GOOD_MAX_SPEED = f32(P.ADVERSARY_MAX_SPEED), f32(P.GOOD_MAX_SPEED)
_ADV_MAX_SPEED2, _GOOD_MAX_SPEED2 = f32(P.ADVERSARY_MAX_SPEED ** 2), f32(P.GOOD_MAX_SPEED ** 2)
# d_min = size_i + size_j, summed in float64 as mpe2 does and rounded once (0.125 stays exact).
_AA, _AG, _GG = P.ADVERSARY_SIZE * 2, P.ADVERSARY_SIZE + P.GOOD_SIZE, P.GOOD_SIZE * 2
_AO, _GO = P.ADVERSARY_SIZE + P.OBSTACLE_SIZE, P.GOOD_SIZE + P.OBSTACLE_SIZE
_DMIN_AA, _DMIN_AG, _DMIN_GG, _DMIN_AO, _DMIN_GO = (f32(d) for d in (_AA, _AG, _GG, _AO, _GO))
_CATCH2 = f32(_AG * _AG)  # 0.125^2 = 0.015625, exact
# softplus(z) < e^-40 for z < -40: such a pair adds < 1e-18 to a force and may be skipped (the spec's force
# acts at every distance, so skipping fewer pairs is always right). z < -40 <=> d > d_min + 40 k. One reach
# per kind of pair, the largest d_min's (agent-agent: two adversaries; agent-obstacle: an adversary), and
# squared distances: the far pairs cost a compare, no sqrt and no branch on the agents' kinds.
_REACH2_AGENTS = f32((_AA + 40 * P.CONTACT_MARGIN) ** 2)
_REACH2_OBSTACLE = f32((_AO + 40 * P.CONTACT_MARGIN) ** 2)
_NUM_MOVES = P.NUM_MOVES  # Discrete(5): stay, -x, +x, -y, +y
_DEEP_OVERLAP = f32(16.0)  # softplus(z) == z in float32 from here on (see simple_tag_contact_scale)
_U0, _U1, _U2, _U3 = np.uint64(0), np.uint64(1), np.uint64(2), np.uint64(3)
_CATCH = f32(P.CATCH_REWARD)
_BOUND_START, _BOUND_CAP, _BOUND_SLOPE = f32(P.BOUND_START), f32(P.BOUND_CAP), f32(10.0)
_AGENT_LOW, _AGENT_SPAN = f32(-P.AGENT_RESET_RANGE), f32(2 * P.AGENT_RESET_RANGE)
_OBSTACLE_LOW, _OBSTACLE_SPAN = f32(-P.OBSTACLE_RESET_RANGE), f32(2 * P.OBSTACLE_RESET_RANGE)

#: Compile-time world sizes of a build, all three fixed together when SIMPLE_TAG_AGENTS > 0 (else read at
#: run time; L may be 0). With them fixed, LLVM unrolls the loops over agents and obstacles and keeps an
#: env's positions in registers.
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
def simple_tag_action_force(moves, i, c):
    """(fx, fy) = u * accel of agent i (3.0 adversary, 4.0 good).

    Discrete k -> a unit move (k clamped into 0..4); Box a -> clip(a, 0, 1) (NaN -> 0),
    u = (a2 - a1, a4 - a3). ``moves`` is int or float32
    (the Box branch converts, so that a build for integer actions still computes in float32).
    """
    accel = _ADV_ACCEL if i < simple_tag_adversaries(c) else _GOOD_ACCEL
    if c.continuous != 0:
        a1 = clip_action(f32(moves[i, 1]), _ZERO, _ONE)  # NaN (validate=False only) acts as 0
        a2 = clip_action(f32(moves[i, 2]), _ZERO, _ONE)
        a3 = clip_action(f32(moves[i, 3]), _ZERO, _ONE)
        a4 = clip_action(f32(moves[i, 4]), _ZERO, _ONE)
        return (a2 - a1) * accel, (a4 - a3) * accel
    # Branch-free: a learning policy's actions look random to the branch predictor. clamp_action: an
    # unvalidated out-of-range action acts as the nearest valid one (the int conversion is a no-op for the
    # int builds; Box builds compile this branch but never run it).
    k = clamp_action(np.int64(moves[i, 0]), _NUM_MOVES)
    return (f32(k == 2) - f32(k == 1)) * accel, (f32(k == 4) - f32(k == 3)) * accel


@device
def simple_tag_contact_scale(d2, d_min):
    """s with c_ij = s * δ for δ = p_i - p_j, d2 = |δ|^2 > 0 (spec step 1).

    c_ij = contact_force * k * softplus(z) * δ/d, z = (d_min - d) / k, softplus evaluated as
    max(z, 0) + log1p(exp(-|z|)): z reaches ~275 for overlapping bodies, exp(z) would overflow.
    From z = 16 on that sum rounds to z itself (log1p(exp(-z)) < 1.2e-7, under half an ulp of z), so
    the exp and log1p are skipped there with the same bits: most pairs in reach overlap that deeply.
    """
    d = math.sqrt(d2)
    z = (d_min - d) * _INV_MARGIN
    softplus = z if z >= _DEEP_OVERLAP else max(z, _ZERO) + math.log1p(math.exp(-abs(z)))
    return _CONTACT_SCALE * softplus / d


@device
def simple_tag_pair_dmin(i, j, num_adversaries):
    """d_min = size_i + size_j of agents i and j (adversary 0.075, good 0.05)."""
    if i < num_adversaries and j < num_adversaries:
        return _DMIN_AA
    if i < num_adversaries or j < num_adversaries:
        return _DMIN_AG
    return _DMIN_GG


@device
def simple_tag_obstacle_forces(landmarks, i, c, px, py, fx, fy):
    """(fx, fy) + the contacts of agent i (at px, py) with every obstacle, in index order."""
    for m in range(simple_tag_obstacles(landmarks.shape[0])):
        dx = px - landmarks[m, 0]
        dy = py - landmarks[m, 1]
        d2 = dx * dx + dy * dy
        if d2 <= _REACH2_OBSTACLE:
            if d2 != _ZERO:  # coincident centres (NaN in mpe2) add nothing
                scale = simple_tag_contact_scale(d2, _DMIN_AO if i < simple_tag_adversaries(c) else _DMIN_GO)
                fx += scale * dx
                fy += scale * dy
    return fx, fy


@device
def simple_tag_agent_force(pos, landmarks, moves, i, c):
    """(fx, fy) on agent i (spec step 1): action force, then every contact in entity order."""
    fx, fy = simple_tag_action_force(moves, i, c)
    px = pos[i, 0]
    py = pos[i, 1]
    for j in range(simple_tag_agents(pos.shape[0])):
        if j != i:
            dx = px - pos[j, 0]
            dy = py - pos[j, 1]
            d2 = dx * dx + dy * dy
            if d2 <= _REACH2_AGENTS:
                if d2 != _ZERO:
                    scale = simple_tag_contact_scale(d2, simple_tag_pair_dmin(i, j, simple_tag_adversaries(c)))
                    fx += scale * dx
                    fy += scale * dy
    return simple_tag_obstacle_forces(landmarks, i, c, px, py, fx, fy)


@device
def simple_tag_move_agent(pos, vel, force, i, c):
    """Spec step 2 for agent i without the speed cap: position with the old velocity, then damping and
    force (mass 1). True when the new speed exceeds the agent's max speed (then call simple_tag_cap_speed).

    The step moves every agent, then caps (per env) only in the envs that need it (1-2% of agents are
    capped): LLVM turns an inline cap into a sqrt and two divisions for every agent.
    """
    vx = vel[i, 0]
    vy = vel[i, 1]
    pos[i, 0] += vx * _DT
    pos[i, 1] += vy * _DT
    vx = vx * _KEEP + force[i, 0] * _DT
    vy = vy * _KEEP + force[i, 1] * _DT
    vel[i, 0] = vx
    vel[i, 1] = vy
    return vx * vx + vy * vy > (_ADV_MAX_SPEED2 if i < simple_tag_adversaries(c) else _GOOD_MAX_SPEED2)


@device
def simple_tag_cap_speed(vel, i, c):
    """Cap agent i's speed: v / |v| * max_speed where |v|^2 > max_speed^2 (the sqrt only for those)."""
    vx = vel[i, 0]
    vy = vel[i, 1]
    adversary = i < simple_tag_adversaries(c)
    speed2 = vx * vx + vy * vy
    if speed2 > (_ADV_MAX_SPEED2 if adversary else _GOOD_MAX_SPEED2):
        speed = math.sqrt(speed2)
        max_speed = _ADV_MAX_SPEED if adversary else _GOOD_MAX_SPEED
        vel[i, 0] = vx / speed * max_speed
        vel[i, 1] = vy / speed * max_speed


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


@device
def simple_tag_draw(e, entity, s, c):
    """New-episode start of one entity of env e: agent ``entity`` < N (uniform in [-1, 1)^2, at rest) or
    obstacle ``entity - N`` (uniform in [-0.9, 0.9)^2).

    Keyed by (seed, global env id, entity, episode ordinal = state.episode, stream d = 0 x / 1 y).
    """
    num_agents = simple_tag_agents(s.pos.shape[1])
    env_id = c.env_id_offset + e
    ordinal = s.episode[e]
    agent = entity < num_agents
    low = _AGENT_LOW if agent else _OBSTACLE_LOW
    span = _AGENT_SPAN if agent else _OBSTACLE_SPAN
    for d in range(2):
        value = low + span * random_uniform(c.seed, env_id, entity, ordinal, d)
        if agent:
            s.pos[e, entity, d] = value
            s.vel[e, entity, d] = _ZERO
        else:
            s.landmark_pos[e, entity - num_agents, d] = value


@device
def simple_tag_finish(e, s, c, total, all_caught):
    """Per env after the catches: timestep + 1, the collisions metric, terminated/truncated."""
    t = s.timestep[e] + 1
    s.timestep[e] = t
    s.collisions[e] = f32(total)
    truncated = t >= c.max_cycles
    s.terminated[e] = c.terminate_on_success != 0 and all_caught and not truncated
    s.truncated[e] = truncated
