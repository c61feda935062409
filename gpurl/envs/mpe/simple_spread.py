"""``simple_spread`` (mpe2 ``simple_spread_v3``): N agents cover N landmarks without colliding, with mpe2's
curriculum, early termination on success and nearest-neighbour partial observability (docs/specs/mpe.md)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ...kernels import per_agent, per_env
from ...kernels.fields import field
from ..params import MAX_AGENTS, ranged
from .env import ParticleEnv, particle_scratch, particle_start, particle_state, particle_step
from .goals import draw_uniform_world, zero_fill
from .nearest import observe_relative
from .params import ParticleParams
from .physics import particle_agents, particle_landmarks
from .phases import particle_finish, particle_observe_motion
from .world import AgentGroup, Kind, Landmarks, World

#: mpe2's world.dim_c: every agent is silent, so the observation's message block is dim_c zeros per agent seen.
DIM_C = 2
AGENT = Kind("agent", size=0.15, collide=True, silent=True)
LANDMARK = Kind("landmark", size=0.05, movable=False, collide=False)
#: A landmark is covered when an agent is closer than this (mpe2's Scenario.CAPTURE_RADIUS, for is_terminal).
CAPTURE_RADIUS = 0.1
#: mpe2's CURRICULUM_STAGES: stage 0 has no collision penalty, stage 1 (the last) has it.
CURRICULUM_STAGES = 2
_CAPTURE = np.float32(CAPTURE_RADIUS)
_ZERO, _ONE = np.float32(0.0), np.float32(1.0)
_INF = np.float32(np.inf)


@dataclass(frozen=True)
class SimpleSpreadParams(ParticleParams):
    N: int = ranged(3, ge=1, le=MAX_AGENTS // 2)
    """Number of agents, and of landmarks (mpe2's name)."""
    local_ratio: float = ranged(0.5, ge=0.0, le=1.0)
    """Weight of an agent's own reward (its collision penalty); the shared one (coverage) gets 1 - local_ratio."""
    curriculum: bool = False
    """mpe2's curriculum: the collision penalty applies only from stage 1 on (``env.state.curriculum_stage``)."""
    terminate_on_success: bool = False
    """End the episode (terminated) once every landmark has an agent closer than 0.1."""
    num_agent_neighbors: int | None = ranged(None, ge=1, le=MAX_AGENTS)
    """None: every other agent is observed in index order; k: the k nearest, nearest first, zero-padded."""
    num_landmark_neighbors: int | None = ranged(None, ge=1, le=MAX_AGENTS)
    """None: every landmark is observed in index order; k: the k nearest, nearest first, zero-padded."""

    @property
    def num_landmarks(self) -> int:
        return self.N

    @property
    def agent_slots(self) -> int:
        """Other agents in an observation: N - 1, or num_agent_neighbors."""
        return self.N - 1 if self.num_agent_neighbors is None else self.num_agent_neighbors

    @property
    def landmark_slots(self) -> int:
        """Landmarks in an observation: N, or num_landmark_neighbors."""
        return self.N if self.num_landmark_neighbors is None else self.num_landmark_neighbors

    @property
    def obs_dim(self) -> int:
        """v, p, landmark slots, agent slots, then dim_c message zeros per agent slot."""
        return 4 + 2 * self.landmark_slots + (2 + DIM_C) * self.agent_slots


def spread_cover(e, i, s, c, actions):
    """Agent i's thread: landmark i's distance to its nearest agent (``s.cover``; there are N landmarks), and
    agent i's own reward, -1 per other agent closer than size + size (mpe2's is_collision), where the
    collision penalty applies (no curriculum, or its stage >= 1)."""
    px = s.pos[e, i, 0]
    py = s.pos[e, i, 1]
    qx = s.landmark_pos[e, i, 0]
    qy = s.landmark_pos[e, i, 1]
    kind = s.entity_kind[i]
    nearest = _INF
    collisions = _ZERO
    for k in range(s.pos.shape[1]):
        dx = s.pos[e, k, 0] - qx
        dy = s.pos[e, k, 1] - qy
        nearest = min(nearest, np.float32(math.sqrt(dx * dx + dy * dy)))
        if k != i:
            dx = s.pos[e, k, 0] - px
            dy = s.pos[e, k, 1] - py
            if np.float32(math.sqrt(dx * dx + dy * dy)) < s.pair_dmin[kind, s.entity_kind[k]]:
                collisions += _ONE
    s.cover[e, i] = nearest
    penalised = c.curriculum == 0 or s.curriculum_stage[e] >= 1
    s.reward[e, i] = -collisions if penalised else _ZERO


def spread_reward(e, s, c, actions):
    """global = -sum over landmarks of its nearest agent's distance; r_i = global * (1 - local_ratio) +
    own_i * local_ratio; terminal (with terminate_on_success) when every landmark is covered."""
    shared = _ZERO
    covered = True
    for landmark in range(s.cover.shape[1]):
        shared -= s.cover[e, landmark]
        covered = covered and s.cover[e, landmark] < _CAPTURE
    for k in range(s.pos.shape[1]):
        s.reward[e, k] = shared * c.global_weight + s.reward[e, k] * c.local_ratio
    particle_finish(e, s, c, c.terminate_on_success != 0 and covered)


def spread_observe(e, i, s, c, actions):
    """[v, p, landmarks (q - p: all in order, or the k nearest), other agents (p_j - p, likewise), their
    messages (dim_c zeros per agent slot: every agent is silent)]."""
    row = s.obs[e, i]
    px, py = particle_observe_motion(row, e, i, s)
    landmarks, agents = s.landmark_pos[e], s.pos[e]
    at = observe_relative(row, 4, landmarks, particle_landmarks(landmarks.shape[0]), -1, px, py, c.landmark_neighbors)
    at = observe_relative(row, at, agents, particle_agents(agents.shape[0]), i, px, py, c.agent_neighbors)
    zero_fill(row, at)  # the silent agents' messages, then the padding


class SimpleSpread(ParticleEnv):
    """mpe2's ``simple_spread_v3``.

    Group ``agent`` (``agent_0`` .. ``agent_{N-1}``): size 0.15, accel 5, no speed cap, collide, silent;
    Discrete(5) or Box(5). N landmarks (size 0.05, no collisions). State: ``pos``, ``vel``, ``landmark_pos``
    [E, N, 2], ``timestep``, and ``curriculum_stage`` int32 [E]: mpe2's scenario.curriculum_stage (0 or 1),
    read only with ``curriculum=True``, kept across resets and 0 at construction as in mpe2; change it with
    :meth:`advance_curriculum` / :meth:`set_curriculum_stage` or by writing it. No per-episode draws.
    """

    name = "simple_spread"
    params_type = SimpleSpreadParams
    state = particle_state(talks=False, curriculum_stage=field("int32"))
    scratch = {**particle_scratch(talks=False), "cover": field("float32", "num_landmarks")}
    step_phases = particle_step(per_agent(spread_cover), per_env(spread_reward), per_agent(spread_observe))
    start_phases = particle_start([per_agent(draw_uniform_world)], [per_agent(spread_observe)])

    def world(self) -> World:
        p = self.params
        return World(groups=(AgentGroup("agent", p.N, AGENT, obs_dim=p.obs_dim, prefix="agent"),),
                     landmarks=(Landmarks(p.N, LANDMARK),), dim_c=DIM_C)

    def scenario_constants(self) -> dict:
        p = self.params
        return dict(local_ratio=np.float32(p.local_ratio), global_weight=np.float32(1.0 - p.local_ratio),
                    curriculum=np.int32(p.curriculum), terminate_on_success=np.int32(p.terminate_on_success),
                    agent_neighbors=np.int32(p.num_agent_neighbors or 0),
                    landmark_neighbors=np.int32(p.num_landmark_neighbors or 0))

    @property
    def curriculum_stage(self) -> torch.Tensor:
        """int32 [E]: each env's curriculum stage (``env.state.curriculum_stage``)."""
        return self.state.curriculum_stage

    def advance_curriculum(self) -> None:
        """Every env to its next curriculum stage (no change at the last), as mpe2 documents advance_curriculum
        (mpe2 1.1.1's own is a no-op: its stage cannot leave 0, docs/specs/mpe.md)."""
        self.set_curriculum_stage(self.state.curriculum_stage + 1)

    def set_curriculum_stage(self, stage) -> None:
        """Every env's stage to ``stage`` (an int, or a tensor [E]), clamped into 0..1 as mpe2 does."""
        stage = torch.as_tensor(stage, dtype=torch.int32, device=self.device)
        self.state.curriculum_stage.copy_(stage.clamp(0, CURRICULUM_STAGES - 1).expand_as(self.state.curriculum_stage))
