"""``simple_world_comm`` (mpe2 ``simple_world_comm_v3``): simple_tag with food, forests that hide agents, and a
lead adversary that sees everyone and talks to the other adversaries (docs/specs/mpe.md).

Entities (mpe2's world order): agents ``leadadversary_0``, ``adversary_0..A-2``, ``agent_0..G-1``, then the
landmarks: obstacles (collide), food, forests (neither collides). Agent 0 is the leader; agents 0..A-1 are
adversaries. An agent is "in" a forest when it collides with it (|p - q| < size + 0.3); a non-leader sees
another agent only when both are in a common forest or neither is in any forest.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...kernels import per_agent, per_env
from ...kernels.fields import field
from ...kernels.targets import device
from ..params import MAX_AGENTS, ranged
from .env import ParticleEnv, particle_scratch, particle_start, particle_state, particle_step
from .goals import zero_fill
from .params import ParticleParams
from .physics import particle_agents, particle_landmarks
from .phases import particle_draw_position, particle_finish, particle_observe_motion
from .world import AgentGroup, Kind, Landmarks, World

f32 = np.float32
_ZERO, _ONE, _TWO, _INF = f32(0.0), f32(1.0), f32(2.0), f32(np.inf)
_AGENT_LOW, _AGENT_SPAN = f32(-1.0), f32(2.0)        # agents ~ U(-1, 1)^2
_LANDMARK_LOW, _LANDMARK_SPAN = f32(-0.9), f32(1.8)  # every landmark ~ U(-0.9, 0.9)^2
_CATCH = f32(5.0)            # -5 to a good agent per adversary touching it, +5 to every adversary per such pair
_FOOD = f32(2.0)             # +2 to a good agent per food it touches
_FOOD_SHAPING = f32(0.05)    # -0.05 x a good agent's distance to the nearest food
_CHASE_SHAPING = f32(0.1)    # -0.1 x an adversary's distance to the nearest good agent
_BOUND_WEIGHT = f32(2.0)     # -2 x bound(|x|) - 2 x bound(|y|) to a good agent
_BOUND_START, _BOUND_SLOPE, _BOUND_CAP = f32(0.9), f32(10.0), f32(10.0)
_BIT, _NO_BITS = np.int64(1), np.int64(0)

DIM_C = 4
LEADER = Kind("leadadversary", size=0.075, accel=3.0, max_speed=1.0, silent=False)
ADVERSARY = Kind("adversary", size=0.075, accel=3.0, max_speed=1.0)
GOOD = Kind("agent", size=0.045, accel=4.0, max_speed=1.3)
OBSTACLE = Kind("obstacle", size=0.2, movable=False)
FOOD = Kind("food", size=0.03, movable=False, collide=False)
FOREST = Kind("forest", size=0.3, movable=False, collide=False)
#: The world's layout as a fixed-world build fixes it (:meth:`SimpleWorldComm.build_constants`): adversaries,
#: obstacles, food, forests; with the core's fixed sizes every observation column is then a literal too, and
#: the rows unroll into straight stores. -1 (other builds): read ``c``. Performance idioms (this switch, the
#: accessors' int64 casts): docs/envs.md#performance-idioms-of-scenario-code
WORLD_COMM_LAYOUT = (-1, -1, -1, -1)


@dataclass(frozen=True)
class SimpleWorldCommParams(ParticleParams):
    num_good: int = ranged(2, ge=1, le=MAX_AGENTS)
    """G >= 1 good agents (``agent_k``; mpe2 fails on 0: an adversary's reward takes a min over them)."""
    num_adversaries: int = ranged(4, ge=1, le=MAX_AGENTS)
    """A >= 1 adversaries, the leader (``leadadversary_0``) included (``adversary_k`` the A - 1 others)."""
    num_obstacles: int = ranged(1, ge=0, le=MAX_AGENTS)
    """Obstacles (mpe2's first landmarks): size 0.2, they collide."""
    num_food: int = ranged(2, ge=1, le=MAX_AGENTS)
    """Food >= 1 (mpe2 fails on 0: a good agent's reward takes a min over them): size 0.03, no collisions."""
    num_forests: int = ranged(2, ge=0, le=MAX_AGENTS)
    """Forests: size 0.3, no collisions; they hide the agents inside from observers outside."""

    def rules(self) -> list[tuple[str, bool, str]]:
        # Agents and landmarks share the entity index space of the RNG keys.
        return [("num_good", self.num_agents <= MAX_AGENTS,
                 f"<= {MAX_AGENTS - self.num_adversaries} (2**20 agents in all)"),
                ("num_forests", self.num_agents + self.num_landmarks <= MAX_AGENTS,
                 "a total of agents and landmarks <= 2**20")]

    @property
    def num_agents(self) -> int:
        return self.num_adversaries + self.num_good

    @property
    def num_landmarks(self) -> int:
        return self.num_obstacles + self.num_food + self.num_forests

    @property
    def forest_words(self) -> int:
        """int64 words of an agent's forest bits (scratch ``forests``)."""
        return (self.num_forests + 63) // 64

    @property
    def adversary_obs_dim(self) -> int:
        """v, p, landmarks, other agents, good agents' v, in-forest flags, the leader's message."""
        return 4 + 2 * self.num_landmarks + 2 * (self.num_agents - 1) + 2 * self.num_good + self.num_forests + DIM_C

    @property
    def good_obs_dim(self) -> int:
        """v, p, landmarks, other agents, in-forest flags, the other good agents' v."""
        return 4 + 2 * self.num_landmarks + 2 * (self.num_agents - 1) + self.num_forests + 2 * (self.num_good - 1)


# ---- device helpers ------------------------------------------------------------------------------------

@device
def world_comm_fixed():
    """The build fixes the layout (WORLD_COMM_LAYOUT)."""
    return WORLD_COMM_LAYOUT[0] >= 0


@device
def world_comm_adversaries(c):
    """A: agents 0..A-1 are adversaries."""
    return WORLD_COMM_LAYOUT[0] if world_comm_fixed() else np.int64(c.num_adversaries)


@device
def world_comm_first_food(c):
    """The landmark index of the first food (after the obstacles)."""
    return WORLD_COMM_LAYOUT[1] if world_comm_fixed() else np.int64(c.first_food)


@device
def world_comm_num_food(c):
    return WORLD_COMM_LAYOUT[2] if world_comm_fixed() else np.int64(c.num_food)


@device
def world_comm_first_forest(c):
    """The landmark index of the first forest (after the obstacles and the food)."""
    return WORLD_COMM_LAYOUT[1] + WORLD_COMM_LAYOUT[2] if world_comm_fixed() else np.int64(c.first_forest)


@device
def world_comm_forest_words(forests):
    """W: int64 words of an agent's forest bits (forests: [N, W])."""
    return (WORLD_COMM_LAYOUT[3] + 63) // 64 if world_comm_fixed() else forests.shape[1]


@device
def world_comm_landmark_distance(pos, landmarks, i, m):
    """|p_i - q_m| of agent i and landmark m."""
    dx = pos[i, 0] - landmarks[m, 0]
    dy = pos[i, 1] - landmarks[m, 1]
    return math.sqrt(dx * dx + dy * dy)


@device
def world_comm_touches(s, a, b, d):
    """mpe2's is_collision of entities a and b at distance d: d < size_a + size_b (strict)."""
    return d < s.pair_dmin[s.entity_kind[a], s.entity_kind[b]]


@device
def world_comm_bound(q):
    """mpe2's bound(|x|): 0 below 0.9, 10 (|x| - 0.9) below 1, then exp(2|x| - 2) capped at 10."""
    if q < _BOUND_START:
        return _ZERO
    if q < _ONE:
        return (q - _BOUND_START) * _BOUND_SLOPE
    return min(math.exp(_TWO * q - _TWO), _BOUND_CAP)


@device
def world_comm_good_reward(pos, landmarks, g, s, c, catches):
    """Good agent g: -5 per adversary touching it, -2 bound per axis, +2 per food it touches, -0.05 x its
    distance to the nearest food."""
    reward = -_CATCH * f32(catches)
    for d in range(2):
        reward -= _BOUND_WEIGHT * world_comm_bound(abs(pos[g, d]))
    nearest = _INF
    first_food = world_comm_first_food(c)
    for m in range(first_food, first_food + world_comm_num_food(c)):
        d = world_comm_landmark_distance(pos, landmarks, g, m)
        if world_comm_touches(s, g, pos.shape[0] + m, d):
            reward += _FOOD
        nearest = min(nearest, d)
    return reward - _FOOD_SHAPING * nearest


@device
def world_comm_distance(pos, a, b):
    """|p_a - p_b| of agents a and b."""
    dx = pos[a, 0] - pos[b, 0]
    dy = pos[a, 1] - pos[b, 1]
    return math.sqrt(dx * dx + dy * dy)


@device
def world_comm_num_forests(landmarks, c):
    """F: the landmarks after the obstacles and the food (landmarks: [L, 2])."""
    if world_comm_fixed():
        return WORLD_COMM_LAYOUT[3]
    return landmarks.shape[0] - world_comm_first_forest(c)


@device
def world_comm_in_forest(forests, i, f):
    """Agent i is in forest f (forests: int64 [N, W], bit f % 64 of word f // 64)."""
    return (forests[i, f >> 6] >> (f & 63)) & 1 != 0


@device
def world_comm_sees(forests, i, j):
    """Agent i observes agent j (forests: int64 [N, W], each agent's forests as bits): the leader (agent 0)
    always; another when i and j share a forest, or neither is in any (mpe2's for-else over the forests)."""
    shared = _NO_BITS
    either = _NO_BITS
    for w in range(world_comm_forest_words(forests)):  # bit operations: no branch per word
        shared |= forests[i, w] & forests[j, w]
        either |= forests[i, w] | forests[j, w]
    return (i == 0) | (shared != 0) | (either == 0)


@device
def world_comm_pair(row, k, x, y, shown):
    """row[k:k+2] = (x, y) if shown, else (0, 0) (a hidden agent's entries); returns k + 2."""
    row[k] = x if shown else _ZERO
    row[k + 1] = y if shown else _ZERO
    return k + 2


@device
def world_comm_velocities(row, k, vel, forests, i, c):
    """row[k:] = the good agents' velocities (agent i's own skipped), zero where i cannot see them."""
    for j in range(world_comm_adversaries(c), particle_agents(vel.shape[0])):
        if j != i:
            k = world_comm_pair(row, k, vel[j, 0], vel[j, 1], world_comm_sees(forests, i, j))


@device
def world_comm_forest_flags(row, k, forests, i, num_forests):
    """row[k:k+num_forests] = +1 per forest agent i is in, -1 per other."""
    for f in range(num_forests):
        row[k + f] = _ONE if world_comm_in_forest(forests, i, f) else -_ONE


# ---- phases ---------------------------------------------------------------------------------------------

def world_comm_draw(e, i, s, c, actions):
    """Agent i uniform in [-1, 1)^2; landmarks i, i + N, ... uniform in [-0.9, 0.9)^2 (each landmark drawn by
    exactly one agent's thread). mpe2 draws the food and forests twice; the second draw is as uniform."""
    num_agents = s.pos.shape[1]
    particle_draw_position(e, i, s, c, _AGENT_LOW, _AGENT_SPAN)
    for m in range(i, s.landmark_pos.shape[1], num_agents):
        particle_draw_position(e, num_agents + m, s, c, _LANDMARK_LOW, _LANDMARK_SPAN)


def world_comm_forests(e, i, s, c, actions):
    """``forests[e, i]``: the forests agent i is in, as bits (the observation's visibility rule reads every
    agent's: a word per pair of agents instead of a loop over the forests)."""
    pos = s.pos[e]
    landmarks = s.landmark_pos[e]
    forests = s.forests[e]
    num_forests = world_comm_num_forests(landmarks, c)
    first_forest = world_comm_first_forest(c)
    for w in range(world_comm_forest_words(forests)):
        word = _NO_BITS
        for f in range(64 * w, min(num_forests, 64 * w + 64)):
            m = first_forest + f
            if world_comm_touches(s, i, pos.shape[0] + m, world_comm_landmark_distance(pos, landmarks, i, m)):
                word |= _BIT << (f - 64 * w)
        forests[i, w] = word


def world_comm_reward(e, s, c, actions):
    """Every agent's reward, then the end of the step. Every adversary gets +5 per touching adversary-good
    pair anywhere (mpe2 counts all pairs for each adversary, not only its own catches)."""
    pos = s.pos[e]
    landmarks = s.landmark_pos[e]
    num_agents = particle_agents(pos.shape[0])
    num_adversaries = world_comm_adversaries(c)
    caught = 0
    for g in range(num_adversaries, num_agents):
        catches = 0
        for a in range(num_adversaries):
            if world_comm_touches(s, a, g, world_comm_distance(pos, a, g)):
                catches += 1
        caught += catches
        s.reward[e, g] = world_comm_good_reward(pos, landmarks, g, s, c, catches)
    for a in range(num_adversaries):
        nearest = _INF
        for g in range(num_adversaries, num_agents):
            nearest = min(nearest, world_comm_distance(pos, a, g))
        s.reward[e, a] = _CATCH * f32(caught) - _CHASE_SHAPING * nearest
    particle_finish(e, s, c, False)


def world_comm_observe(e, i, s, c, actions):
    """Agent i's row (mpe2's observation): v, p, landmarks - p, other agents - p (hidden: 0), then for an
    adversary the good agents' v (hidden: 0), in-forest flags, the leader's message; for a good agent the
    in-forest flags, the other good agents' v (hidden: 0). Zeros after its obs_dim."""
    row = s.obs[e, i]
    pos = s.pos[e]
    landmarks = s.landmark_pos[e]
    forests = s.forests[e]
    px, py = particle_observe_motion(row, e, i, s)
    num_agents = particle_agents(pos.shape[0])
    num_adversaries = world_comm_adversaries(c)
    k = 4
    for m in range(particle_landmarks(landmarks.shape[0])):
        row[k] = landmarks[m, 0] - px
        row[k + 1] = landmarks[m, 1] - py
        k += 2
    for j in range(num_agents):
        if j != i:
            k = world_comm_pair(row, k, pos[j, 0] - px, pos[j, 1] - py, world_comm_sees(forests, i, j))
    # mpe2 puts an adversary's view of the good agents' velocities before its forest flags, a good agent's after
    adversary = i < num_adversaries
    num_flags = world_comm_num_forests(landmarks, c)
    num_velocities = 2 * (num_agents - num_adversaries) - (0 if adversary else 2)
    world_comm_velocities(row, k if adversary else k + num_flags, s.vel[e], forests, i, c)
    world_comm_forest_flags(row, k + num_velocities if adversary else k, forests, i, num_flags)
    k += num_velocities + num_flags
    if adversary:
        for d in range(DIM_C):
            row[k + d] = s.comm[e, 0, d]
        k += DIM_C
    zero_fill(row, k)


_OBSERVE = [per_agent(world_comm_forests), per_agent(world_comm_observe)]


class SimpleWorldComm(ParticleEnv):
    """mpe2's ``simple_world_comm_v3``: adversaries chase good agents among obstacles, food and forests; the
    leader sees through forests and broadcasts a dim_c = 4 message every adversary hears.

    Groups: ``leadadversary`` (agent 0: Discrete(20) = move + 5 x message, or Box 9: moves then message),
    ``adversary`` (agents 1..A-1, absent when A = 1) and ``agent`` (the G good agents), Discrete(5) / Box 5.
    State: ``pos``, ``vel``, ``comm`` (the leader's message; zeros for the silent others), ``landmark_pos``
    (obstacles, food, forests), ``timestep``; no per-episode draws. Scratch ``forests`` int64 [E, N, ceil(F / 64)]:
    the forests each agent is in as bits, recomputed from the state before every observation.
    """

    name = "simple_world_comm"
    params_type = SimpleWorldCommParams
    state = particle_state(talks=True)
    scratch = {**particle_scratch(talks=True), "forests": field("int64", "agents", "forest_words")}
    step_phases = particle_step(per_env(world_comm_reward), *_OBSERVE)
    start_phases = particle_start([per_agent(world_comm_draw)], _OBSERVE)

    def world(self) -> World:
        p = self.params
        groups = (AgentGroup("leadadversary", 1, LEADER, p.adversary_obs_dim, "leadadversary"),
                  AgentGroup("adversary", p.num_adversaries - 1, ADVERSARY, p.adversary_obs_dim, "adversary"),
                  AgentGroup("agent", p.num_good, GOOD, p.good_obs_dim, "agent"))
        return World(groups=tuple(g for g in groups if g.count > 0),
                     landmarks=(Landmarks(p.num_obstacles, OBSTACLE), Landmarks(p.num_food, FOOD),
                                Landmarks(p.num_forests, FOREST)),
                     dim_c=DIM_C)

    def build_constants(self) -> dict:
        fixed = super().build_constants()
        if fixed:  # a fixed world (a large CPU batch): its layout too
            p = self.params
            fixed["WORLD_COMM_LAYOUT"] = (p.num_adversaries, p.num_obstacles, p.num_food, p.num_forests)
        return fixed

    def scenario_constants(self) -> dict:
        p = self.params
        return dict(num_adversaries=np.int32(p.num_adversaries), num_food=np.int32(p.num_food),
                    first_food=np.int32(p.num_obstacles), first_forest=np.int32(p.num_obstacles + p.num_food))
