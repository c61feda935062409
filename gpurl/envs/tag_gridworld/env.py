"""``gpurl.make("tag_gridworld", ...)``: the env class over the gridworld kernels."""
from __future__ import annotations

import gymnasium
import numpy as np
import torch

from ...kernels.fields import field
from ..base import KernelEnv, StepOutputs
from ..spaces import Group
from .cuda_c import GridCudaC, cuda_c_module
from .kernels import START_PHASES, STATE_FEATURES, STATE_PHASES, STEP_PHASES
from . import draw
from .params import TagGridworldParams, reward_table


class TagGridworld(KernelEnv):
    """Discrete grid tag (docs/specs/tag_gridworld.md): taggers are agents 0..T-1, the runner is agent T.

    Actions ``Discrete(5)``: 0 stay, 1 x+1, 2 x-1, 3 y+1, 4 y-1; ``[E, N]`` or ``[E, N, 1]`` int32/int64
    (with ``validate=False`` nothing checks them; an unknown action then stays put). Returned tensors are
    views of buffers rewritten in place by the next step: copy what you keep. ``env.state``: ``x``, ``y``
    int32 [E, N] (cells 0..grid_length), ``timestep`` int32 [E], ``episode``. ``env.global_state`` float32
    [E, 3 N + 1]: per agent (agent order) x / L, y / L, 1 for the runner (else 0); then timestep /
    episode_length (docs/specs/tag_gridworld.md, "Global state").

    ``kernel_source``: ``"numba"`` (default; CPU and CUDA) or ``"cuda_c"``: the same kernel written in CUDA C
    (``tag_gridworld.cu``, launched through CuPy on torch's stream; CUDA devices only), bit for bit the same.
    """

    draw_frame = staticmethod(draw.draw_frame)  # gpurl.render draws episodes with it

    name = "tag_gridworld"
    params_type = TagGridworldParams
    state = {"x": field("int32", "agents"), "y": field("int32", "agents"), "timestep": field("int32")}
    scratch = {"hit_wall": field("uint8", "agents")}  # this step's move of agent i was clipped
    metrics = ("tags",)  # 1 where the runner was tagged in the last step
    step_phases = STEP_PHASES
    start_phases = START_PHASES
    state_phases = STATE_PHASES

    def __init__(self, *, kernel_source="numba", device="cpu", **kwargs):
        if kernel_source not in ("numba", "cuda_c"):
            raise ValueError(f"kernel_source must be 'numba' or 'cuda_c', got {kernel_source!r}")
        if kernel_source == "cuda_c" and torch.device(device).type != "cuda":
            raise ValueError(f"kernel_source='cuda_c' launches CUDA C through CuPy and needs a CUDA device, got "
                             f"device={str(device)!r}; use kernel_source='numba' (the default) on the CPU")
        self.kernel_language = kernel_source  # "numba" or "cuda_c", before the build: it chooses the launcher
        super().__init__(device=device, **kwargs)

    def groups(self):
        p = self.params
        space = gymnasium.spaces.Discrete(5)
        return {"tagger": Group(slice(0, p.num_taggers), p.obs_dim, space),
                "runner": Group(slice(p.num_taggers, p.num_agents), p.obs_dim, space)}

    def global_state_dim(self):
        return STATE_FEATURES * self.params.num_agents + 1

    def tables(self):
        return {"reward_table": reward_table(self.params)}  # [is_runner, tagged, hit_wall] -> reward

    def constants(self):
        p = self.params
        return dict(num_taggers=np.int32(p.num_taggers),  # also the runner's index
                    grid_length=np.int32(p.grid_length), length_f32=np.float32(p.grid_length),
                    episode_length=np.int32(p.episode_length), time_norm=np.float32(p.episode_length),
                    full_obs=np.int32(bool(p.use_full_observation)), random_start=np.int32(bool(p.random_start)),
                    center=np.int32(p.grid_length // 2))  # the taggers' fixed start

    # ---- the CUDA C kernel launches on the same arrays (tensors, in the kernel's parameter order) -------

    def choose_launcher(self):
        """``kernel_source="cuda_c"``: ``tag_gridworld.cu`` through CuPy (:class:`.cuda_c.GridCudaC`); else the
        Numba kernel's launcher for the target."""
        if self.kernel_language == "cuda_c":
            return GridCudaC(self, cuda_c_module())
        return super().choose_launcher()

    def kernel_tensors(self, out: StepOutputs | None = None) -> tuple:
        """The kernel's arrays as torch tensors, in its parameter order (``out`` replaces the outputs)."""
        return type(self._arrays)(**self._output_tensors(out), **self._tensors)
