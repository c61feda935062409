"""``simple_tag`` (mpe2 ``simple_tag_v3``): A adversaries chase G faster good agents among L obstacles, exact
up to float32 (docs/specs/simple_tag.md, older than docs/specs/mpe.md and kept as its own spec).

Agents 0..A-1 are the adversaries, A..N-1 the good agents; the obstacles are the world's landmarks. The core
moves the world (forces, contacts, integration, speed caps) and keeps the clock. A step is the core's phases,
then :func:`simple_tag_end_step` (per env: catches, rewards, collisions, timestep and ends) |
:func:`simple_tag_observe_agent`; a new episode draws agents and obstacles | the core's clock | observe.

Device functions work on one env's views (``pos = s.pos[e]`` float32 [N, 2], ...), taken once per env. Sizes
(agents N, obstacles L, adversaries A) are read through :func:`simple_tag_agents` & co., which a large CPU
batch of a small world compiles in (:func:`fixed_sizes`).
Performance idioms: docs/envs.md#performance-idioms-of-scenario-code
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import torch

from ...kernels import per_agent, per_env
from ...kernels.targets import device
from ..params import MAX_AGENTS, checked_params, ranged
from .env import ParticleEnv, particle_scratch, particle_start, particle_state, particle_step
from .params import ParticleParams
from .phases import particle_draw_position, particle_finish
from .world import AgentGroup, Kind, Landmarks, World

f32 = np.float32
#: mpe2's kinds (simple_tag.make_world): every entity collides; agents are silent; mass 1. The world keeps
#: mpe2's dt, damping and contact constants (World's defaults).
ADVERSARY = Kind("adversary", size=0.075, accel=3.0, max_speed=1.0)
GOOD = Kind("good", size=0.05, accel=4.0, max_speed=1.3)
OBSTACLE = Kind("obstacle", size=0.2, movable=False)
#: mpe2's world.dim_c: no agent talks, so it changes nothing (the actions have no message part).
DIM_C = 2
NUM_MOVES = 5

_ZERO, _ONE, _TWO = f32(0.0), f32(1.0), f32(2.0)
_U0, _U1, _U2, _U3 = np.uint64(0), np.uint64(1), np.uint64(2), np.uint64(3)
_CATCH = f32(10.0)  # +10 per adversary-good collision to every adversary, -10 to the good agent
_CATCH2 = f32((ADVERSARY.size + GOOD.size) ** 2)  # 0.125^2 = 0.015625, exact
_BOUND_START, _BOUND_CAP, _BOUND_SLOPE = f32(0.9), f32(10.0), f32(10.0)  # a good agent's boundary penalty
_AGENT_LOW, _AGENT_SPAN = f32(-1.0), f32(2.0)          # agents ~ U(-1, 1)^2 at reset
_OBSTACLE_LOW, _OBSTACLE_SPAN = f32(-0.9), f32(1.8)    # obstacles ~ U(-0.9, 0.9)^2

#: Compile-time world sizes of a build, all three fixed together when SIMPLE_TAG_AGENTS > 0 (else read at
#: run time; L may be 0): see :func:`fixed_sizes`.
SIMPLE_TAG_AGENTS = 0
SIMPLE_TAG_OBSTACLES = 0
SIMPLE_TAG_ADVERSARIES = 0
#: A CPU batch of at least FIXED_SIZE_MIN_ENVS envs of a world with at most FIXED_SIZE_LIMIT agents and as
#: many obstacles gets a build with the sizes above compiled in, beside the core's PARTICLE_AGENTS.
FIXED_SIZE_LIMIT = 16
FIXED_SIZE_MIN_ENVS = 256


@dataclass(frozen=True)
class SimpleTagParams(ParticleParams):
    num_adversaries: int = ranged(3, ge=1, le=MAX_AGENTS)
    """A >= 1: agents 0..A-1 are adversaries (mpe2's adversary_0..)."""
    num_good: int = ranged(1, ge=1, le=MAX_AGENTS)
    """G >= 1: agents A..A+G-1 are good agents (mpe2's agent_0..)."""
    num_obstacles: int = ranged(2, ge=0, le=MAX_AGENTS)
    """L >= 0 fixed circular obstacles (mpe2's landmarks)."""
    terminate_on_success: bool = False
    """End the episode (terminated) when every good agent collides with an adversary."""

    @classmethod
    def from_kwargs(cls, **kwargs) -> "SimpleTagParams":
        return checked_params(cls, "simple_tag", kwargs)

    @property
    def num_agents(self) -> int:
        return self.num_adversaries + self.num_good

    @property
    def num_landmarks(self) -> int:
        """The obstacles are the world's landmarks (the particle core's name)."""
        return self.num_obstacles

    @property
    def adversary_obs_dim(self) -> int:
        """v, p, obstacles, other agents, good agents' velocities: 4 + 2L + 2(N-1) + 2G."""
        return 4 + 2 * self.num_obstacles + 2 * (self.num_agents - 1) + 2 * self.num_good

    @property
    def good_obs_dim(self) -> int:
        """A good agent skips its own velocity in block 5: two features fewer than an adversary."""
        return self.adversary_obs_dim - 2

    @property
    def obs_dim(self) -> int:
        return self.adversary_obs_dim

    @property
    def action_dims(self) -> int:
        return NUM_MOVES if self.continuous_actions else 1

    def rules(self) -> list[tuple[str, bool, str]]:
        """Rules between parameters (:func:`~gpurl.envs.params.check_rules`), after each one's own range."""
        # Agents and obstacles share the entity index space of the RNG keys and the obs rows.
        others = self.num_adversaries + self.num_good
        return [("num_good", others <= MAX_AGENTS,
                 f"<= {MAX_AGENTS - self.num_adversaries} (2**20 agents in all, "
                 f"num_adversaries={self.num_adversaries})"),
                ("num_obstacles", others + self.num_obstacles <= MAX_AGENTS,
                 f"<= {MAX_AGENTS - others} (2**20 agents + obstacles in all, {others} agents)")]

    def replace(self, **changes) -> "SimpleTagParams":
        return SimpleTagParams.from_kwargs(**{**dataclasses.asdict(self), **changes})


def fixed_sizes(p: SimpleTagParams, target: str, num_envs: int) -> dict[str, int]:
    """simple_tag's own build constants of a ``num_envs`` batch of ``p`` on ``target``: the world's sizes
    for large CPU batches of small worlds, else none (run-time sizes). One more compile per world size,
    which only a large batch repays; both builds compute the same bits."""
    small = p.num_agents <= FIXED_SIZE_LIMIT and p.num_obstacles <= FIXED_SIZE_LIMIT
    if target != "cpu" or not small or num_envs < FIXED_SIZE_MIN_ENVS:
        return {}
    return {"SIMPLE_TAG_AGENTS": p.num_agents, "SIMPLE_TAG_OBSTACLES": p.num_obstacles,
            "SIMPLE_TAG_ADVERSARIES": p.num_adversaries}


# ---- device helpers ------------------------------------------------------------------------------------

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

    Unsigned indices (the running slot k above all): no wraparound fixup, a good share of this function's
    CPU time (docs/envs.md#performance-idioms-of-scenario-code).
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


# ---- phases ---------------------------------------------------------------------------------------------

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


# ---- drawing (gpurl.render) -----------------------------------------------------------------------------

def draw_frame(ax, env, frames, t):
    """Frame t on matplotlib axes (host copies of env 0's state), in MPE's colours: adversaries red, good
    agents green, obstacles grey; a caught good agent is ringed."""
    from matplotlib.patches import Circle

    p, f = env.params, frames[t]
    A = p.num_adversaries
    extent = max(1.2, max(np.abs(fr["pos"]).max() for fr in frames) + 0.1)
    ax.set_xlim(-extent, extent)
    ax.set_ylim(-extent, extent)
    ax.set_aspect("equal")
    for q in f["landmark_pos"]:
        ax.add_patch(Circle(q, OBSTACLE.size, color="0.6"))
    for i, q in enumerate(f["pos"]):
        ax.add_patch(Circle(q, ADVERSARY.size if i < A else GOOD.size, color="tab:red" if i < A else "tab:green"))
    for g in range(A, len(f["pos"])):
        if (np.linalg.norm(f["pos"][:A] - f["pos"][g], axis=1) < ADVERSARY.size + GOOD.size).any():
            ax.add_patch(Circle(f["pos"][g], 2.5 * GOOD.size, fill=False, color="black", lw=1.5))


class SimpleTag(ParticleEnv):
    """MPE simple_tag as in mpe2 1.1.1 (docs/specs/simple_tag.md), on the particle-world core.

    Agents 0..A-1 are the group ``"adversary"`` (mpe2's ``adversary_k``), A..N-1 the group ``"good"``
    (mpe2's ``agent_k``); the L obstacles are the landmarks. ``env.obs_dim`` is the adversaries' observation
    size; a good agent's row is 2 shorter and ends in 2 zeros. Box actions are clipped into [0, 1] as in
    mpe2; with ``validate=True`` a NaN action is an error (mpe2 raises too).
    ``env.state``: ``pos``, ``vel`` float32 [E, N, 2] (adversaries first), ``landmark_pos`` float32
    [E, L, 2] (obstacles, never move), ``timestep`` int32 [E], ``episode``. No per-episode draws.
    """

    draw_frame = staticmethod(draw_frame)  # gpurl.render draws episodes with it

    name = "simple_tag"
    params_type = SimpleTagParams
    state = particle_state(talks=False)
    scratch = particle_scratch(talks=False)
    metrics = ("collisions",)
    step_phases = particle_step(per_env(simple_tag_end_step), per_agent(simple_tag_observe_agent))
    start_phases = particle_start([per_agent(simple_tag_draw)], [per_agent(simple_tag_observe_agent)])

    def world(self) -> World:
        p = self.params
        return World(groups=(AgentGroup("adversary", p.num_adversaries, ADVERSARY, p.adversary_obs_dim,
                                        prefix="adversary"),
                             AgentGroup("good", p.num_good, GOOD, p.good_obs_dim, prefix="agent")),
                     landmarks=(Landmarks(p.num_obstacles, OBSTACLE),), dim_c=DIM_C)

    def scenario_constants(self) -> dict:
        p = self.params
        return dict(num_adversaries=np.int32(p.num_adversaries),
                    terminate_on_success=np.int32(bool(p.terminate_on_success)))

    def build_constants(self) -> dict[str, int]:
        return {**super().build_constants(), **fixed_sizes(self.params, self.target, self.num_envs)}

    def step_metrics(self) -> dict[str, torch.Tensor]:
        """``collisions``: adversary-good pairs in contact after the last step, float32 [num_envs].

        Every adversary's reward is 10x this; 0 for a frozen env. A view rewritten by the next step.
        """
        return super().step_metrics()
