"""``gpurl.make("tag_continuous", ...)``: the env class over the tag kernels."""
from __future__ import annotations

import math

import gymnasium
import numpy as np

from ...kernels.neighbors_team import team_knn_scratch
from ..base import KernelEnv
from ...kernels.fields import field
from ...kernels.program import MAX_THREADS_PER_BLOCK
from ..spaces import Group
from .kernels import START_PHASES, STATE_FEATURES, STATE_PHASES, STEP_PHASES
from . import draw
from .params import TagContinuousParams, action_table

f32 = np.float32


class TagContinuous(KernelEnv):
    """Continuous tag (docs/specs/tag_continuous.md): taggers are agents 0..T-1, runners T..N-1.

    ``env.state``: ``x``, ``y``, ``speed``, ``direction`` (radians in [0, 2 pi]), ``acceleration`` float32
    [E, N]; ``alive`` int32 [E, N] (1 = still in the game); ``num_runners`` int32 [E] (runners still in
    the game); ``timestep`` int32 [E]; ``episode``.

    ``env.global_state`` float32 [E, 6 N + 1]: per agent (agent order) x, y, speed, acceleration, direction,
    alive, normalised as the observation normalises them (x / (sqrt(2) L), ..., alive 0/1), after this
    step's tags; then timestep / episode_length (docs/specs/tag_continuous.md, "Global state").
    """

    draw_frame = staticmethod(draw.draw_frame)  # gpurl.render draws episodes with it

    name = "tag_continuous"
    params_type = TagContinuousParams
    state = {**{name: field("float32", "agents") for name in ("x", "y", "speed", "direction", "acceleration")},
             "alive": field("int32", "agents"), "num_runners": field("int32"), "timestep": field("int32")}
    scratch = {"tagged_by": field("int32", "agents", fill=-1),  # the tagger that tags runner j this step, or -1
               **team_knn_scratch("num_other_agents_observed", out="nbr_idx")}
    metrics = ("tags",)  # runners tagged in the last step
    # At most 128 registers a thread (blocks of up to 256 threads, 2 resident per SM): ptxas fits the step in
    # them without spilling (sm_90, ptxas 13.0) where it would take 136 unbounded, and tag-10v100's blocks of 128
    # threads then keep 4 to an SM instead of 3 (bench/kernel_report.py prints both).
    cuda_launch_bounds = (MAX_THREADS_PER_BLOCK, 2)
    step_phases = STEP_PHASES
    start_phases = START_PHASES
    state_phases = STATE_PHASES

    def groups(self):
        p = self.params
        space = gymnasium.spaces.MultiDiscrete([p.num_acceleration_levels + 1, p.num_turn_levels + 1])
        return {"tagger": Group(slice(0, p.num_taggers), p.obs_dim, space),
                "runner": Group(slice(p.num_taggers, p.num_agents), p.obs_dim, space)}

    def global_state_dim(self):
        return STATE_FEATURES * self.params.num_agents + 1

    def tables(self):
        p = self.params
        return {"acc_table": action_table(p.min_acceleration, p.max_acceleration, p.num_acceleration_levels),
                "turn_table": action_table(p.min_turn, p.max_turn, p.num_turn_levels)}

    def constants(self):
        p = self.params
        L = f32(p.grid_length)
        k = p.num_other_agents_observed
        # Uniform density n/L^2 holds k agents within L*sqrt(k/(pi n)); 1.2x covers some of the wall effects
        # (k_nearest rescales the radius from the count it finds).
        search = f32(1.2 * float(L) * math.sqrt(k / (math.pi * max(p.num_agents - 1, 1))))
        return dict(
            num_taggers=np.int32(p.num_taggers), num_runners=np.int32(p.num_runners), grid_length=L,
            episode_length=np.int32(p.episode_length),
            vmax_tagger=f32(f32(p.max_speed) * f32(p.skill_level_tagger)),
            vmax_runner=f32(f32(p.max_speed) * f32(p.skill_level_runner)),
            edge_hit_penalty=f32(p.edge_hit_penalty), step_reward_tagger=f32(p.step_penalty_for_tagger),
            step_reward_runner=f32(p.step_reward_for_runner), tag_reward_for_tagger=f32(p.tag_reward_for_tagger),
            tag_penalty_for_runner=f32(p.tag_penalty_for_runner),
            end_of_game_reward_for_runner=f32(p.end_of_game_reward_for_runner),
            runner_exits=np.int32(bool(p.runner_exits_game_after_tagged)),
            full_obs=np.int32(bool(p.use_full_observation)), k=np.int32(k),
            tag_radius=f32(f32(p.tagging_distance) * L),  # as NumPy 2 computes it
            pos_norm=f32(math.sqrt(2.0) * float(L)), speed_norm=f32(f32(p.max_speed) + f32(1e-10)),
            dir_norm=f32(2.0 * math.pi), time_norm=f32(p.episode_length),
            search_radius=max(search, f32(1e-6)))  # the k-nearest radius hint

    @property
    def acceleration_table(self) -> np.ndarray:
        return self._tensors["acc_table"].cpu().numpy()  # host-ok: set-up accessor

    @property
    def turn_table(self) -> np.ndarray:
        return self._tensors["turn_table"].cpu().numpy()  # host-ok: set-up accessor
