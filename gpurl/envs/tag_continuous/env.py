"""``gpurl.make("tag_continuous", ...)``: the env class over the tag kernels."""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, fields

import gymnasium
import numpy as np
import torch

from ...kernels.neighbors import knn_scratch_shapes
from ...kernels.scratch import num_lanes
from ..base import KernelEnv, StepOutputs
from ..spaces import Group
from .kernels import tag_reset, tag_step
from .layout import TagArrays, make_consts
from . import draw
from .params import TagContinuousParams, action_table


@dataclass
class TagContinuousState:
    """Struct of arrays on ``env.device``; write in place to inject a state (then ``env.step``)."""

    x: torch.Tensor             # float32 [E, N]
    y: torch.Tensor             # float32 [E, N]
    speed: torch.Tensor         # float32 [E, N]
    direction: torch.Tensor     # float32 [E, N], radians in [0, 2 pi]
    acceleration: torch.Tensor  # float32 [E, N]
    alive: torch.Tensor         # int32 [E, N], 1 = still in the game
    num_runners: torch.Tensor   # int32 [E], runners still in the game
    timestep: torch.Tensor      # int32 [E]
    episode: torch.Tensor       # int32 [E], episodes started since the seed was set (keys reset draws)


class TagContinuous(KernelEnv):
    """Continuous tag (docs/specs/tag_continuous.md): taggers are agents 0..T-1, runners T..N-1."""

    draw_frame = staticmethod(draw.draw_frame)  # gpurl.render draws episodes with it

    def __init__(self, *, num_envs=1024, device="cpu", seed=0, autoreset=True, validate=True,
                 env_id_offset=0, target=None, **env_params):
        self.params = TagContinuousParams.from_kwargs(**env_params)
        super().__init__(num_envs=num_envs, device=device, seed=seed, autoreset=autoreset,
                         validate=validate, env_id_offset=env_id_offset, target=target)
        p = self.params
        space = gymnasium.spaces.MultiDiscrete([p.num_acceleration_levels + 1, p.num_turn_levels + 1])
        groups = OrderedDict(
            tagger=Group(slice(0, p.num_taggers), p.obs_dim, space),
            runner=Group(slice(p.num_taggers, p.num_agents), p.obs_dim, space),
        )
        self._setup_outputs(p.num_agents, groups)
        E, N, dev = self.num_envs, p.num_agents, self.device
        f32 = dict(dtype=torch.float32, device=dev)
        i32 = dict(dtype=torch.int32, device=dev)
        self.state = TagContinuousState(
            x=torch.zeros(E, N, **f32), y=torch.zeros(E, N, **f32), speed=torch.zeros(E, N, **f32),
            direction=torch.zeros(E, N, **f32), acceleration=torch.zeros(E, N, **f32),
            alive=torch.zeros(E, N, **i32), num_runners=torch.zeros(E, **i32),
            timestep=torch.zeros(E, **i32), episode=torch.zeros(E, **i32),
        )
        self._finished = torch.zeros(E, dtype=torch.uint8, device=dev)
        self._reset_mask = torch.zeros(E, dtype=torch.uint8, device=dev)
        self._tagged_by = torch.full((E, N), -1, **i32)
        shapes = knn_scratch_shapes(self.target, num_lanes(self.target, E, N), N, p.num_other_agents_observed)
        self._scratch = dict(
            dist_row=torch.zeros(shapes["dist_row"], **f32), cand_idx=torch.zeros(shapes["cand_idx"], **i32),
            cand_dist=torch.zeros(shapes["cand_dist"], **f32), nbr_idx=torch.zeros(shapes["out_idx"], **i32),
        )
        self._tables = dict(
            acc_table=torch.as_tensor(action_table(p.min_acceleration, p.max_acceleration,
                                                   p.num_acceleration_levels), device=dev),
            turn_table=torch.as_tensor(action_table(p.min_turn, p.max_turn, p.num_turn_levels), device=dev),
        )
        self._consts = make_consts(p, autoreset=self.autoreset, seed=self.seed, env_id_offset=self.env_id_offset)
        self._arrays = self._kernel_arrays()
        # The reset kernel shares the step kernel's signature but reads no actions. A buffer of its own
        # (not a state array): the CUDA simulator copies top-level array args back after a launch.
        self._no_actions = self._view(torch.zeros((1, 1, 2), dtype=torch.int64, device=dev))

    def _kernel_arrays(self) -> TagArrays:
        v = self._view
        st = {f.name: v(getattr(self.state, f.name)) for f in fields(self.state)}
        return TagArrays(
            **st, obs=v(self.obs), final_obs=v(self.final_obs), reward=v(self.reward),
            terminated=v(self.terminated), truncated=v(self.truncated), finished=v(self._finished),
            reset_mask=v(self._reset_mask), tagged_by=v(self._tagged_by),
            **{name: v(t) for name, t in self._scratch.items()},
            **{name: v(t) for name, t in self._tables.items()},
        )

    @property
    def acceleration_table(self) -> np.ndarray:
        return self._tables["acc_table"].cpu().numpy()  # host-ok: set-up accessor

    @property
    def turn_table(self) -> np.ndarray:
        return self._tables["turn_table"].cpu().numpy()  # host-ok: set-up accessor

    def _rekey(self, mask: torch.Tensor) -> None:
        self._consts = self._consts._replace(seed=np.uint64(self.seed))
        # The next reset draws episode 0 of the new seed, exactly as a fresh env with that seed would.
        self.state.episode.masked_fill_(mask, 0)

    def _launch_reset(self, mask: torch.Tensor) -> None:
        self._reset_mask.copy_(mask)
        self._launch(tag_reset, self._no_actions)

    def _launch_step(self, actions: torch.Tensor, out: StepOutputs | None) -> None:
        arrays = self._arrays
        if out is not None:
            v = self._view
            arrays = arrays._replace(obs=v(out.obs), reward=v(out.reward), terminated=v(out.terminated),
                                     truncated=v(out.truncated), final_obs=v(out.final_obs))
        self._launch(tag_step, self._view(actions), arrays)

    def step_metrics(self) -> dict[str, torch.Tensor]:
        """``tags``: runners tagged in the last step, float32 [num_envs] (valid after autoreset too)."""
        return {"tags": (self._tagged_by[:, self.params.num_taggers:] >= 0).sum(1, dtype=torch.float32)}

    def _launch(self, kernel, actions, arrays=None) -> None:
        kernel.launch(self.target, self.num_envs, self.num_agents, arrays or self._arrays, self._consts,
                      actions, stream=self._stream())
