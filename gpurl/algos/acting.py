"""Acting of the trained groups, by a backend generated from the one definition :meth:`ActorCritic.act`.

Backends (``policy_backend``):
- ``eager``: ``ActorCritic.act`` as written (the reference);
- ``compiled``: the same function through ``torch.compile`` (inductor: the GEMMs, then one fused
  loop for the activations, the counter RNG, the sampling and the log-probs);
- ``triton``: the fused Triton kernel, one launch per group and step, held to the reference in
  Triton's interpreter; categorical heads on CUDA (or under ``TRITON_INTERPRET=1``). A feed-forward
  policy runs ``gpurl.fusion.actor`` (its value too, when it has a critic); a recurrent one runs
  ``gpurl.fusion.gru_actor``, which computes no value: a recurrent policy's critic (a feed-forward
  MLP) runs after it as a separate pass, compiled on CUDA (eager in the interpreter);
- ``auto``: ``triton`` on CUDA for categorical heads (recurrent ones up to 128 units), else ``compiled``.

A recurrent group carries its state in the rollout storage: each call reads ``hidden[t]`` and the
episode starts of slot t, and writes ``hidden[t + 1]`` (see :meth:`Acting.__call__`).
"""
from __future__ import annotations

import functools
import os

import torch

from ..envs.params import ParameterError
from ..fusion.actor import actor_step_triton
from ..fusion.gru_actor import MAX_HP, gru_actor_step_triton, gru_kernel_fits
from ..fusion.packing import PackedPolicy, PackedRecurrentPolicy
from .compiling import compile_step
from .distributions import Categoricals
from ..storage.frames import stack_frames
from .nets import ActorCritic

ACTING_BACKENDS = ("auto", "eager", "compiled", "triton")


def resolve_acting_backend(backend: str, policy: ActorCritic, device: torch.device) -> str:
    """The backend ``backend`` stands for with ``policy`` on ``device``; ValueError if it cannot run."""
    categorical = isinstance(policy.dist, Categoricals)
    fits = categorical and (not policy.recurrent or gru_kernel_fits(policy))
    if backend == "triton":
        if not categorical:
            raise ParameterError("policy_backend='triton' needs categorical heads (Discrete/MultiDiscrete actions)")
        if not fits:
            raise ParameterError(f"policy_backend='triton' takes recurrent policies up to {MAX_HP} units wide")
    return resolve_kernel_backend(backend, device, fits)


def resolve_kernel_backend(backend: str, device: torch.device, fits: bool = True) -> str:
    """The backend ``backend`` stands for on ``device`` for a policy whose fused kernel takes it (``fits``):
    ``auto`` is ``triton`` on CUDA, else ``compiled``; ValueError if it cannot run there. The value-based and
    the Box-action families' kernels take every configuration."""
    if backend not in ACTING_BACKENDS:
        raise ValueError(f"policy_backend must be one of {ACTING_BACKENDS}, got {backend!r}")
    if backend == "auto":
        return "triton" if device.type == "cuda" and fits else "compiled"
    if backend == "triton" and device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        raise ParameterError("policy_backend='triton' runs on CUDA, or on the CPU only under TRITON_INTERPRET=1 "
                             "(Triton's interpreter)")
    return backend


@functools.lru_cache(maxsize=64)
def global_agent_ids(E: int, n: int, env_offset: int, num_agents: int, group_start: int, device) -> torch.Tensor:
    """int64 [E * n]: (env_offset + e) * num_agents + group_start + i for row (e, i). Cached (the
    rollout asks for the same ids every step); callers must not write into it."""
    e = torch.arange(E, device=device).repeat_interleave(n)
    i = torch.arange(n, device=device).repeat(E)
    return (env_offset + e) * num_agents + group_start + i


def _act(policies: list[ActorCritic], inputs: list, ids: list[torch.Tensor], step: torch.Tensor,
         seed: torch.Tensor, hiddens: list, starts: list, deterministic: bool = False,
         central: tuple | None = None) -> tuple[list[tuple], list[torch.Tensor]]:
    """Every group's ``act`` in one call (one compiled graph per step, not one per group), its input rows
    made inside it. Per group: ``inputs`` float32 [E, n, in_dim] or a frame stack ``(frames, starts)`` of
    the rollout storage (:meth:`~gpurl.storage.rollout.RolloutStorage.frame_views` at one step);
    ``hiddens`` [E, n, H] and ``starts`` bool [E], or None (feed-forward). ``central``: ``(fn, args)``, a
    pass over other inputs (MAPPO's critics of the global state) made in the same call; its outputs come
    second (none without it)."""
    out = []
    for policy, x, i, h, s in zip(policies, inputs, ids, hiddens, starts):
        x = as_input(x)
        E, n = x.shape[:2]
        h = None if h is None else h.reshape(E * n, -1)
        s = None if s is None else s.unsqueeze(1).expand(E, n).reshape(E * n)
        out.append(policy.act(x.reshape(E * n, -1), i, step, seed, h, s, deterministic))
    return out, ([] if central is None else list(central[0](*central[1])))


def as_input(x) -> torch.Tensor:
    """A group's input [E, n, in_dim]: ``x`` itself, or the input of a frame stack ``(frames, starts)`` at one
    step (each [1, E, ...])."""
    if isinstance(x, tuple):
        return stack_frames(*x)[0]
    return x


def _values(policies: list[ActorCritic], inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Every group's value of its rows [B, in_dim] -> [B] (the critic pass after the GRU kernel)."""
    return [policy.value(x) for policy, x in zip(policies, inputs)]


_act_compiled = compile_step(_act, rng=True)
_values_compiled = compile_step(_values)


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
        self.packed = {name: (PackedRecurrentPolicy if p.recurrent else PackedPolicy)(p, p.activation)
                       for name, p in policies.items() if self.backends[name] == "triton"}
        self.torch_groups = [name for name in policies if name not in self.packed]
        self.recurrent = {name for name, p in policies.items() if p.recurrent}
        self._act = _act_compiled if "compiled" in self.backends.values() else _act
        # The critic pass of recurrent kernel groups: compiled on CUDA, eager in Triton's interpreter.
        self._values = _values_compiled if seed.device.type == "cuda" else _values

    def sync(self) -> None:
        """The policies' weights changed: refresh the fused kernel's packed copies."""
        for packed in self.packed.values():
            packed.sync()

    @torch.no_grad()
    def __call__(self, inputs: dict[str, torch.Tensor], step: torch.Tensor, outputs: dict[str, tuple],
                 seed: torch.Tensor | None = None, hidden: dict[str, tuple] | None = None,
                 deterministic: bool = False, central: tuple | None = None) -> None:
        """``inputs[name]`` float32 [E, n, in_dim], or a frame stack ``(frames, starts)`` of the rollout storage at
        one step (its input is then made inside the compiled call); step int64 [1]; writes ``outputs[name]`` = (action
        [E, n, action_dims], log_prob [E, n], value [E, n] or None) (views of the rollout storage; a
        group whose policy has no critic passes None, and one that passes None gets no value).

        A recurrent group also takes ``hidden[name]`` = (hidden_in float32 [E, n, H], starts bool [E],
        hidden_out float32 [E, n, H]): the state carried in (zeroed first where ``starts``: that
        observation begins an episode) and where the new state goes (the next slot: not hidden_in).

        ``deterministic``: every group's most likely action (evaluation); the fused kernel samples only,
        so a group it acts for refuses it.

        ``central``: ``(fn, compiled_fn, args, targets)``, one more pass of the step (MAPPO's critics of the
        global state): ``fn(*args)`` gives one tensor per entry of ``targets``, written there. Where torch
        groups act it runs inside their compiled call and its results share their copy, else on its own
        (``compiled_fn``)."""
        if deterministic and self.packed:
            raise ValueError(f"deterministic acting runs the torch definition; groups {sorted(self.packed)} act by "
                             "the fused kernel (policy_backend 'triton'): use policy_backend 'eager' or 'compiled'")
        seed = self.seed if seed is None else seed
        hidden = {} if hidden is None else hidden
        for name in self.policies:
            self._check(name, outputs[name], hidden)
        critic_groups = []
        inputs = {name: as_input(x) if name in self.packed else x for name, x in inputs.items()}
        for name, packed in self.packed.items():
            action, log_prob, value = outputs[name]
            if name in self.recurrent:
                h_in, starts, h_out = hidden[name]
                gru_actor_step_triton(inputs[name], packed, h_in, starts, step, seed, self.env_offset,
                                      self.num_agents, self.starts[name], action, log_prob, h_out)
                if value is not None:
                    critic_groups.append(name)
            else:
                actor_step_triton(inputs[name], packed, step, seed, self.env_offset, self.num_agents,
                                  self.starts[name], action, log_prob, value)
        if critic_groups:
            rows = [inputs[name].reshape(-1, inputs[name].shape[-1]) for name in critic_groups]
            for name, v in zip(critic_groups, self._values([self.policies[name] for name in critic_groups], rows)):
                value = outputs[name][2]
                value.copy_(v.view(value.shape))
        if self.torch_groups:
            self._act_torch(inputs, step, outputs, seed, hidden, deterministic, central)
        elif central is not None:
            _, compiled_fn, args, targets = central
            results = compiled_fn(*args)
            torch._foreach_copy_(targets, [v.view(t.shape) for t, v in zip(targets, results)])

    def _act_torch(self, inputs, step, outputs, seed, hidden, deterministic: bool, central) -> None:
        groups = self.torch_groups
        shapes = [(inputs[name][0][0] if isinstance(inputs[name], tuple) else inputs[name][None]).shape[1:3]
                  for name in groups]
        ids = [global_agent_ids(E, n, self.env_offset, self.num_agents, self.starts[name], step.device)
               for name, (E, n) in zip(groups, shapes)]
        states = [hidden.get(name, (None, None, None))[0] for name in groups]
        starts = [hidden.get(name, (None, None, None))[1] for name in groups]
        fn_args = None if central is None else (central[0], central[2])
        results, central_results = self._act([self.policies[name] for name in groups],
                                             [inputs[name] for name in groups], ids, step, seed, states, starts,
                                             deterministic, fn_args)
        # Every result into its slot in one multi-tensor copy. (Not inside the compiled call: the slots of
        # several groups are views of one buffer, and inductor 2.13 writes such aliased views at the first
        # call's offsets on later calls.)
        targets = [] if central is None else list(central[3])
        sources = [v.view(t.shape) for t, v in zip(targets, central_results)]
        for name, result in zip(groups, results):
            for target, value in zip((*outputs[name], hidden[name][2] if name in hidden else None), result):
                if target is not None:
                    targets.append(target)
                    sources.append(value.view(target.shape))
        torch._foreach_copy_(targets, sources)

    def _check(self, name: str, output: tuple, hidden: dict) -> None:
        policy = self.policies[name]
        if output[2] is not None and policy.critic is None:
            raise ValueError(f"group {name!r}: its policy has no critic, so its value slot must be None")
        if policy.recurrent and name not in hidden:
            raise ValueError(f"group {name!r} is recurrent: pass hidden[{name!r}] = (hidden_in, starts, hidden_out)")


__all__ = ["ACTING_BACKENDS", "Acting", "global_agent_ids", "resolve_acting_backend", "resolve_kernel_backend"]
