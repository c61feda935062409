"""The particle world's physics (mpe2 1.1.1 ``World.step``), once for every scenario: action forces,
contact forces, integration with speed caps, and the agents' messages (docs/specs/mpe.md, "Step").

Device functions over one env's views, float32 throughout. ``s`` holds the scenario's arrays and the world
tables of :func:`.world.world_tables` (``s.entity_kind``, ``s.kind_*``, ``s.pair_*``); ``c`` holds the
constants of :func:`.world.world_constants`. ``moves`` is ``actions[e]``: int [N, 1] (mpe2's Discrete
index, movement and message combined as ``move + 5 * message``) or float32 [N, A] (mpe2's Box vector,
zero-padded to the widest agent).
"""
import math

import numpy as np

from ...kernels import clamp_action, clip_action
from ...kernels.targets import device
from .world import NUM_MOVES

f32 = np.float32
_ZERO, _ONE = f32(0.0), f32(1.0)
#: softplus(z) == z in float32 from here on: log1p(exp(-z)) < 1.2e-7 is under half an ulp of z.
_DEEP_OVERLAP = f32(16.0)


@device
def particle_discrete(moves, i, s, kind):
    """Agent i's Discrete action, clamped into its kind's n (an unvalidated out-of-range action acts as
    the nearest valid one)."""
    return clamp_action(np.int64(moves[i, 0]), s.kind_actions[kind])


@device
def particle_action_force(moves, i, s, c, kind):
    """(fx, fy) = u * accel of agent i (mpe2's _set_action); (0, 0) for an immovable agent.

    Discrete: move = action % 5 -> a unit step (no-op, -x, +x, -y, +y). Box: clip(a, 0, 1) (NaN -> 0),
    u = (a2 - a1, a4 - a3)."""
    if s.kind_moves[kind] == 0:
        return _ZERO, _ZERO
    accel = s.kind_accel[kind]
    if c.continuous != 0:
        a1 = clip_action(f32(moves[i, 1]), _ZERO, _ONE)
        a2 = clip_action(f32(moves[i, 2]), _ZERO, _ONE)
        a3 = clip_action(f32(moves[i, 3]), _ZERO, _ONE)
        a4 = clip_action(f32(moves[i, 4]), _ZERO, _ONE)
        return (a2 - a1) * accel, (a4 - a3) * accel
    k = particle_discrete(moves, i, s, kind) % NUM_MOVES
    return (f32(k == 2) - f32(k == 1)) * accel, (f32(k == 4) - f32(k == 3)) * accel


@device
def particle_contact_scale(d2, d_min, c):
    """s with contact force c_ij = s * δ for δ = p_i - p_j, d2 = |δ|^2 > 0:
    contact_force * k * softplus((d_min - d) / k) / d, softplus overflow-safe (z reaches ~275)."""
    d = math.sqrt(d2)
    z = (d_min - d) * c.inv_margin
    softplus = z if z >= _DEEP_OVERLAP else max(z, _ZERO) + math.log1p(math.exp(-abs(z)))
    return c.contact_scale * softplus / d


@device
def particle_contacts(pos, landmarks, i, s, c, kind, fx, fy):
    """(fx, fy) plus the contacts of agent i with every other colliding entity, in entity order (agents,
    then landmarks: mpe2's pair loop adds them in that order). Coincident centres (NaN in mpe2) add nothing."""
    px = pos[i, 0]
    py = pos[i, 1]
    num_agents = pos.shape[0]
    for j in range(num_agents + landmarks.shape[0]):
        if j != i:
            other = s.entity_kind[j]
            if j < num_agents:
                dx = px - pos[j, 0]
                dy = py - pos[j, 1]
            else:
                dx = px - landmarks[j - num_agents, 0]
                dy = py - landmarks[j - num_agents, 1]
            d2 = dx * dx + dy * dy
            if d2 <= s.pair_reach2[kind, other] and d2 != _ZERO:
                scale = particle_contact_scale(d2, s.pair_dmin[kind, other], c)
                fx += scale * dx
                fy += scale * dy
    return fx, fy


@device
def particle_force(pos, landmarks, moves, i, s, c):
    """(fx, fy), the total force on agent i from the old state: its action, then its contacts."""
    kind = s.entity_kind[i]
    fx, fy = particle_action_force(moves, i, s, c, kind)
    if c.any_contacts != 0 and s.kind_moves[kind] != 0:
        fx, fy = particle_contacts(pos, landmarks, i, s, c, kind, fx, fy)
    return fx, fy


@device
def particle_integrate(pos, vel, i, s, c, fx, fy):
    """mpe2's integrate_state for agent i: position with the old velocity, damping, force / mass, speed cap
    (v / |v| * max_speed where |v| > max_speed). Immovable agents keep their place and zero velocity."""
    kind = s.entity_kind[i]
    if s.kind_moves[kind] == 0:
        return
    vx = vel[i, 0]
    vy = vel[i, 1]
    pos[i, 0] += vx * c.dt
    pos[i, 1] += vy * c.dt
    mass = s.kind_mass[kind]
    vx = vx * c.keep + fx / mass * c.dt
    vy = vy * c.keep + fy / mass * c.dt
    speed2 = vx * vx + vy * vy
    if speed2 > s.kind_max_speed2[kind]:
        speed = math.sqrt(speed2)
        max_speed = s.kind_max_speed[kind]
        vx = vx / speed * max_speed
        vy = vy / speed * max_speed
    vel[i, 0] = vx
    vel[i, 1] = vy


@device
def particle_message(moves, comm, i, s, c):
    """mpe2's update_agent_state: agent i's message ``comm[i, :dim_c]``: one-hot of its Discrete message
    (action // 5 if it moves, else the action), the clipped Box components after its movement block, or
    zeros for a silent agent."""
    kind = s.entity_kind[i]
    width = comm.shape[1]
    if s.kind_talks[kind] == 0:
        for d in range(width):
            comm[i, d] = _ZERO
    elif c.continuous != 0:
        first = NUM_MOVES if s.kind_moves[kind] != 0 else 0
        for d in range(width):
            comm[i, d] = clip_action(f32(moves[i, first + d]), _ZERO, _ONE)
    else:
        a = particle_discrete(moves, i, s, kind)
        word = a // NUM_MOVES if s.kind_moves[kind] != 0 else a
        for d in range(width):
            comm[i, d] = _ONE if d == word else _ZERO
