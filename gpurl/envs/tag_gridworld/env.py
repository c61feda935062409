"""``gpurl.make("tag_gridworld", ...)``: the env class over the gridworld kernels."""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, fields

import gymnasium
import numpy as np
import torch

from ..base import KernelEnv, StepOutputs
from ..spaces import Group
from .cuda_c import GridCudaC, cuda_c_module
from .kernels import gridworld_step
from .layout import GridArrays, make_consts
from . import draw
from .params import TagGridworldParams, reward_table


@dataclass
class TagGridworldState:
    """Struct of arrays on ``env.device``; write in place to inject a state (then ``env.step``)."""

    x: torch.Tensor          # int32 [E, N], cells 0..grid_length
    y: torch.Tensor          # int32 [E, N]
    timestep: torch.Tensor   # int32 [E]
    episode: torch.Tensor    # int32 [E], episodes started since the seed was set (keys reset draws)


class TagGridworld(KernelEnv):
    """Discrete grid tag (docs/specs/tag_gridworld.md): taggers are agents 0..T-1, the runner is agent T.

    Actions ``Discrete(5)``: 0 stay, 1 x+1, 2 x-1, 3 y+1, 4 y-1; ``[E, N]`` or ``[E, N, 1]`` int32/int64
    (with ``validate=False`` nothing checks them; an unknown action then stays put). Returned tensors are
    views of buffers rewritten in place by the next step: copy what you keep.

    ``kernel_source``: ``"numba"`` (default; CPU and CUDA) or ``"cuda_c"``: the same kernel written in CUDA C
    (``tag_gridworld.cu``, launched through CuPy on torch's stream; CUDA devices only), bit for bit the same.
    """

    draw_frame = staticmethod(draw.draw_frame)  # gpurl.render draws episodes with it

    def __init__(self, *, num_envs=1024, device="cpu", seed=0, autoreset=True, validate=True,
                 env_id_offset=0, target=None, kernel_source="numba", **env_params):
        self.params = TagGridworldParams.from_kwargs(**env_params)
        if kernel_source not in ("numba", "cuda_c"):
            raise ValueError(f"kernel_source must be 'numba' or 'cuda_c', got {kernel_source!r}")
        super().__init__(num_envs=num_envs, device=device, seed=seed, autoreset=autoreset,
                         validate=validate, env_id_offset=env_id_offset, target=target)
        if kernel_source == "cuda_c" and self.device.type != "cuda":
            raise ValueError(f"kernel_source='cuda_c' launches CUDA C through CuPy and needs a CUDA device, got "
                             f"device={str(self.device)!r}; use kernel_source='numba' (the default) on the CPU")
        p = self.params
        space = gymnasium.spaces.Discrete(5)
        groups = OrderedDict(
            tagger=Group(slice(0, p.num_taggers), p.obs_dim, space),
            runner=Group(slice(p.num_taggers, p.num_agents), p.obs_dim, space),
        )
        self._setup_outputs(p.num_agents, groups)
        E, N, dev = self.num_envs, p.num_agents, self.device
        i32 = dict(dtype=torch.int32, device=dev)
        u8 = dict(dtype=torch.uint8, device=dev)
        self.state = TagGridworldState(x=torch.zeros(E, N, **i32), y=torch.zeros(E, N, **i32),
                                       timestep=torch.zeros(E, **i32), episode=torch.zeros(E, **i32))
        self._tags = torch.zeros(E, dtype=torch.float32, device=dev)
        self._finished = torch.zeros(E, **u8)
        self._restart = torch.zeros(E, **u8)
        self._hit_wall = torch.zeros(E, N, **u8)
        self._reward_table = torch.as_tensor(reward_table(p), device=dev)
        self._consts = make_consts(p, autoreset=self.autoreset, seed=self.seed, env_id_offset=self.env_id_offset)
        self._reset_consts = self._consts._replace(reset_only=np.int32(1))
        self._tensors = GridArrays(  # the kernels' arguments as torch tensors
            **{f.name: getattr(self.state, f.name) for f in fields(self.state)}, obs=self.obs,
            final_obs=self.final_obs, reward=self.reward, terminated=self.terminated, truncated=self.truncated,
            tags=self._tags, finished=self._finished, restart=self._restart, hit_wall=self._hit_wall,
            reward_table=self._reward_table,
        )
        self.kernel_source = kernel_source
        self._cuda_c = GridCudaC(cuda_c_module()) if kernel_source == "cuda_c" else None
        if self._cuda_c is None:  # the Numba build takes zero-copy array views
            self._arrays = GridArrays(*map(self._view, self._tensors))
            # A reset launch of the step kernel reads no actions. A buffer of its own (not a state array):
            # the CUDA simulator copies top-level array args back after a launch.
            self._no_actions = self._view(torch.zeros((1, 1, 1), dtype=torch.int64, device=dev))

    def _rekey(self, mask: torch.Tensor) -> None:
        self._consts = self._consts._replace(seed=np.uint64(self.seed))
        self._reset_consts = self._consts._replace(reset_only=np.int32(1))
        # The next reset draws episode 0 of the new seed, exactly as a fresh env with that seed would.
        self.state.episode.masked_fill_(mask, 0)

    def _launch_reset(self, mask: torch.Tensor) -> None:
        self._restart.copy_(mask)
        if self._cuda_c is not None:
            self._cuda_c.launch(self._tensors, self._reset_consts, self.obs_dim, None)
            return
        gridworld_step.launch(self.target, self.num_envs, self.num_agents, self._arrays, self._reset_consts,
                              self._no_actions, stream=self._stream())

    def _launch_step(self, actions: torch.Tensor, out: StepOutputs | None) -> None:
        # out's fields (obs, reward, terminated, truncated, final_obs) replace the env's own buffers
        if self._cuda_c is not None:
            tensors = self._tensors if out is None else self._tensors._replace(**out._asdict())
            self._cuda_c.launch(tensors, self._consts, self.obs_dim, actions)
            return
        arrays = self._arrays
        if out is not None:
            arrays = arrays._replace(**{name: self._view(t) for name, t in out._asdict().items()})
        gridworld_step.launch(self.target, self.num_envs, self.num_agents, arrays, self._consts, self._view(actions),
                              stream=self._stream())

    def step_metrics(self) -> dict[str, torch.Tensor]:
        """``tags``: 1.0 where the runner was tagged in the last step, float32 [num_envs] (a view,
        rewritten by the next step; valid after autoreset too, 0 for envs frozen by autoreset=False)."""
        return {"tags": self._tags}
