"""Acting of the trained groups, by a backend generated from the one definition :meth:`ActorCritic.act`.

Backends (``policy_backend``):
- ``eager``: ``ActorCritic.act`` as written (the reference);
- ``compiled``: the same function through ``torch.compile`` (inductor: the GEMMs, then one fused
  loop for the activations, the counter RNG, the sampling and the log-probs);
- ``triton``: the fused Triton kernel (``gpurl.fusion.actor``), one launch per group and step, held
  to the reference in Triton's interpreter; categorical heads on CUDA (or under ``TRITON_INTERPRET=1``);
- ``auto``: ``triton`` on CUDA for categorical heads, else ``compiled``.
"""
from __future__ import annotations

import functools
import os

import torch

from ..fusion.actor import actor_step_triton
from ..fusion.packing import PackedPolicy
from .compiling import compile_step
from .distributions import Categoricals
from .nets import ActorCritic

ACTING_BACKENDS = ("auto", "eager", "compiled", "triton")


def resolve_acting_backend(backend: str, policy: ActorCritic, device: torch.device) -> str:
    """The backend ``backend`` stands for with ``policy`` on ``device``; ValueError if it cannot run."""
    if backend not in ACTING_BACKENDS:
        raise ValueError(f"policy_backend must be one of {ACTING_BACKENDS}, got {backend!r}")
    categorical = isinstance(policy.dist, Categoricals)
    if backend == "auto":
        return "triton" if device.type == "cuda" and categorical else "compiled"
    if backend == "triton":
        if not categorical:
            raise ValueError("policy_backend='triton' needs categorical heads (Discrete/MultiDiscrete actions)")
        if device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
            raise ValueError("policy_backend='triton' runs on CUDA, or on the CPU only under TRITON_INTERPRET=1 "
                             "(Triton's interpreter)")
    return backend


@functools.lru_cache(maxsize=64)
def global_agent_ids(E: int, n: int, env_offset: int, num_agents: int, group_start: int, device) -> torch.Tensor:
    """int64 [E * n]: (env_offset + e) * num_agents + group_start + i for row (e, i). Cached (the
    rollout asks for the same ids every step); callers must not write into it."""
    e = torch.arange(E, device=device).repeat_interleave(n)
    i = torch.arange(n, device=device).repeat(E)
    return (env_offset + e) * num_agents + group_start + i


def _act(policies: list[ActorCritic], inputs: list[torch.Tensor], ids: list[torch.Tensor], step: torch.Tensor,
         seed: torch.Tensor, states: list | None = None) -> list[tuple]:
    """Every group's ``act`` in one call (one compiled graph per step, not one per group); ``states``:
    per group None (feed-forward) or (state in [B, H], start bool [B])."""
    states = states or [None] * len(policies)
    return [policy.act(x, i, step, seed, *(state or ())) for policy, x, i, state in zip(policies, inputs, ids, states)]


_act_compiled = compile_step(_act)


class Acting:
    """Acting for trained groups: ``policies[name]`` acts for the agents ``starts[name] ..
    starts[name] + n`` of every env, by ``backend`` (resolved per group: ``auto`` may give the fused
    kernel to categorical groups and the compiled definition to Box ones).

    ``seed``: int64 [2] (the counter RNG's key halves, :func:`~gpurl.fusion.counter_rng.seed_tensor`);
    ``env_offset``: global id of this rank's first env; ``num_agents``: agents per env.
    """

    def __init__(self, policies: dict[str, ActorCritic], starts: dict[str, int], backend: str, seed: torch.Tensor,
                 env_offset: int, num_agents: int):
        self.policies, self.starts = policies, starts
        self.seed, self.env_offset, self.num_agents = seed, env_offset, num_agents
        self.backends = {name: resolve_acting_backend(backend, p, seed.device) for name, p in policies.items()}
        self.packed = {name: PackedPolicy(p, p.activation) for name, p in policies.items()
                       if self.backends[name] == "triton"}
        self.torch_groups = [name for name in policies if name not in self.packed]
        self._act = _act_compiled if "compiled" in self.backends.values() else _act

    def sync(self) -> None:
        """The policies' weights changed: refresh the fused kernel's packed copies."""
        for packed in self.packed.values():
            packed.sync()

    @torch.no_grad()
    def __call__(self, inputs: dict[str, torch.Tensor], step: torch.Tensor,
                 outputs: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]],
                 seed: torch.Tensor | None = None,
                 carried: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] | None = None) -> None:
        """``inputs[name]`` float32 [E, n, in_dim]; step int64 [1]; writes ``outputs[name]`` = (action
        [E, n, action_dims], log_prob [E, n], value [E, n] or None for a policy without a critic)
        (views of the rollout storage). A recurrent group's ``carried[name]`` = (state in float32 [E, n,
        H], starts bool [E], state out [E, n, H]): the state is zeroed where starts, then stepped."""
        seed = self.seed if seed is None else seed
        for name, packed in self.packed.items():
            actor_step_triton(inputs[name], packed, step, seed, self.env_offset, self.num_agents, self.starts[name],
                              *outputs[name])
        if not self.torch_groups:
            return
        shapes = [inputs[name].shape for name in self.torch_groups]
        rows = [inputs[name].reshape(E * n, D) for name, (E, n, D) in zip(self.torch_groups, shapes)]
        ids = [global_agent_ids(E, n, self.env_offset, self.num_agents, self.starts[name], rows[0].device)
               for name, (E, n, _) in zip(self.torch_groups, shapes)]
        states = [None] * len(rows)
        if carried:
            states = [(carried[name][0].reshape(E * n, -1), carried[name][1].repeat_interleave(n))
                      for name, (E, n, _) in zip(self.torch_groups, shapes)]
        results = self._act([self.policies[name] for name in self.torch_groups], rows, ids, step, seed, states)
        for name, (E, n, _), (a, lp, v, h) in zip(self.torch_groups, shapes, results):
            action, log_prob, value = outputs[name]
            action.copy_(a.view(E, n, -1))
            log_prob.copy_(lp.view(E, n))
            if value is not None:
                value.copy_(v.view(E, n))
            if h is not None:
                carried[name][2].copy_(h.view(E, n, -1))


__all__ = ["ACTING_BACKENDS", "Acting", "global_agent_ids", "resolve_acting_backend"]
