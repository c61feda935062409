"""The particle world's physics (mpe2 1.1.1 ``World.step``), once for every scenario: action forces,
contact forces, integration with speed caps, and the agents' messages (docs/specs/mpe.md, "Step").

Device functions over one env's views, float32 throughout. ``s`` holds the scenario's arrays and the world
tables of :func:`.world.world_tables` (``s.entity_kind``, ``s.kind_*``, ``s.pair_*``); ``c`` holds the
constants of :func:`.world.world_constants`. ``moves`` is ``actions[e]``: int [N, 1] (mpe2's Discrete
index, movement and message combined as ``move + 5 * message``) or float32 [N, A] (mpe2's Box vector,
zero-padded to the widest agent).

The world is read through accessors (:func:`particle_agents`, :func:`particle_agent_kind`,
:func:`particle_kind_accel`, ...). A build for a large CPU batch of a small world fixes the world as build
constants (:func:`fixed_world_constants`, ``ParticleEnv.build_constants``): its sizes, and every world table
and world number as a tuple the accessors index. Then LLVM unrolls the loops over entities, keeps an env's
positions in registers, and every kind's number is a literal: a kind's flags fold into the code (a silent
world compiles no message, a kind that collides with nothing no contact loop). Other builds read the arrays,
tables and ``c``. Both compute the same bits.
Performance idioms: docs/envs.md#performance-idioms-of-scenario-code
"""
import math

import numpy as np

from ...kernels import clamp_action, clip_action
from ...kernels.targets import device
from .world import NUM_MOVES, World, world_constants, world_tables

f32 = np.float32
_ZERO, _ONE = f32(0.0), f32(1.0)
#: softplus(z) == z in float32 from here on: log1p(exp(-z)) < 1.2e-7 is under half an ulp of z.
_DEEP_OVERLAP = f32(16.0)

# ---- the world as a build fixes it (PARTICLE_AGENTS > 0), else unused -----------------------------------
PARTICLE_AGENTS = 0
PARTICLE_LANDMARKS = 0
#: An observation row's width (the widest group's obs_dim)
PARTICLE_OBS_WIDTH = 0
#: ``PARTICLE_<TABLE>``: world table ``<table>`` (:func:`.world.world_tables`), flattened (pairs: a * K + b)
PARTICLE_ENTITY_KIND = (0,)
PARTICLE_KIND_ACCEL = (_ZERO,)
PARTICLE_KIND_MAX_SPEED = (_ZERO,)
PARTICLE_KIND_MAX_SPEED2 = (_ZERO,)
PARTICLE_KIND_MASS = (_ONE,)
PARTICLE_KIND_MOVES = (0,)
PARTICLE_KIND_TALKS = (0,)
PARTICLE_KIND_ACTIONS = (1,)
PARTICLE_PAIR_DMIN = (_ZERO,)
PARTICLE_PAIR_REACH2 = (_ZERO,)
PARTICLE_KIND_AGENT_REACH2 = (_ZERO,)
PARTICLE_KIND_LANDMARK_REACH2 = (_ZERO,)
#: ``PARTICLE_<NAME>``: world number ``c.<name>`` (:func:`.world.world_constants`)
FIXED_WORLD_NUMBERS = ("dt", "keep", "any_talks", "any_contacts")
PARTICLE_DT = _ZERO
PARTICLE_KEEP = _ZERO
PARTICLE_ANY_TALKS = 0
PARTICLE_ANY_CONTACTS = 0


def fixed_world_constants(world: World) -> dict:
    """The build constants that fix ``world`` in a build: ``PARTICLE_AGENTS``, ``PARTICLE_LANDMARKS``, every
    world table as ``PARTICLE_<TABLE>`` and the world numbers FIXED_WORLD_NUMBERS as ``PARTICLE_<NAME>``."""
    def literal(v):
        return int(v) if np.issubdtype(type(v), np.integer) else f32(v)

    fixed = {"PARTICLE_AGENTS": world.num_agents, "PARTICLE_LANDMARKS": world.num_landmarks,
             "PARTICLE_OBS_WIDTH": max(g.obs_dim for g in world.groups)}
    for name, table in world_tables(world).items():
        fixed[f"PARTICLE_{name.upper()}"] = tuple(literal(v) for v in table.ravel())
    numbers = world_constants(world, max_cycles=1, continuous=False)
    fixed.update((f"PARTICLE_{name.upper()}", literal(numbers[name])) for name in FIXED_WORLD_NUMBERS)
    return fixed


@device
def particle_agents(n):
    """N: the build's fixed agent count, else ``n`` (an array's size)."""
    return PARTICLE_AGENTS if PARTICLE_AGENTS > 0 else n


@device
def particle_landmarks(n):
    """L: the build's fixed landmark count (when its agent count is fixed), else ``n``."""
    return PARTICLE_LANDMARKS if PARTICLE_AGENTS > 0 else n


@device
def particle_obs_width(width):
    """An observation row's width: the build's fixed one (the widest group's obs_dim), else ``width`` (the
    row's size)."""
    return PARTICLE_OBS_WIDTH if PARTICLE_AGENTS > 0 else width


@device
def particle_agent_kind(j, s):
    """The kind of agent j (``entity_kind``)."""
    return PARTICLE_ENTITY_KIND[j] if PARTICLE_AGENTS > 0 else np.int64(s.entity_kind[j])


@device
def particle_landmark_kind(m, s):
    """The kind of landmark m, entity N + m (``entity_kind``)."""
    if PARTICLE_AGENTS > 0:
        return PARTICLE_ENTITY_KIND[PARTICLE_AGENTS + m]
    return np.int64(s.entity_kind[s.pos.shape[1] + m])


@device
def particle_kind_accel(kind, s):
    return PARTICLE_KIND_ACCEL[kind] if PARTICLE_AGENTS > 0 else s.kind_accel[kind]


@device
def particle_kind_max_speed(kind, s):
    return PARTICLE_KIND_MAX_SPEED[kind] if PARTICLE_AGENTS > 0 else s.kind_max_speed[kind]


@device
def particle_kind_max_speed2(kind, s):
    return PARTICLE_KIND_MAX_SPEED2[kind] if PARTICLE_AGENTS > 0 else s.kind_max_speed2[kind]


@device
def particle_kind_mass(kind, s):
    return PARTICLE_KIND_MASS[kind] if PARTICLE_AGENTS > 0 else s.kind_mass[kind]


@device
def particle_kind_moves(kind, s):
    """The kind moves (its actions start with mpe2's movement block)."""
    return (PARTICLE_KIND_MOVES[kind] if PARTICLE_AGENTS > 0 else s.kind_moves[kind]) != 0


@device
def particle_kind_talks(kind, s):
    """The kind sends messages."""
    return (PARTICLE_KIND_TALKS[kind] if PARTICLE_AGENTS > 0 else s.kind_talks[kind]) != 0


@device
def particle_kind_actions(kind, s):
    """The kind's Discrete n."""
    return PARTICLE_KIND_ACTIONS[kind] if PARTICLE_AGENTS > 0 else np.int64(s.kind_actions[kind])


@device
def particle_kind_agent_reach2(kind, s):
    """The kind's largest contact reach^2 with the world's agents (< 0: it collides with none)."""
    return PARTICLE_KIND_AGENT_REACH2[kind] if PARTICLE_AGENTS > 0 else s.kind_agent_reach2[kind]


@device
def particle_kind_landmark_reach2(kind, s):
    """The kind's largest contact reach^2 with the world's landmarks (< 0: it collides with none)."""
    return PARTICLE_KIND_LANDMARK_REACH2[kind] if PARTICLE_AGENTS > 0 else s.kind_landmark_reach2[kind]


@device
def particle_pair_dmin(kind, other, s):
    """size_a + size_b of two kinds."""
    if PARTICLE_AGENTS > 0:
        return PARTICLE_PAIR_DMIN[kind * len(PARTICLE_KIND_MASS) + other]
    return s.pair_dmin[kind, other]


@device
def particle_pair_reach2(kind, other, s):
    """The contact reach^2 of two kinds (< 0: they do not collide)."""
    if PARTICLE_AGENTS > 0:
        return PARTICLE_PAIR_REACH2[kind * len(PARTICLE_KIND_MASS) + other]
    return s.pair_reach2[kind, other]


@device
def particle_dt(c):
    return PARTICLE_DT if PARTICLE_AGENTS > 0 else c.dt


@device
def particle_keep(c):
    """1 - damping."""
    return PARTICLE_KEEP if PARTICLE_AGENTS > 0 else c.keep


@device
def particle_world_talks(c):
    """Some agent talks (else ``comm`` has no columns and no message is written)."""
    return (PARTICLE_ANY_TALKS if PARTICLE_AGENTS > 0 else c.any_talks) != 0


@device
def particle_world_contacts(c):
    """Some movable entity collides with another one (else no contact is ever tested)."""
    return (PARTICLE_ANY_CONTACTS if PARTICLE_AGENTS > 0 else c.any_contacts) != 0


# ---- the physics ---------------------------------------------------------------------------------------


@device
def particle_discrete(moves, i, s, kind):
    """Agent i's Discrete action, clamped into its kind's n (an unvalidated out-of-range action acts as
    the nearest valid one)."""
    return clamp_action(np.int64(moves[i, 0]), particle_kind_actions(kind, s))


@device
def particle_action_force(moves, i, s, c, kind):
    """(fx, fy) = u * accel of agent i (mpe2's _set_action); (0, 0) for an immovable agent.

    Discrete: move = action % 5 -> a unit step (no-op, -x, +x, -y, +y), branch-free (a learning policy's
    actions look random to the branch predictor). Box: clip(a, 0, 1) (NaN -> 0), u = (a2 - a1, a4 - a3)."""
    if not particle_kind_moves(kind, s):
        return _ZERO, _ZERO
    accel = particle_kind_accel(kind, s)
    if c.continuous != 0:
        a1 = clip_action(f32(moves[i, 1]), _ZERO, _ONE)
        a2 = clip_action(f32(moves[i, 2]), _ZERO, _ONE)
        a3 = clip_action(f32(moves[i, 3]), _ZERO, _ONE)
        a4 = clip_action(f32(moves[i, 4]), _ZERO, _ONE)
        return (a2 - a1) * accel, (a4 - a3) * accel
    k = particle_discrete(moves, i, s, kind)
    if k >= NUM_MOVES:  # an agent that talks too: move + 5 * message (a silent one never gets here)
        k = k % NUM_MOVES
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
def particle_contact(s, c, kind, other, dx, dy, d2, fx, fy):
    """(fx, fy) plus the contact with an entity of kind ``other`` at δ = (dx, dy), |δ|^2 = d2, where the pair
    collides and is within reach (coincident centres, NaN in mpe2, add nothing)."""
    if d2 <= particle_pair_reach2(kind, other, s) and d2 != _ZERO:
        scale = particle_contact_scale(d2, particle_pair_dmin(kind, other, s), c)
        fx += scale * dx
        fy += scale * dy
    return fx, fy


@device
def particle_contacts(pos, landmarks, i, s, c, kind, fx, fy):
    """(fx, fy) plus the contacts of agent i with every other colliding entity, in entity order (agents,
    then landmarks: mpe2's pair loop adds them in that order).

    A far pair costs a squared distance and one compare against the kind's reach (its largest reach with
    any agent, or any landmark, of the world); the pair's own reach and d_min are looked up only within it.
    A kind that collides with no agent (landmark) of the world skips that loop."""
    px = pos[i, 0]
    py = pos[i, 1]
    reach2 = particle_kind_agent_reach2(kind, s)
    if reach2 >= _ZERO:
        for j in range(particle_agents(pos.shape[0])):
            if j != i:
                dx = px - pos[j, 0]
                dy = py - pos[j, 1]
                d2 = dx * dx + dy * dy
                if d2 <= reach2:
                    fx, fy = particle_contact(s, c, kind, particle_agent_kind(j, s), dx, dy, d2, fx, fy)
    reach2 = particle_kind_landmark_reach2(kind, s)
    if reach2 >= _ZERO:
        for m in range(particle_landmarks(landmarks.shape[0])):
            dx = px - landmarks[m, 0]
            dy = py - landmarks[m, 1]
            d2 = dx * dx + dy * dy
            if d2 <= reach2:
                fx, fy = particle_contact(s, c, kind, particle_landmark_kind(m, s), dx, dy, d2, fx, fy)
    return fx, fy


@device
def particle_force(pos, landmarks, moves, i, s, c):
    """(fx, fy), the total force on agent i from the old state: its action, then its contacts."""
    kind = particle_agent_kind(i, s)
    fx, fy = particle_action_force(moves, i, s, c, kind)
    if particle_world_contacts(c) and particle_kind_moves(kind, s):
        fx, fy = particle_contacts(pos, landmarks, i, s, c, kind, fx, fy)
    return fx, fy


@device
def particle_move(pos, vel, i, s, c, fx, fy):
    """mpe2's integrate_state for agent i without the speed cap: position with the old velocity, damping,
    force / mass. True when the new speed exceeds the kind's max speed: then :func:`particle_cap_speed`.
    Immovable agents keep their place and zero velocity.

    The cap is separate so that a step caps only the envs that need it (a few % of agents are capped):
    inline, LLVM turns it into a sqrt and two divisions for every agent."""
    kind = particle_agent_kind(i, s)
    if not particle_kind_moves(kind, s):
        return False
    vx = vel[i, 0]
    vy = vel[i, 1]
    dt = particle_dt(c)
    pos[i, 0] += vx * dt
    pos[i, 1] += vy * dt
    mass = particle_kind_mass(kind, s)
    if mass != _ONE:  # f / 1 == f: most kinds skip the divisions
        fx = fx / mass
        fy = fy / mass
    vx = vx * particle_keep(c) + fx * dt
    vy = vy * particle_keep(c) + fy * dt
    vel[i, 0] = vx
    vel[i, 1] = vy
    return vx * vx + vy * vy > particle_kind_max_speed2(kind, s)


@device
def particle_cap_speed(vel, i, s):
    """Cap agent i's speed: v / |v| * max_speed where |v|^2 > max_speed^2 (the sqrt only for those)."""
    kind = particle_agent_kind(i, s)
    vx = vel[i, 0]
    vy = vel[i, 1]
    speed2 = vx * vx + vy * vy
    if speed2 > particle_kind_max_speed2(kind, s):
        speed = math.sqrt(speed2)
        max_speed = particle_kind_max_speed(kind, s)
        vel[i, 0] = vx / speed * max_speed
        vel[i, 1] = vy / speed * max_speed


@device
def particle_integrate(pos, vel, i, s, c, fx, fy):
    """mpe2's integrate_state for agent i: :func:`particle_move`, then the speed cap (v / |v| * max_speed
    where |v| > max_speed). The core's step defers the cap to a phase of its own instead."""
    if particle_move(pos, vel, i, s, c, fx, fy):
        particle_cap_speed(vel, i, s)


@device
def particle_message(moves, comm, i, s, c):
    """mpe2's update_agent_state: agent i's message ``comm[i, :dim_c]``: one-hot of its Discrete message
    (action // 5 if it moves, else the action), the clipped Box components after its movement block, or
    zeros for a silent agent."""
    kind = particle_agent_kind(i, s)
    width = comm.shape[1]
    if not particle_kind_talks(kind, s):
        for d in range(width):
            comm[i, d] = _ZERO
    elif c.continuous != 0:
        first = NUM_MOVES if particle_kind_moves(kind, s) else 0
        for d in range(width):
            comm[i, d] = clip_action(f32(moves[i, first + d]), _ZERO, _ONE)
    else:
        a = particle_discrete(moves, i, s, kind)
        word = a // NUM_MOVES if particle_kind_moves(kind, s) else a
        for d in range(width):
            comm[i, d] = _ONE if d == word else _ZERO
