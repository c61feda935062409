"""``gpurl.make("simple_tag", ...)``: the env class over the simple_tag kernels."""
from __future__ import annotations

import gymnasium
import numpy as np
import torch

from ..base import KernelEnv
from ...kernels.fields import field
from ..spaces import Group
from .kernels import START_PHASES, STEP_PHASES
from . import draw
from .params import NUM_MOVES, SimpleTagParams

#: A CPU batch of at least FIXED_SIZE_MIN_ENVS envs of a world with at most FIXED_SIZE_LIMIT agents and
#: as many obstacles gets a build of its own with the sizes compiled in (physics.SIMPLE_TAG_AGENTS; the
#: toolkit fixes the agent count of such batches too): the step is faster, for one more compile (tens of
#: seconds) per world size, which only a large batch repays. Other batches share the build with run-time
#: sizes; both builds compute the same bits.
FIXED_SIZE_LIMIT = 16
FIXED_SIZE_MIN_ENVS = 256


def fixed_sizes(p: SimpleTagParams, target: str, num_envs: int) -> dict[str, int]:
    """The build constants of a ``num_envs`` batch of ``p`` on ``target``: the world's sizes for large CPU
    batches of small worlds, else none (run-time sizes)."""
    small = p.num_agents <= FIXED_SIZE_LIMIT and p.num_obstacles <= FIXED_SIZE_LIMIT
    if target != "cpu" or not small or num_envs < FIXED_SIZE_MIN_ENVS:
        return {}
    return {"SIMPLE_TAG_AGENTS": p.num_agents, "SIMPLE_TAG_OBSTACLES": p.num_obstacles,
            "SIMPLE_TAG_ADVERSARIES": p.num_adversaries}


class SimpleTag(KernelEnv):
    """MPE simple_tag as in mpe2 1.1.1 (docs/specs/simple_tag.md).

    Agents 0..A-1 are the group ``"adversary"``, A..N-1 the group ``"good"``. ``env.obs_dim`` is the
    adversaries' observation size; a good agent's row is 2 shorter and ends in 2 zeros. Box actions are
    clipped into [0, 1] as in mpe2; with ``validate=True`` a NaN action is an error (mpe2 raises too).
    ``env.state``: ``pos``, ``vel`` float32 [E, N, 2] (adversaries first), ``landmark_pos`` float32
    [E, L, 2] (obstacles, never move), ``timestep`` int32 [E], ``episode``.
    """

    draw_frame = staticmethod(draw.draw_frame)  # gpurl.render draws episodes with it
    #: PettingZoo agent names: mpe2's prefixes, so code written for mpe2 runs as is
    agent_prefixes = {"adversary": "adversary", "good": "agent"}

    name = "simple_tag"
    params_type = SimpleTagParams
    state = {"pos": field("float32", "agents", 2), "vel": field("float32", "agents", 2),
             "landmark_pos": field("float32", "num_obstacles", 2), "timestep": field("int32")}
    scratch = {"force": field("float32", "agents", 2),  # this step's total force on each agent
               "too_fast": field("uint8")}              # an agent of the env exceeds its max speed
    metrics = ("collisions",)
    step_phases = STEP_PHASES
    start_phases = START_PHASES

    def groups(self):
        p = self.params
        space = (gymnasium.spaces.Box(0.0, 1.0, (NUM_MOVES,), dtype=np.float32) if p.continuous_actions
                 else gymnasium.spaces.Discrete(NUM_MOVES))
        return {"adversary": Group(slice(0, p.num_adversaries), p.adversary_obs_dim, space),
                "good": Group(slice(p.num_adversaries, p.num_agents), p.good_obs_dim, space)}

    def constants(self):
        p = self.params
        return dict(num_adversaries=np.int32(p.num_adversaries), max_cycles=np.int32(p.max_cycles),
                    continuous=np.int32(bool(p.continuous_actions)),
                    terminate_on_success=np.int32(bool(p.terminate_on_success)))

    def build_constants(self):
        return fixed_sizes(self.params, self.target, self.num_envs)

    def check_actions(self, actions: torch.Tensor) -> None:
        if not self._discrete and bool(actions.isnan().any()):  # host-ok: validate=True opt-in check
            e, i, d = (int(v) for v in actions.isnan().nonzero()[0])
            raise ValueError(f"actions[{e}, {i}, {d}] is NaN: Box actions are clipped into [0, 1], "
                             "NaN cannot be (mpe2 raises on it too)")

    def step_metrics(self) -> dict[str, torch.Tensor]:
        """``collisions``: adversary-good pairs in contact after the last step, float32 [num_envs].

        Every adversary's reward is 10x this; 0 for a frozen env. A view rewritten by the next step.
        """
        return super().step_metrics()
