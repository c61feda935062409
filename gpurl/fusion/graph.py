"""CUDA-graph capture of a training iteration: one ``graph.replay()`` instead of thousands of launches.

:class:`GraphedCall` runs a function eagerly while it warms up (compiles kernels, settles allocations),
then captures it once and replays the graph on every later call, returning the tensor the captured call
returned (a static buffer the replay rewrites). The trainer captures the whole iteration (rollout,
advantages, every epoch and minibatch of the update, the optimizer) on one device, or the rollout alone
where the update is not capturable (a replay buffer whose write position is a host number; several ranks).

What a captured call depends on, and so what invalidates it (rebuild the trainer, or set
``cuda_graph=False``):
- the addresses of every buffer it touches: the rollout storage, the env's state and output buffers, the
  packed policy weights, the flat parameter and the optimizer state, the learner's sample buffers, the step
  and iteration counters. All are allocated once and rewritten in place; ``PackedPolicy.sync()`` copies new
  weights into the same buffers and loading a checkpoint copies into the same tensors, so **neither an
  update nor a loaded checkpoint invalidates the graph**;
- scalar kernel arguments, frozen at capture: num_envs, rollout length, the env's constants (its seed
  included: ``env.reset(seed=...)`` after capture is not seen by the graph), the policy seed and every
  config value. What changes from iteration to iteration (the acting step, the iteration, the learning
  rate, the minibatch shuffles' draw numbers) is read from device tensors for that reason;
- the code path: groups acting randomly (torch generators) are not captured (the trainer runs those
  iterations eagerly).
"""
from __future__ import annotations

from typing import Callable

import torch


class GraphCaptureFailed(RuntimeError):
    """Capturing a call into a CUDA graph failed; the message says what was being captured and why."""


class GraphedCall:
    """Run ``fn`` eagerly for ``warmup`` calls, then capture it once and replay the graph on every later call.

    Returns what ``fn`` returns (from a capture: the tensors the captured call produced, rewritten in place
    by every replay). A capture that raises is reported as :class:`GraphCaptureFailed`, with nothing run:
    the caller may run ``fn`` eagerly instead.
    """

    def __init__(self, fn: Callable, warmup: int = 1, name: str = "call"):
        self.fn, self.warmup, self.name = fn, warmup, name
        self.calls = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self.output = None

    def __call__(self):
        self.calls += 1
        if self.calls <= self.warmup:
            return self.fn()
        if self.graph is None:
            torch.cuda.synchronize()  # host-ok: once, before capture
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph):
                    self.output = self.fn()
            except Exception as err:  # noqa: BLE001 - reported with what was captured
                raise GraphCaptureFailed(f"capturing the {self.name} as a CUDA graph failed: "
                                         f"{type(err).__name__}: {err}") from err
            self.graph = graph
        self.graph.replay()
        return self.output


class GraphedRollout(GraphedCall):
    """A rollout captured on its own (the trainer's fallback when the whole iteration cannot be)."""

    def __init__(self, fn: Callable[[], None], warmup: int = 1):
        super().__init__(fn, warmup, name="rollout")


__all__ = ["GraphCaptureFailed", "GraphedCall", "GraphedRollout"]
