"""What a training run reads of its iterations: learner statistics, the NaN/Inf check and episode means, one
record per log interval, read one iteration late (:mod:`.readback`).

Every iteration the NaN/Inf watch updates on the device. At a log iteration (and before a checkpoint) one
record is queued: the iteration's learner statistics, the watch's state and the episode sums taken since the
last record (summed over ranks). The loop takes a record back during the next iteration, after queuing that
one's work; before a checkpoint and at the end it takes every record back (so no checkpoint holds weights
that a NaN/Inf had already reached). Episode means are logged once a quarter of the envs have finished an
episode since the last logged means (envs start in step: some intervals see few episode ends).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .readback import NonFiniteWatch, Readback


@dataclass
class Record:
    """An iteration's record as read on the host: ``iteration`` (iterations done), ``env_steps``, whether it
    is a log row, its learner statistics ``[groups][stats]`` and its episode means ({} until enough episodes)."""

    iteration: int
    env_steps: int
    log_row: bool
    losses: list
    episodes: dict


class IterationRecords:
    """The records of ``trainer``'s iterations (see the module docstring); ``min_episodes``: how many finished
    episodes make an episode mean worth logging."""

    def __init__(self, trainer, min_episodes: int):
        self.trainer, self.min_episodes = trainer, min_episodes
        self.shape = (len(trainer.trained), len(trainer.algo.stat_names))
        self.watch = NonFiniteWatch(self.shape, trainer.device)
        self.readback = Readback(trainer.device)
        self._episode_sums: list[float] | None = None

    def update(self, losses: torch.Tensor) -> None:
        """After every iteration: the NaN/Inf watch over ``losses`` (device work only)."""
        self.watch.update(losses, self.trainer.iteration_counter)

    def push(self, losses: torch.Tensor, log_row: bool) -> None:
        """Queue the record of the iteration just run (collective: the episode sums are summed over ranks)."""
        t = self.trainer
        episodes = t.placement.comm.all_reduce_(t.stats.take())
        values = torch.cat([losses.double().reshape(-1), self.watch.state(), episodes.double()])
        self.readback.push(values, (t.iteration, t.env_steps, log_row))

    def pop(self, flush: bool) -> list[Record]:
        """The records the device has finished (every record with ``flush``), oldest first; raises
        NonFiniteLossError naming the first iteration whose statistics were NaN/Inf."""
        out = []
        G, S = self.shape
        for (iteration, env_steps, log_row), values in self.readback.pop(keep=0 if flush else 1):
            values = values.tolist()  # host-ok: a record of the previous iteration, copied asynchronously
            losses = [values[g * S:(g + 1) * S] for g in range(G)]
            bad, first = values[G * S], int(values[G * S + 1])
            if bad:
                first_stats = values[G * S + 2:G * S + 2 + G * S]
                self.trainer.check_finite([first_stats[g * S:(g + 1) * S] for g in range(G)], first)
            episodes = values[G * S + NonFiniteWatch.width(self.shape):]
            out.append(Record(iteration, env_steps, log_row, losses, self._episodes(episodes, log_row)))
        return out

    def _episodes(self, sums: list[float], log_row: bool) -> dict:
        """Episode means once enough episodes have finished since the last logged means, else {}."""
        self._episode_sums = sums if self._episode_sums is None else [a + b for a, b in zip(self._episode_sums, sums)]
        if not log_row or self._episode_sums[-1] < max(self.min_episodes, 1):
            return {}
        means, self._episode_sums = self.trainer.stats.means(self._episode_sums), None
        return means


__all__ = ["IterationRecords", "Record"]
