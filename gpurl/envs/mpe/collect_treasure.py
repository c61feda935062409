"""``collect_treasure`` (mpe2 ``collect_treasure_v1``): collectors pick up typed treasures and deliver them
to the deposit of their type (docs/specs/mpe.md, "collect_treasure").

mpe2's env overrides ``SimpleEnv._execute_world_step`` to run the scenario's ``post_step`` (pickups,
respawns, deliveries) between ``World.step`` and the rewards. Here that is the per-env phase
:func:`treasure_post_step` between the core's move phase and the per-agent reward phase. Treasures that
a pickup killed respawn in the next step's post-step from gpurl's counter-based RNG, keyed by the episode,
the step counter and the landmark (:func:`respawn_draw_ref` is its NumPy twin); mpe2's own stream is not
reproduced, only its distribution.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...kernels import per_agent, per_env, random_below, random_uniform
from ...kernels.fields import field
from ...kernels.rng import random_below_ref, random_uniform_ref
from ...kernels.targets import device
from ..params import MAX_AGENTS, ranged
from .env import ParticleEnv, particle_scratch, particle_start, particle_state, particle_step
from .goals import zero_fill
from .nearest import nearest_after
from .params import ParticleParams
from .phases import INDEX_DRAW_KEY, particle_draw_index, particle_draw_position, particle_finish
from .world import AgentGroup, Kind, Landmarks, World

f32 = np.float32
_ZERO, _ONE, _INF = f32(0.0), f32(1.0), f32(np.inf)
_BEFORE_ALL = f32(-1.0)  # nearest_after's start: a squared distance below any
#: Reset: agents uniform in [-1, 1)^2; treasures (at reset and when they respawn) in [-0.95, 0.95)^2.
_AGENT_LOW, _AGENT_SPAN = f32(-1.0), f32(2.0)
TREASURE_BOUND = 0.95
_TREASURE_LOW, _TREASURE_SPAN = f32(-TREASURE_BOUND), f32(2 * TREASURE_BOUND)
#: Where mpe2 parks a picked-up treasure until it respawns (its observation entries are zeros meanwhile).
PARKED = -999.0
_PARKED = f32(PARKED)
#: +5 to everyone per pickup and per delivery of the step; -5 to a collector per other collector it overlaps.
_EVENT_REWARD = f32(5.0)
_SHAPING = f32(0.1)
#: Most deposit types: mpe2 has six colours and raises ValueError beyond them.
MAX_DEPOSITS = 6
#: RNG key ("agent" slot) of landmark l's respawn draw of component k (x, y, type): RESPAWN_KEY + 3 l + k,
#: past the core's position keys (entities < 2**20) and index-draw keys (INDEX_DRAW_KEY + slot < 2**22).
RESPAWN_KEY = 2 * INDEX_DRAW_KEY
RESPAWN_DRAWS = 3

COLLECTOR = Kind("collector", size=0.05, accel=1.5, max_speed=1.0, collide=False)
DEPOSIT = Kind("deposit", size=0.075, accel=1.5, max_speed=1.0, mass=2.25, collide=False)
TREASURE = Kind("treasure", size=0.025, movable=False, collide=False)


@dataclass(frozen=True)
class CollectTreasureParams(ParticleParams):
    num_collectors: int = ranged(6, ge=1, le=MAX_AGENTS)
    """C >= 1 collectors: agents 0..C-1 (mpe2's collector_0..)."""
    num_deposits: int = ranged(2, ge=1, le=MAX_DEPOSITS)
    """T in 1..6 deposits, one per treasure type: agents C..C+T-1 (mpe2's deposit_0..); deposit k takes type k."""
    num_treasures: int = ranged(6, ge=1, le=MAX_AGENTS)
    """L >= 1 treasure landmarks."""

    @property
    def num_agents(self) -> int:
        return self.num_collectors + self.num_deposits

    @property
    def num_landmarks(self) -> int:
        return self.num_treasures

    @property
    def deposit_obs_dim(self) -> int:
        """p, v; every other agent (rel. p, v, 2T encoding); every treasure (rel. p, T one-hot):
        4 + (N - 1)(4 + 2T) + L(2 + T)."""
        T = self.num_deposits
        return 4 + (self.num_agents - 1) * (4 + 2 * T) + self.num_treasures * (2 + T)

    @property
    def collector_obs_dim(self) -> int:
        """A deposit's, plus the one-hot of what the collector holds (T) after its p, v."""
        return self.deposit_obs_dim + self.num_deposits


def _dmin(a: Kind, b: Kind) -> np.float32:
    """mpe2's collision distance size_a + size_b (summed in float64, rounded once)."""
    return f32(a.size + b.size)


# ---- helpers --------------------------------------------------------------------------------------------

@device
def treasure_distance(ax, ay, bx, by):
    """|a - b| in float32 (mpe2: sqrt(sum(square(delta))) in float64)."""
    dx = ax - bx
    dy = ay - by
    return math.sqrt(dx * dx + dy * dy)


@device
def treasure_agent_distance(e, i, j, s):
    """|p_i - p_j| of agents i and j of env e."""
    return treasure_distance(s.pos[e, i, 0], s.pos[e, i, 1], s.pos[e, j, 0], s.pos[e, j, 1])


@device
def treasure_landmark_distance(e, i, l, s):
    """|q_l - p_i| of agent i and treasure l of env e."""
    return treasure_distance(s.landmark_pos[e, l, 0], s.landmark_pos[e, l, 1], s.pos[e, i, 0], s.pos[e, i, 1])


@device
def treasure_respawn(e, l, s, c):
    """Treasure l of env e comes back alive at a uniform position in [-0.95, 0.95)^2 with a uniform type
    (mpe2's respawn with respawn_prob 1), keyed by (episode, step counter, landmark)."""
    key = RESPAWN_KEY + RESPAWN_DRAWS * l
    t = s.timestep[e]
    env = c.env_id_offset + e
    s.landmark_pos[e, l, 0] = _TREASURE_LOW + _TREASURE_SPAN * random_uniform(c.seed, env, key, s.episode[e], t)
    s.landmark_pos[e, l, 1] = _TREASURE_LOW + _TREASURE_SPAN * random_uniform(c.seed, env, key + 1, s.episode[e], t)
    s.type[e, l] = random_below(c.seed, env, key + 2, s.episode[e], t, c.num_types)
    s.alive[e, l] = True


def respawn_draw_ref(seed, env_id, episode, timestep, landmark, num_types) -> tuple:
    """NumPy twin of :func:`treasure_respawn`: (x, y) float32 and the type of treasure ``landmark``'s respawn
    in step ``timestep`` (the steps before it) of env ``env_id``'s episode counter ``episode``."""
    key = RESPAWN_KEY + RESPAWN_DRAWS * landmark
    x, y = (_TREASURE_LOW + _TREASURE_SPAN * random_uniform_ref(seed, env_id, key + k, episode, timestep)
            for k in (0, 1))
    return f32(x), f32(y), int(random_below_ref(seed, env_id, key + 2, episode, timestep, num_types))


@device
def treasure_pickups_and_respawns(e, s, c):
    """mpe2's pickup loop: each live treasure, in order, goes to the first empty-handed collector touching
    it (the treasure dies and is parked); each treasure dead since an earlier step respawns instead.
    Returns the number of pickups."""
    pickups = 0
    for l in range(s.landmark_pos.shape[1]):
        if s.alive[e, l]:
            for k in range(c.num_collectors):
                if s.holding[e, k] < 0 and treasure_landmark_distance(e, k, l, s) < c.pickup_dmin:
                    pickups += 1
                    s.alive[e, l] = False
                    s.holding[e, k] = s.type[e, l]
                    s.landmark_pos[e, l, 0] = _PARKED
                    s.landmark_pos[e, l, 1] = _PARKED
                    break
        else:
            treasure_respawn(e, l, s, c)
    return pickups


@device
def treasure_deliveries(e, s, c):
    """mpe2's delivery loop: each collector holding type h (picked up in this step or before) touching
    deposit h (agent C + h) empties its hands. Returns the number of deliveries."""
    deliveries = 0
    for k in range(c.num_collectors):
        h = s.holding[e, k]
        if 0 <= h < c.num_types and treasure_agent_distance(e, k, c.num_collectors + h, s) < c.deliver_dmin:
            deliveries += 1
            s.holding[e, k] = -1
    return deliveries


@device
def treasure_collector_reward(e, i, s, c):
    """-5 per other collector overlapping collector i; -0.1 x the distance to the nearest live treasure
    when empty-handed, else to the deposit of the type it holds."""
    r = _ZERO
    for k in range(c.num_collectors):
        if k != i and treasure_agent_distance(e, i, k, s) < c.overlap_dmin:
            r -= _EVENT_REWARD
    h = s.holding[e, i]
    if h < 0:
        nearest = _INF
        for l in range(s.landmark_pos.shape[1]):
            if s.alive[e, l]:
                nearest = min(nearest, treasure_landmark_distance(e, i, l, s))
        if nearest < _INF:  # no shaping when every treasure died in this step
            r -= _SHAPING * nearest
    elif h < c.num_types:
        r -= _SHAPING * treasure_agent_distance(e, i, c.num_collectors + h, s)
    return r


@device
def treasure_deposit_reward(e, i, s, c):
    """-0.1 x the distance from deposit i to the nearest collector holding its type, or where none does,
    to the collectors' centroid."""
    accepts = i - c.num_collectors  # the treasure type of deposit i
    nearest = _INF
    cx = _ZERO
    cy = _ZERO
    for k in range(c.num_collectors):
        cx += s.pos[e, k, 0]
        cy += s.pos[e, k, 1]
        if s.holding[e, k] == accepts:
            nearest = min(nearest, treasure_agent_distance(e, i, k, s))
    if nearest < _INF:
        return -(_SHAPING * nearest)
    n = f32(c.num_collectors)
    return -(_SHAPING * treasure_distance(cx / n, cy / n, s.pos[e, i, 0], s.pos[e, i, 1]))


@device
def treasure_observe_others(e, i, s, c, row, start):
    """Every other agent j, nearest first (ties in agent order, as Python's stable sort): p_j - p_i, v_j,
    [one-hot of j's deposit type | one-hot of what j holds] (4 + 2T each), into a zeroed ``row``."""
    T = c.num_types
    px = s.pos[e, i, 0]
    py = s.pos[e, i, 1]
    d2 = _BEFORE_ALL
    j = -1
    at = start
    for _ in range(s.pos.shape[1] - 1):
        d2, j = nearest_after(s.pos[e], s.pos.shape[1], px, py, i, d2, j)
        row[at] = s.pos[e, j, 0] - px
        row[at + 1] = s.pos[e, j, 1] - py
        row[at + 2] = s.vel[e, j, 0]
        row[at + 3] = s.vel[e, j, 1]
        if j >= c.num_collectors:
            row[at + 4 + j - c.num_collectors] = _ONE
        elif 0 <= s.holding[e, j] < T:
            row[at + 4 + T + s.holding[e, j]] = _ONE
        at += 4 + 2 * T
    return at


@device
def treasure_observe_treasures(e, i, s, c, row, start):
    """The live treasures, nearest first: q_l - p_i, one-hot of the type (2 + T each), into a zeroed
    ``row``; the dead ones stay zeros after them (mpe2 sorts them last, key 1e6, and writes zeros)."""
    T = c.num_types
    px = s.pos[e, i, 0]
    py = s.pos[e, i, 1]
    d2 = _BEFORE_ALL
    lm = -1
    at = start
    for _ in range(s.landmark_pos.shape[1]):  # every treasure by distance, the live ones written
        d2, lm = nearest_after(s.landmark_pos[e], s.landmark_pos.shape[1], px, py, -1, d2, lm)
        if s.alive[e, lm]:
            row[at] = s.landmark_pos[e, lm, 0] - px
            row[at + 1] = s.landmark_pos[e, lm, 1] - py
            if 0 <= s.type[e, lm] < T:
                row[at + 2 + s.type[e, lm]] = _ONE
            at += 2 + T


# ---- phases ---------------------------------------------------------------------------------------------

def treasure_draw(e, s, c, actions):
    """mpe2's reset_world: agents uniform in [-1, 1)^2, empty-handed; each treasure a uniform type and a
    position uniform in [-0.95, 0.95)^2, alive."""
    N = s.pos.shape[1]
    for i in range(N):
        particle_draw_position(e, i, s, c, _AGENT_LOW, _AGENT_SPAN)
        s.holding[e, i] = -1
    for l in range(s.landmark_pos.shape[1]):
        particle_draw_position(e, N + l, s, c, _TREASURE_LOW, _TREASURE_SPAN)
        s.type[e, l] = particle_draw_index(e, l, s, c, c.num_types)
        s.alive[e, l] = True


def treasure_post_step(e, s, c, actions):
    """mpe2's post_step after World.step: pickups and respawns, then deliveries; the step's shared reward
    (+5 per pickup and per delivery) goes to ``s.bonus``. Then the step ends (never terminal); the respawn
    keys read the step counter before particle_finish advances it."""
    events = treasure_pickups_and_respawns(e, s, c) + treasure_deliveries(e, s, c)
    s.bonus[e] = _EVENT_REWARD * f32(events)
    particle_finish(e, s, c, False)


def treasure_reward(e, i, s, c, actions):
    """Agent i's own shaping and penalties, plus the step's shared reward."""
    if i < c.num_collectors:
        own = treasure_collector_reward(e, i, s, c)
    else:
        own = treasure_deposit_reward(e, i, s, c)
    s.reward[e, i] = own + s.bonus[e]


def treasure_observe(e, i, s, c, actions):
    """[p, v, (collectors: one-hot of the held type, T), other agents by distance ((N - 1) x (4 + 2T)),
    live treasures by distance, dead ones as zeros (L x (2 + T))], zero-padded. The row is zeroed first
    and only non-zero entries are written."""
    row = s.obs[e, i]
    zero_fill(row, 0)
    row[0] = s.pos[e, i, 0]
    row[1] = s.pos[e, i, 1]
    row[2] = s.vel[e, i, 0]
    row[3] = s.vel[e, i, 1]
    at = 4
    if i < c.num_collectors:
        if 0 <= s.holding[e, i] < c.num_types:
            row[at + s.holding[e, i]] = _ONE
        at += c.num_types
    treasure_observe_treasures(e, i, s, c, row, treasure_observe_others(e, i, s, c, row, at))


class CollectTreasure(ParticleEnv):
    """mpe2's ``collect_treasure_v1``: collectors pick up treasures and deliver them to the matching deposit.

    Groups: ``collector`` (C agents, ``collector_k``), ``deposit`` (T agents, ``deposit_k``, deposit k takes
    treasure type k). Landmarks: L treasures. State beyond the core's: ``type`` int32 [E, L] (0..T-1),
    ``alive`` bool [E, L] (False from a pickup to the respawn in the next step; ``landmark_pos`` is then
    parked at -999 as in mpe2), ``holding`` int32 [E, N] (the type a collector carries, -1 for nothing and
    always for deposits). Reproduces mpe2's step order (World.step, post_step, rewards), its rewards and
    observations up to float32 rounding; respawn positions and types have mpe2's distribution, drawn from
    gpurl's RNG.
    """

    name = "collect_treasure"
    params_type = CollectTreasureParams
    state = particle_state(talks=False, type=field("int32", "num_landmarks"), alive=field("bool", "num_landmarks"),
                           holding=field("int32", "agents"))
    #: ``bonus`` [E]: the step's shared reward, from the post-step to every agent's reward.
    scratch = {**particle_scratch(talks=False), "bonus": field("float32")}
    step_phases = particle_step(per_env(treasure_post_step), per_agent(treasure_reward), per_agent(treasure_observe))
    start_phases = particle_start([per_env(treasure_draw)], [per_agent(treasure_observe)])

    def world(self) -> World:
        p = self.params
        # dim_c = 2 as in mpe2, unused: every agent is silent (no ``comm`` state, Discrete(5) actions).
        return World(groups=(AgentGroup("collector", p.num_collectors, COLLECTOR, p.collector_obs_dim, "collector"),
                             AgentGroup("deposit", p.num_deposits, DEPOSIT, p.deposit_obs_dim, "deposit")),
                     landmarks=(Landmarks(p.num_treasures, TREASURE),), dim_c=2)

    def scenario_constants(self) -> dict:
        return dict(num_collectors=np.int32(self.params.num_collectors), num_types=np.int32(self.params.num_deposits),
                    pickup_dmin=_dmin(TREASURE, COLLECTOR), deliver_dmin=_dmin(COLLECTOR, DEPOSIT),
                    overlap_dmin=_dmin(COLLECTOR, COLLECTOR))
