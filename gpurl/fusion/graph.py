"""CUDA-graph capture of a whole rollout: one ``graph.replay()`` per iteration instead of T x (groups
+ env + bookkeeping) launches.

What a captured rollout depends on, and so what invalidates it (rebuild the trainer, or set
``cuda_graph=False``):
- the addresses of every buffer it touches: the rollout storage, the env's state and output buffers,
  the packed policy weights, the step counter. All are allocated once and rewritten in place;
  ``PackedPolicy.sync()`` copies new weights into the same buffers, so **a parameter update does not
  invalidate the graph**;
- scalar kernel arguments, frozen at capture: num_envs, rollout length, the env's constants (its seed
  included: ``env.reset(seed=...)`` after capture is not seen by the graph), the policy seed. The
  step, which changes every replay, is read from a device tensor for that reason;
- the code path: groups acting randomly (torch generators) or Box heads are not captured (the
  trainer runs those rollouts eagerly).
"""
from __future__ import annotations

from typing import Callable

import torch


class GraphedRollout:
    """Run ``fn`` eagerly for ``warmup`` calls (compiles kernels, settles allocations), then capture it
    once and replay the graph on every later call."""

    def __init__(self, fn: Callable[[], None], warmup: int = 1):
        self.fn = fn
        self.warmup = warmup
        self.calls = 0
        self.graph: torch.cuda.CUDAGraph | None = None

    def __call__(self) -> None:
        self.calls += 1
        if self.calls <= self.warmup:
            self.fn()
            return
        if self.graph is None:
            torch.cuda.synchronize()  # host-ok: once, before capture
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self.fn()
            self.graph = graph
        self.graph.replay()
