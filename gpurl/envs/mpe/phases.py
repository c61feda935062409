"""The core's phases and the helpers scenarios call from theirs (``fn(e, [i,] s, c, actions)``).

A step runs ``particle_forces_phase`` (every agent's force from the old state) | ``particle_move_phase``
(integrate, then the agent's message: mpe2's World.step) | ``particle_cap_phase`` (speed caps, only in the
envs where an agent got too fast) | the scenario's phases, one of which ends the step with
:func:`particle_finish`. An episode starts with the scenario's draws (:func:`particle_draw_position`,
:func:`particle_draw_index`) | ``particle_start_clock`` | the scenario's observation.
"""
import numpy as np

from ...kernels import random_below, random_uniform
from ...kernels.targets import device
from .physics import (particle_agents, particle_cap_speed, particle_force, particle_message, particle_move,
                      particle_world_talks)

_ZERO = np.float32(0.0)
#: RNG key (the "agent" slot) of a scenario's k-th per-episode index draw: past every entity index
#: (agents + landmarks <= 2**20), so draws of positions and of indices never share a key.
INDEX_DRAW_KEY = 2**21


def particle_forces_phase(e, i, s, c, actions):
    fx, fy = particle_force(s.pos[e], s.landmark_pos[e], actions[e], i, s, c)
    s.force[e, i, 0] = fx
    s.force[e, i, 1] = fy


def particle_move_phase(e, i, s, c, actions):
    if particle_move(s.pos[e], s.vel[e], i, s, c, s.force[e, i, 0], s.force[e, i, 1]):
        s.too_fast[e] = 1  # every too fast agent writes 1: a harmless race
    if particle_world_talks(c):  # else every agent is silent and ``comm`` has no columns
        particle_message(actions[e], s.comm[e], i, s, c)


def particle_cap_phase(e, s, c, actions):
    """Per env: the speed caps of mpe2's integrate_state, only where ``particle_move_phase`` found an agent
    too fast (see :func:`.physics.particle_move`). One thread per env on CUDA: a cap is a compare per agent,
    less than a barrier costs, and the scenario's per-env phase that usually follows needs no barrier."""
    if s.too_fast[e] != 0:
        s.too_fast[e] = 0
        vel = s.vel[e]
        for i in range(particle_agents(vel.shape[0])):
            particle_cap_speed(vel, i, s)


def particle_start_clock(e, i, s, c, actions):
    """A new episode's agents rest and are silent (mpe2's reset_world); the clock starts at 0."""
    s.vel[e, i, 0] = _ZERO
    s.vel[e, i, 1] = _ZERO
    if particle_world_talks(c):
        for d in range(s.comm.shape[2]):
            s.comm[e, i, d] = _ZERO
    if i == 0:
        s.timestep[e] = 0


@device
def particle_finish(e, s, c, terminal):
    """End a step of env e: timestep + 1; truncated when it reaches max_cycles, else terminated when the
    scenario's ``terminal`` holds (mpe2 tests truncation first)."""
    t = s.timestep[e] + 1
    s.timestep[e] = t
    truncated = t >= c.max_cycles
    s.truncated[e] = truncated
    s.terminated[e] = terminal and not truncated


@device
def particle_uniform(e, key, stream, s, c, low, span):
    """float32 low + span * U[0, 1) for env e's episode, keyed by (seed, global env id, key, episode, stream)."""
    return low + span * random_uniform(c.seed, c.env_id_offset + e, key, s.episode[e], stream)


@device
def particle_draw_position(e, entity, s, c, low, span):
    """Entity ``entity`` (an agent < N, else a landmark) of env e uniform in [low, low + span)^2
    (mpe2's ``np_random.uniform(low, high, 2)``; the streams are gpurl's own)."""
    num_agents = particle_agents(s.pos.shape[1])
    x = particle_uniform(e, entity, 0, s, c, low, span)
    y = particle_uniform(e, entity, 1, s, c, low, span)
    if entity < num_agents:
        s.pos[e, entity, 0] = x
        s.pos[e, entity, 1] = y
    else:
        s.landmark_pos[e, entity - num_agents, 0] = x
        s.landmark_pos[e, entity - num_agents, 1] = y


@device
def particle_draw_index(e, slot, s, c, n):
    """The scenario's ``slot``-th per-episode integer draw of env e, uniform in [0, n)."""
    return random_below(c.seed, c.env_id_offset + e, INDEX_DRAW_KEY + slot, s.episode[e], 0, n)


@device
def particle_observe_motion(row, e, i, s):
    """The head most mpe2 observations start with: ``row[0:4] = v_i, p_i``; returns p_i as (px, py) for the
    relative blocks that follow."""
    px = s.pos[e, i, 0]
    py = s.pos[e, i, 1]
    row[0] = s.vel[e, i, 0]
    row[1] = s.vel[e, i, 1]
    row[2] = px
    row[3] = py
    return px, py
