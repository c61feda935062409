"""Device-side bookkeeping of a run: episode statistics and phase timers (each phase an NVTX range).

Nothing here reads device memory during a rollout: ``EpisodeStats.take`` hands its sums to a read one
iteration later (:mod:`.readback`), and ``PhaseTimer.read`` resolves only the events that have completed.
"""
from __future__ import annotations

import contextlib
import time
from collections import defaultdict

import torch

from ..algos.compiling import compile_step
from ..fusion.bookkeeping import bookkeeping_kernel, bookkeeping_ref, bookkeeping_triton
from ..profiling import nvtx_range


#: How a rollout's bookkeeping runs: "auto" (the fused kernel on CUDA, the compiled reference on the CPU) or
#: "eager" (the reference as written; no compile at start).
BOOKKEEPING_BACKENDS = ("auto", "eager")

_bookkeeping_compiled = compile_step(bookkeeping_ref)


class EpisodeStats:
    """Sums per finished episode: return per group (mean over the group's agents), length, and the env's
    ``step_metrics`` (e.g. Tag's tags), accumulated per env on the device (:mod:`gpurl.fusion.bookkeeping`)
    and reduced over envs only when read."""

    def __init__(self, num_envs: int, groups: dict[str, slice], metric_names: list[str], device: torch.device,
                 backend: str = "auto"):
        if backend not in BOOKKEEPING_BACKENDS:
            raise ValueError(f"bookkeeping backend must be one of {BOOKKEEPING_BACKENDS}, got {backend!r}")
        self.groups = groups
        self.metric_names = list(metric_names)
        if self.metric_names != sorted(self.metric_names):
            raise ValueError(f"metric names must be in sorted order (the env's metric rows are), got {metric_names}")
        G, M, E = len(groups), len(metric_names), num_envs
        N = max((a.stop for a in groups.values()), default=0)
        f32 = dict(dtype=torch.float32, device=device)
        self._running = torch.zeros(E, G + 1 + M, **f32)  # per env: group returns, length, metrics
        self._done_sum = torch.zeros(E, G + 1 + M, **f32)
        self._done_count = torch.zeros(E, **f32)
        #: float32 [N, G]: column g averages group g's agents
        self._averaging = torch.zeros(N, G, **f32)
        for g, agents in enumerate(groups.values()):
            self._averaging[agents, g] = 1.0 / (agents.stop - agents.start)
        self._scratch = (torch.zeros(E, dtype=torch.bool, device=device),
                         torch.zeros(1, dtype=torch.int64, device=device))
        fused = device.type == "cuda" and backend == "auto" and bookkeeping_kernel is not None
        self._step = bookkeeping_triton if fused else (_bookkeeping_compiled if backend == "auto" else bookkeeping_ref)

    def columns(self) -> list[str]:
        """What each accumulator column sums, as ``read`` names its mean."""
        return ([f"return/{name}" for name in self.groups] + ["episode_length"]
                + [f"{name}_per_episode" for name in self.metric_names])

    def step(self, reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor,
             metric_rows: torch.Tensor, starts: torch.Tensor, step_counter: torch.Tensor) -> None:
        """A rollout step's bookkeeping in one pass: reward float32 [E, N], flags bool [E], the env's metric
        rows float32 [M, E] (``env.step_metric_rows()``); writes ``starts`` bool [E] (the next observation
        starts an episode) and adds 1 to ``step_counter`` int64 [1]."""
        self._step(reward, terminated, truncated, metric_rows, self._averaging, self._running, self._done_sum,
                   self._done_count, starts, step_counter)

    def update(self, reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor,
               metrics: dict[str, torch.Tensor], totals: torch.Tensor | None = None) -> None:
        """One step of an evaluation: reward float32 [E, N], flags bool [E], metrics float32 [E] each.
        ``totals`` float32 [E, len(columns())]: receives every env's episode totals up to this step (those of
        the envs whose episode ended here are that episode's: an evaluation reads them one by one)."""
        rows = (torch.stack([metrics[name] for name in self.metric_names]) if self.metric_names
                else reward.new_zeros(0, reward.shape[0]))
        bookkeeping_ref(reward, terminated, truncated, rows, self._averaging, self._running, self._done_sum,
                        self._done_count, *self._scratch, totals=totals)

    def take(self) -> torch.Tensor:
        """float32 [len(columns()) + 1]: the sums over the episodes finished since the last take (and their
        count, last), zeroing them: device work only, for a read one iteration later."""
        totals = torch.cat([self._done_sum.sum(0), self._done_count.sum().view(1)])
        self._done_sum.zero_()
        self._done_count.zero_()
        return totals

    def means(self, totals: list[float]) -> dict[str, float]:
        """``take()``'s sums (read on the host) as means per episode, with ``episodes``; {} without one."""
        count = totals[-1]
        if count < 1:
            return {}
        out = {name: total / count for name, total in zip(self.columns(), totals[:-1])}
        out["episodes"] = count
        return out

    def read(self, min_episodes: int = 1, comm=None) -> dict[str, float]:
        """Means over episodes finished since the last read (one host read), summed over ranks by
        ``comm`` (collective then: every rank calls it and gets the same answer). With fewer than
        ``min_episodes`` finished, returns {} and keeps accumulating (a mean of two episodes is noise)."""
        totals = torch.cat([self._done_sum.sum(0), self._done_count.sum().view(1)])
        if comm is not None:
            totals = comm.all_reduce_(totals)
        totals = totals.tolist()  # host-ok: an evaluation's read, or a caller's own
        if totals[-1] < max(min_episodes, 1):
            return {}
        self._done_sum.zero_()
        self._done_count.zero_()
        return self.means(totals)

    def state_dict(self) -> dict:
        """``running`` [E, C] per env; ``done_sum`` [C] and ``done_count`` [] summed over envs."""
        return {"running": self._running, "done_sum": self._done_sum.sum(0), "done_count": self._done_count.sum()}

    def load_state_dict(self, state: dict) -> None:
        self._running.copy_(state["running"])
        self._done_sum.zero_()
        self._done_count.zero_()
        self._done_sum[0].copy_(state["done_sum"])
        self._done_count[0].copy_(state["done_count"])


class PhaseTimer:
    """Seconds per phase (act, env, learn, ...). On CUDA, events recorded on the stream are resolved at
    ``read`` once they have completed (never waited for: a phase still running counts at a later read); on
    the CPU, wall time."""

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
        """Seconds per phase of the phases completed since the last read."""
        if self.cuda:
            for name, pairs in self._events.items():
                done = [(a, b) for a, b in pairs if b.query()]
                self._seconds[name] += sum(a.elapsed_time(b) for a, b in done) / 1000.0
                pairs[:] = [(a, b) for a, b in pairs if (a, b) not in done]
        out = dict(self._seconds)
        self._seconds.clear()
        return out


class UntimedPhases:
    """A phase timer that marks phases with NVTX ranges and times nothing (code captured in a CUDA graph:
    its events could not be timed)."""

    def phase(self, name: str):
        return nvtx_range(name)
