"""``gpurl.make("simple_tag", ...)``: mpe2's simple_tag_v3 as a scenario of the particle-world core
(:mod:`gpurl.envs.mpe`): its world declaration and the env class over the phases of :mod:`.kernels`."""
from __future__ import annotations

import numpy as np
import torch

from ..mpe.env import ParticleEnv, particle_scratch, particle_state
from ..mpe.world import AgentGroup, Kind, Landmarks, World
from . import draw
from . import params as P
from .kernels import START_PHASES, STEP_PHASES
from .params import SimpleTagParams

#: mpe2's kinds (simple_tag.make_world): every entity collides; agents are silent; mass 1.
ADVERSARY = Kind("adversary", size=P.ADVERSARY_SIZE, accel=P.ADVERSARY_ACCEL, max_speed=P.ADVERSARY_MAX_SPEED)
GOOD = Kind("good", size=P.GOOD_SIZE, accel=P.GOOD_ACCEL, max_speed=P.GOOD_MAX_SPEED)
OBSTACLE = Kind("obstacle", size=P.OBSTACLE_SIZE, movable=False)
#: mpe2's world.dim_c: no agent talks, so it changes nothing (the actions have no message part).
DIM_C = 2

#: A CPU batch of at least FIXED_SIZE_MIN_ENVS envs of a world with at most FIXED_SIZE_LIMIT agents and
#: as many obstacles gets a build of its own with the sizes compiled in (kernels.SIMPLE_TAG_AGENTS, beside
#: the core's PARTICLE_AGENTS and the toolkit's agent count): the step is faster, for one more compile (tens
#: of seconds) per world size, which only a large batch repays. Other batches share the build with run-time
#: sizes; both builds compute the same bits.
FIXED_SIZE_LIMIT = 16
FIXED_SIZE_MIN_ENVS = 256


def fixed_sizes(p: SimpleTagParams, target: str, num_envs: int) -> dict[str, int]:
    """simple_tag's own build constants of a ``num_envs`` batch of ``p`` on ``target``: the world's sizes
    for large CPU batches of small worlds, else none (run-time sizes)."""
    small = p.num_agents <= FIXED_SIZE_LIMIT and p.num_obstacles <= FIXED_SIZE_LIMIT
    if target != "cpu" or not small or num_envs < FIXED_SIZE_MIN_ENVS:
        return {}
    return {"SIMPLE_TAG_AGENTS": p.num_agents, "SIMPLE_TAG_OBSTACLES": p.num_obstacles,
            "SIMPLE_TAG_ADVERSARIES": p.num_adversaries}


class SimpleTag(ParticleEnv):
    """MPE simple_tag as in mpe2 1.1.1 (docs/specs/simple_tag.md), on the particle-world core.

    Agents 0..A-1 are the group ``"adversary"`` (mpe2's ``adversary_k``), A..N-1 the group ``"good"``
    (mpe2's ``agent_k``); the L obstacles are the landmarks. ``env.obs_dim`` is the adversaries' observation
    size; a good agent's row is 2 shorter and ends in 2 zeros. Box actions are clipped into [0, 1] as in
    mpe2; with ``validate=True`` a NaN action is an error (mpe2 raises too).
    ``env.state``: ``pos``, ``vel`` float32 [E, N, 2] (adversaries first), ``landmark_pos`` float32
    [E, L, 2] (obstacles, never move), ``timestep`` int32 [E], ``episode``. No per-episode draws.
    """

    draw_frame = staticmethod(draw.draw_frame)  # gpurl.render draws episodes with it

    name = "simple_tag"
    params_type = SimpleTagParams
    state = particle_state(talks=False)
    scratch = particle_scratch(talks=False)
    metrics = ("collisions",)
    step_phases = STEP_PHASES
    start_phases = START_PHASES

    def world(self) -> World:
        p = self.params
        return World(groups=(AgentGroup("adversary", p.num_adversaries, ADVERSARY, p.adversary_obs_dim,
                                        prefix="adversary"),
                             AgentGroup("good", p.num_good, GOOD, p.good_obs_dim, prefix="agent")),
                     landmarks=(Landmarks(p.num_obstacles, OBSTACLE),), dim_c=DIM_C, dt=P.DT, damping=P.DAMPING,
                     contact_force=P.CONTACT_FORCE, contact_margin=P.CONTACT_MARGIN)

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
