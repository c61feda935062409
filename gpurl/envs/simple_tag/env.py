"""``gpurl.make("simple_tag", ...)``: the env class over the simple_tag kernels."""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, fields

import gymnasium
import numpy as np
import torch

from ...kernels import freeze_constants
from ..base import KernelEnv, StepOutputs
from ..spaces import Group
from .env_major import num_calls, simple_tag_env_major
from .kernels import simple_tag_reset, simple_tag_step
from .layout import SimpleTagArrays, make_consts
from . import draw
from .params import NUM_MOVES, SimpleTagParams

#: target -> (step kernel, reset kernel): thread-per-agent phases on CUDA, one env-major kernel for both on
#: the CPU (see .env_major).
KERNELS = {"cuda": (simple_tag_step, simple_tag_reset), "cpu": (simple_tag_env_major, simple_tag_env_major)}

#: A CPU batch of at least FIXED_SIZE_MIN_ENVS envs of a world with at most FIXED_SIZE_LIMIT agents and
#: as many obstacles gets a build of its own with the sizes compiled in (physics.SIMPLE_TAG_AGENTS): the
#: step is faster, for one more compile (tens of seconds) per world size, which only a large batch repays.
#: Other batches share the build with run-time sizes; both builds compute the same bits. The large
#: batches also step FIXED_SIZE_CHUNK envs per call (env_major.SIMPLE_TAG_CHUNK), fewer calls per step.
FIXED_SIZE_LIMIT = 16
FIXED_SIZE_MIN_ENVS = 256
FIXED_SIZE_CHUNK = 64


def fixed_sizes(p: SimpleTagParams, target: str, num_envs: int) -> tuple:
    """The build constants of a ``num_envs`` batch of ``p`` on ``target``: the world's sizes for large CPU
    batches of small worlds, else none (run-time sizes)."""
    small = p.num_agents <= FIXED_SIZE_LIMIT and p.num_obstacles <= FIXED_SIZE_LIMIT
    if target != "cpu" or not small or num_envs < FIXED_SIZE_MIN_ENVS:
        return ()
    return freeze_constants({"SIMPLE_TAG_AGENTS": p.num_agents, "SIMPLE_TAG_OBSTACLES": p.num_obstacles,
                             "SIMPLE_TAG_ADVERSARIES": p.num_adversaries, "SIMPLE_TAG_CHUNK": FIXED_SIZE_CHUNK})


@dataclass
class SimpleTagState:
    """Struct of arrays on ``env.device``; write in place to inject a state (then ``env.step``)."""

    pos: torch.Tensor           # float32 [E, N, 2], agents (adversaries first)
    vel: torch.Tensor           # float32 [E, N, 2]
    landmark_pos: torch.Tensor  # float32 [E, L, 2], obstacles (never move)
    timestep: torch.Tensor      # int32 [E]
    episode: torch.Tensor       # int32 [E], episodes started since the seed was set (keys reset draws)


class SimpleTag(KernelEnv):
    """MPE simple_tag as in mpe2 1.1.1 (docs/specs/simple_tag.md).

    Agents 0..A-1 are the group ``"adversary"``, A..N-1 the group ``"good"``. ``env.obs_dim`` is the
    adversaries' observation size; a good agent's row is 2 shorter and ends in 2 zeros. Box actions are
    clipped into [0, 1] as in mpe2; with ``validate=True`` a NaN action is an error (mpe2 raises too).
    """

    draw_frame = staticmethod(draw.draw_frame)  # gpurl.render draws episodes with it
    #: PettingZoo agent names: mpe2's prefixes, so code written for mpe2 runs as is
    agent_prefixes = {"adversary": "adversary", "good": "agent"}

    def __init__(self, *, num_envs=1024, device="cpu", seed=0, autoreset=True, validate=True,
                 env_id_offset=0, target=None, **env_params):
        self.params = SimpleTagParams.from_kwargs(**env_params)
        super().__init__(num_envs=num_envs, device=device, seed=seed, autoreset=autoreset,
                         validate=validate, env_id_offset=env_id_offset, target=target)
        p = self.params
        space = (gymnasium.spaces.Box(0.0, 1.0, (NUM_MOVES,), dtype=np.float32) if p.continuous_actions
                 else gymnasium.spaces.Discrete(NUM_MOVES))
        groups = OrderedDict(
            adversary=Group(slice(0, p.num_adversaries), p.adversary_obs_dim, space),
            good=Group(slice(p.num_adversaries, p.num_agents), p.good_obs_dim, space),
        )
        self._setup_outputs(p.num_agents, groups)
        E, N, L, dev = self.num_envs, p.num_agents, p.num_obstacles, self.device
        f32 = dict(dtype=torch.float32, device=dev)
        i32 = dict(dtype=torch.int32, device=dev)
        self.state = SimpleTagState(
            pos=torch.zeros(E, N, 2, **f32), vel=torch.zeros(E, N, 2, **f32),
            landmark_pos=torch.zeros(E, L, 2, **f32), timestep=torch.zeros(E, **i32),
            episode=torch.zeros(E, **i32),
        )
        self._collisions = torch.zeros(E, **f32)
        self._finished = torch.zeros(E, dtype=torch.uint8, device=dev)
        self._reset_mask = torch.zeros(E, dtype=torch.uint8, device=dev)
        self._force = torch.zeros(E, N, 2, **f32)
        self._caught = torch.zeros(E, N, **i32)
        self._consts = make_consts(p, autoreset=self.autoreset, seed=self.seed, env_id_offset=self.env_id_offset)
        self._arrays = self._kernel_arrays()
        self._step_kernel, self._reset_kernel = KERNELS[self.target]
        self._constants = fixed_sizes(p, self.target, self.num_envs)
        # The shared build reads every action as float32 (discrete indices 0..4 are exact): one build serves
        # int32, int64 and Box actions; discrete actions are copied into this buffer (no per-step
        # allocation). A fixed-size build is compiled per action dtype anyway: it reads them as they come.
        copy_actions = self._discrete and not self._constants
        self._discrete_actions = torch.zeros(E, N, 1, **f32) if copy_actions else None
        self._discrete_actions_view = self._view(self._discrete_actions) if copy_actions else None
        # The reset kernel shares the step kernel's signature but reads no actions: a buffer of its own (not
        # a state array: the CUDA simulator copies top-level array args back after a launch), of the dtype
        # the steps will most likely pass (torch's int64 for discrete fixed-size builds), so that reset and
        # step share one compile.
        no_action_dtype = torch.int64 if self._discrete and self._constants else torch.float32
        self._no_actions = self._view(torch.zeros((1, 1, 1), dtype=no_action_dtype, device=dev))
        # The env-major kernel steps a chunk of envs per launched "env" (see .env_major).
        self._launch_envs = self.num_envs if self.target == "cuda" else num_calls(self.num_envs, self._constants)
        # CPU steps into the env's own buffers keep every argument's type but the actions': dispatched once
        # per action dtype and ndim (the rest of a step's launch costs ~2.5% of a 4096-env step).
        self._direct_step = self._step_kernel.direct_launch(self._constants) if self.target == "cpu" else None

    def _kernel_arrays(self) -> SimpleTagArrays:
        v = self._view
        st = {f.name: v(getattr(self.state, f.name)) for f in fields(self.state)}
        return SimpleTagArrays(
            **st, obs=v(self.obs), final_obs=v(self.final_obs), reward=v(self.reward),
            terminated=v(self.terminated), truncated=v(self.truncated), collisions=v(self._collisions),
            finished=v(self._finished), reset_mask=v(self._reset_mask), force=v(self._force),
            caught=v(self._caught),
        )

    def _check_actions(self, actions) -> torch.Tensor:
        actions = super()._check_actions(actions)
        if not self._discrete and bool(actions.isnan().any()):  # host-ok: validate=True opt-in check
            e, i, d = (int(v) for v in actions.isnan().nonzero()[0])
            raise ValueError(f"actions[{e}, {i}, {d}] is NaN: Box actions are clipped into [0, 1], "
                             "NaN cannot be (mpe2 raises on it too)")
        return actions

    def _rekey(self, mask: torch.Tensor) -> None:
        self._consts = self._consts._replace(seed=np.uint64(self.seed))
        # The next reset draws episode 0 of the new seed, exactly as a fresh env with that seed would.
        self.state.episode.masked_fill_(mask, 0)

    def _launch_reset(self, mask: torch.Tensor) -> None:
        self._reset_mask.copy_(mask)
        consts = self._consts._replace(reset=np.int32(1))  # read by the CPU's env-major kernel only
        self._reset_kernel.launch(self.target, self._launch_envs, self.num_agents, self._arrays, consts,
                                  self._no_actions, stream=self._stream(), constants=self._constants)

    def _launch_step(self, actions: torch.Tensor, out: StepOutputs | None) -> None:
        arrays = self._arrays
        if out is not None:
            v = self._view
            arrays = arrays._replace(obs=v(out.obs), reward=v(out.reward), terminated=v(out.terminated),
                                     truncated=v(out.truncated), final_obs=v(out.final_obs))
        if self._discrete_actions is not None:
            self._discrete_actions.copy_(actions)
            action_view = self._discrete_actions_view
        else:  # Box actions, or a fixed-size build: compiled per action dtype, it reads int indices as they
            action_view = self._view(actions)  # come (no float32 copy per step)
        if self._direct_step is not None and out is None:
            self._direct_step((action_view.dtype, action_view.ndim), self._launch_envs, self.num_agents, arrays,
                              self._consts, action_view)
            return
        self._step_kernel.launch(self.target, self._launch_envs, self.num_agents, arrays, self._consts, action_view,
                                 stream=self._stream(), constants=self._constants)

    def step_metrics(self) -> dict[str, torch.Tensor]:
        """``collisions``: adversary-good pairs in contact after the last step, float32 [num_envs].

        Every adversary's reward is 10x this; 0 for a frozen env. A view rewritten by the next step.
        """
        return {"collisions": self._collisions}
