"""Acting of the off-policy Box-action algorithms (MADDPG, IDDPG, MATD3; MASAC, ISAC), by a backend generated
from the policies' one definitions, :meth:`DeterministicActor.act` and :meth:`SquashedGaussianActor.act`.

Backends (``policy_backend``, as for the value-based family's :mod:`~.q_acting`):
- ``eager``: the actors' ``act`` as written (the reference);
- ``compiled``: the same function through ``torch.compile``, every group in one call per step;
- ``triton``: the fused kernel :mod:`gpurl.fusion.box_actor`, one launch per group and step, held to the
  reference in Triton's interpreter; on CUDA (or under ``TRITON_INTERPRET=1``);
- ``auto``: ``triton`` on CUDA, else ``compiled``.
"""
from __future__ import annotations

import torch
from torch import nn

from ..fusion.box_actor import box_actor_step_triton, pack_box_policy
from ..storage.rollout import RolloutStorage
from .acting import as_input, global_agent_ids, resolve_kernel_backend
from .base import EnvSpec
from .box_nets import BoxPolicy
from .compiling import compile_step


def _act(actors: list[BoxPolicy], inputs: list, ids: list[torch.Tensor], step: torch.Tensor, seed: torch.Tensor,
         std: float, deterministic: bool) -> list[torch.Tensor]:
    """Every group's actions float32 [E * n, A] in one call (one compiled graph per step). ``inputs`` per group:
    float32 [E, n, in_dim] or a frame stack of the rollout storage (made into rows inside the call)."""
    rows = [as_input(x) for x in inputs]
    return [actor.act(x.reshape(x.shape[0] * x.shape[1], -1), i, step, seed, std, deterministic)
            for actor, x, i in zip(actors, rows, ids)]


_act_compiled = compile_step(_act, rng=True)


class BoxActor:
    """Every trained group's Box actions at step t (untrained groups are the trainer's): a
    :class:`~.box_nets.DeterministicActor`'s action plus Gaussian exploration noise of std ``std`` (in half
    ranges) clipped to the Box, or a :class:`~.box_nets.SquashedGaussianActor`'s sample; the policy's own
    action (the mean's squash) when ``deterministic``. An evaluation's ``seed`` replaces the run's and keeps
    the noise (as the DDPG actor always did): pass ``deterministic`` for the noiseless policy.

    ``backend``: the resolved backend (see the module docstring); ``sync()`` after every update of the
    actors' weights (the fused kernel reads packed copies).
    """

    inputs = ("obs[H + t]", "starts")
    outputs = ("actions[t]",)

    def __init__(self, groups, actors: nn.ModuleDict, spec: EnvSpec, seed: torch.Tensor, std: float, backend: str,
                 activation: str):
        for name, actor in actors.items():
            if not isinstance(actor, BoxPolicy) or actor.outputs_per_dim not in (1, 2):
                raise TypeError(f"group {name!r}: BoxActor acts with DeterministicActor or SquashedGaussianActor "
                                f"policies, got {type(actor).__name__}")
        self.groups, self.actors, self.spec, self.seed, self.std = groups, actors, spec, seed, float(std)
        self.backend = resolve_kernel_backend(backend, spec.device)
        self.packed = {name: pack_box_policy(actor.net, actor.action_dims, actor.outputs_per_dim, activation)
                       for name, actor in actors.items()} if self.backend == "triton" else {}
        self._act = _act_compiled if self.backend == "compiled" else _act
        # The noise std on the device: the kernel reads it through a pointer.
        self.std_t = torch.full((1,), self.std, device=spec.device)

    def sync(self) -> None:
        """The actors' weights changed: refresh the fused kernel's packed copies."""
        for packed in self.packed.values():
            packed.sync()

    def _noise(self, actor: BoxPolicy, deterministic: bool) -> bool:
        # What act() draws: the squashed Gaussian samples unless deterministic; the deterministic actor adds
        # noise unless deterministic or std == 0.
        return not deterministic and (actor.outputs_per_dim == 2 or self.std != 0)

    @torch.no_grad()
    def run(self, s: RolloutStorage, t: int, step: torch.Tensor, seed: torch.Tensor | None = None,
            deterministic: bool = False) -> None:
        seed = self.seed if seed is None else seed
        names = list(self.actors)
        inputs = [s.frame_views(t, t + 1, self.groups[name].agents, self.groups[name].obs_dim)
                  for name in names]  # frames [1, E, n, obs_dim] each
        outputs = [s.actions[t, :, self.groups[name].agents, :self.actors[name].action_dims]
                   for name in names]  # [E, n, A] views
        if self.packed:
            for name, x, out in zip(names, inputs, outputs):
                actor = self.actors[name]
                box_actor_step_triton(as_input(x), self.packed[name], actor.low, actor.half_range, step, seed,
                                      self.std_t, self.spec.env_offset, self.spec.num_agents,
                                      self.groups[name].agents.start, out, self._noise(actor, deterministic))
            return
        E = s.actions.shape[1]
        ids = [global_agent_ids(E, out.shape[1], self.spec.env_offset, self.spec.num_agents,
                                self.groups[name].agents.start, out.device) for name, out in zip(names, outputs)]
        actions = self._act([self.actors[name] for name in names], inputs, ids, step, seed, self.std, deterministic)
        # Into the slots in one multi-tensor copy, outside the compiled call (the groups' slots are views of one
        # buffer: see gpurl.algos.acting).
        torch._foreach_copy_(outputs, [action.view(out.shape) for out, action in zip(outputs, actions)])


__all__ = ["BoxActor"]
