"""Device-side bookkeeping of a run: episode statistics and phase timers (each phase an NVTX range).

Nothing here reads device memory during a rollout; ``EpisodeStats.read`` and ``PhaseTimer.read`` are
called once per log interval.
"""
from __future__ import annotations

import contextlib
import time
from collections import defaultdict

import torch

from ..profiling import nvtx_range


class EpisodeStats:
    """Sums per finished episode: return per group (mean over the group's agents), length, and the env's
    ``step_metrics`` (e.g. Tag's tags). All accumulators are device tensors."""

    def __init__(self, num_envs: int, groups: dict[str, slice], metric_names: list[str], device: torch.device):
        self.groups = groups
        self.metric_names = metric_names
        G, M, E = len(groups), len(metric_names), num_envs
        f32 = dict(dtype=torch.float32, device=device)
        self._running = torch.zeros(E, G + 1 + M, **f32)  # per env: group returns, length, metrics
        self._done_sum = torch.zeros(G + 1 + M, **f32)
        self._done_count = torch.zeros((), **f32)
        self._step_row = torch.zeros(E, G + 1 + M, **f32)
        self._step_row[:, G] = 1.0  # length column

    def columns(self) -> list[str]:
        """What each accumulator column sums, as ``read`` names its mean."""
        return ([f"return/{name}" for name in self.groups] + ["episode_length"]
                + [f"{name}_per_episode" for name in self.metric_names])

    def update(self, reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor,
               metrics: dict[str, torch.Tensor], totals: torch.Tensor | None = None) -> None:
        """One step: reward float32 [E, N], flags bool [E], metrics float32 [E] each. ``totals`` float32
        [E, len(columns())]: receives every env's episode totals up to this step (those of the envs whose
        episode ended here are that episode's: an evaluation reads them one by one)."""
        G = len(self.groups)
        for g, agents in enumerate(self.groups.values()):
            torch.mean(reward[:, agents], dim=1, out=self._step_row[:, g])
        for m, name in enumerate(self.metric_names):
            self._step_row[:, G + 1 + m] = metrics[name]
        self._running += self._step_row
        if totals is not None:
            totals.copy_(self._running)
        ended = (terminated | truncated).to(torch.float32)
        self._done_sum += ended @ self._running
        self._done_count += ended.sum()
        self._running *= (1.0 - ended).unsqueeze(1)

    def read(self, min_episodes: int = 1, comm=None) -> dict[str, float]:
        """Means over episodes finished since the last read (one host read), summed over ranks by
        ``comm`` (collective then: every rank calls it and gets the same answer). With fewer than
        ``min_episodes`` finished, returns {} and keeps accumulating (a mean of two episodes is noise)."""
        totals = torch.cat([self._done_sum, self._done_count.view(1)])
        if comm is not None:
            totals = comm.all_reduce_(totals.clone())
        totals = totals.tolist()  # host-ok: once per log interval
        count = totals[-1]
        if count < max(min_episodes, 1):
            return {}
        sums = totals[:-1]
        self._done_sum.zero_()
        self._done_count.zero_()
        out = {name: total / count for name, total in zip(self.columns(), sums)}
        out["episodes"] = count
        return out

    def state_dict(self) -> dict:
        return {"running": self._running, "done_sum": self._done_sum, "done_count": self._done_count}

    def load_state_dict(self, state: dict) -> None:
        self._running.copy_(state["running"])
        self._done_sum.copy_(state["done_sum"])
        self._done_count.copy_(state["done_count"])


class PhaseTimer:
    """Seconds per phase (act, env, learn, ...). On CUDA, events recorded on the stream are resolved at
    ``read`` (one sync per log interval); on the CPU, wall time."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self._seconds: dict[str, float] = defaultdict(float)
        self._events: dict[str, list] = defaultdict(list)

    @contextlib.contextmanager
    def phase(self, name: str):
        with nvtx_range(name):
            if self.cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                yield
                end.record()
                self._events[name].append((start, end))
            else:
                t0 = time.perf_counter()
                yield
                self._seconds[name] += time.perf_counter() - t0

    def read(self) -> dict[str, float]:
        """Seconds per phase since the last read."""
        if self.cuda:
            torch.cuda.synchronize()
            for name, pairs in self._events.items():
                self._seconds[name] += sum(a.elapsed_time(b) for a, b in pairs) / 1000.0
            self._events.clear()
        out = dict(self._seconds)
        self._seconds.clear()
        return out
