"""Acting of one agent group, by a backend generated from the one definition :meth:`ActorCritic.act`.

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


def _act(policy: ActorCritic, obs: torch.Tensor, ids: torch.Tensor, step: torch.Tensor, seed: torch.Tensor):
    return policy.act(obs, ids, step, seed)


_act_compiled = compile_step(_act)


class GroupActor:
    """Acting for the agents ``group_start .. group_start + n`` of every env, by ``backend``.

    ``seed``: int64 [2] (the counter RNG's key halves, :func:`~gpurl.fusion.counter_rng.seed_tensor`);
    ``env_offset``: global id of this rank's first env; ``num_agents``: agents per env.
    """

    def __init__(self, policy: ActorCritic, backend: str, seed: torch.Tensor, env_offset: int, num_agents: int,
                 group_start: int):
        self.policy = policy
        self.backend = resolve_acting_backend(backend, policy, seed.device)
        self.seed, self.env_offset, self.num_agents, self.group_start = seed, env_offset, num_agents, group_start
        self.packed = PackedPolicy(policy, policy.activation) if self.backend == "triton" else None
        self._act = {"eager": _act, "compiled": _act_compiled}.get(self.backend)

    def sync(self) -> None:
        """The policy's weights changed: refresh the fused kernel's packed copy."""
        if self.packed is not None:
            self.packed.sync()

    @torch.no_grad()
    def __call__(self, x: torch.Tensor, step: torch.Tensor, action: torch.Tensor, log_prob: torch.Tensor,
                 value: torch.Tensor, seed: torch.Tensor | None = None) -> None:
        """x float32 [E, n, in_dim]; step int64 [1]; writes action [E, n, action_dims], log_prob and
        value float32 [E, n] (views of the rollout storage)."""
        seed = self.seed if seed is None else seed
        if self.packed is not None:
            actor_step_triton(x, self.packed, step, seed, self.env_offset, self.num_agents, self.group_start,
                              action, log_prob, value)
            return
        E, n, D = x.shape
        ids = global_agent_ids(E, n, self.env_offset, self.num_agents, self.group_start, x.device)
        a, lp, v = self._act(self.policy, x.reshape(E * n, D), ids, step, seed)
        action.copy_(a.view(E, n, -1))
        log_prob.copy_(lp.view(E, n))
        value.copy_(v.view(E, n))


__all__ = ["ACTING_BACKENDS", "GroupActor", "global_agent_ids", "resolve_acting_backend"]
