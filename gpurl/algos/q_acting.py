"""Epsilon-greedy acting of the value-based algorithms, by a backend generated from :meth:`QNetwork.act`.

Backends (``policy_backend``, as for the PPO family's :mod:`~.acting`):
- ``eager``: ``QNetwork.act`` as written (the reference);
- ``compiled``: the same function through ``torch.compile``;
- ``triton``: the fused kernel :mod:`gpurl.fusion.q_actor`, one launch per group and step, held to the
  reference in Triton's interpreter; on CUDA (or under ``TRITON_INTERPRET=1``);
- ``auto``: ``triton`` on CUDA, else ``compiled`` (on the CPU the tanh polynomial, the counter RNG and the
  argmax fuse into one loop around the GEMMs; bench/kernels.py times both, docs/benchmarks.md has the figures).
"""
from __future__ import annotations

import torch
from torch import nn

from ..fusion.q_actor import pack_q_network, q_actor_step_triton
from .acting import as_input, global_agent_ids, resolve_kernel_backend
from .base import EnvSpec
from .compiling import compile_step
from .q_nets import QNetwork, linear_epsilon


def _act(nets: list[QNetwork], inputs: list, ids: list[torch.Tensor], step: torch.Tensor,
         seed: torch.Tensor, epsilon) -> list[torch.Tensor]:
    """Every group's epsilon-greedy actions [B, 1] in one call (one compiled graph per step). ``inputs`` per
    group: float32 [E, n, in_dim] or a frame stack of the rollout storage (made into rows inside the call);
    ``epsilon``: float32 [1], or the schedule ``(start, end, decay_steps)`` evaluated at ``step`` inside."""
    if isinstance(epsilon, tuple):
        epsilon = linear_epsilon(step, *epsilon)
    rows = [as_input(x) for x in inputs]
    return [net.act(x.reshape(x.shape[0] * x.shape[1], -1), i, step, seed, epsilon)[0]
            for net, x, i in zip(nets, rows, ids)]


_act_compiled = compile_step(_act, rng=True)


class QActor:
    """Every trained group's epsilon-greedy actions at step t (untrained groups are the trainer's).

    Epsilon anneals linearly from ``eps_start`` to ``eps_end`` over the first ``decay_steps`` global steps;
    an evaluation (its own seed) acts greedily.
    """

    inputs = ("obs[H + t]", "starts")
    outputs = ("actions[t]",)

    def __init__(self, groups, nets: nn.ModuleDict, spec: EnvSpec, seed: torch.Tensor, eps_start: float,
                 eps_end: float, decay_steps: int, backend: str, activation: str):
        self.groups, self.nets, self.spec, self.seed = groups, nets, spec, seed
        self.eps_start, self.eps_end, self.decay_steps = eps_start, eps_end, decay_steps
        self.backend = resolve_kernel_backend(backend, spec.device)
        self.packed = {name: pack_q_network(net.net, net.num_actions, activation) for name, net in nets.items()
                       } if self.backend == "triton" else {}
        self._act = _act_compiled if self.backend == "compiled" else _act
        # Greedy acting's epsilon, on the device: the kernel reads epsilon through a pointer.
        self.greedy = torch.zeros(1, device=spec.device)

    def epsilon(self, step: torch.Tensor) -> torch.Tensor:
        """float32 [1]: epsilon at global step ``step`` (int64 [1])."""
        return linear_epsilon(step, self.eps_start, self.eps_end, self.decay_steps)

    def sync(self) -> None:
        """The Q-networks' weights changed: refresh the fused kernel's packed copies."""
        for packed in self.packed.values():
            packed.sync()

    @torch.no_grad()
    def run(self, s, t: int, step: torch.Tensor, seed: torch.Tensor | None = None, deterministic: bool = False) -> None:
        # An evaluation (its own seed) or deterministic acting is greedy: the policy Q-learning learns.
        greedy = seed is not None or deterministic
        seed = self.seed if seed is None else seed
        names = list(self.nets)
        inputs = [s.frame_views(t, t + 1, self.groups[name].agents, self.groups[name].obs_dim)
                  for name in names]  # frames [1, E, n, obs_dim] each
        outputs = [s.actions[t, :, self.groups[name].agents] for name in names]  # [E, n, 1] views
        if self.packed:
            epsilon = self.greedy if greedy else self.epsilon(step)
            for name, x, out in zip(names, inputs, outputs):
                q_actor_step_triton(as_input(x), self.packed[name], step, seed, epsilon, self.spec.env_offset,
                                    self.spec.num_agents, self.groups[name].agents.start, out)
            return
        E = s.actions.shape[1]
        ids = [global_agent_ids(E, out.shape[1], self.spec.env_offset, self.spec.num_agents,
                                self.groups[name].agents.start, out.device) for name, out in zip(names, outputs)]
        schedule = self.greedy if greedy else (self.eps_start, self.eps_end, self.decay_steps)
        actions = self._act([self.nets[name] for name in names], inputs, ids, step, seed, schedule)
        torch._foreach_copy_(outputs, [action.view(out.shape) for out, action in zip(outputs, actions)])


__all__ = ["QActor"]
