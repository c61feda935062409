"""Distribution policies: which rank runs which fragment, and what crosses between them.

- :class:`SingleDevice`: everything on one device, nothing communicated.
- :class:`DataParallel`: env + actor + learner on every rank, each rank stepping its slice of the
  global env ids; the learner trains on its slice of every (global) minibatch and the gradients are
  summed over ranks in one flattened all-reduce per minibatch, so every rank applies the same update.
  Weights are broadcast from rank 0 at the start, and a fingerprint check every
  ``replication_check_every`` iterations proves they stayed equal.
- :class:`CentralLearner`: env + actor on every rank, the learner on rank 0 alone: trajectories are
  gathered to it, the updated weights broadcast back. Each trajectory carries the policy version it
  was collected with, and the learner refuses one more than ``max_staleness`` updates old; with a
  bound above 0 actors keep acting on the weights they have while the next broadcast is in flight.

They see buffers, never an algorithm (see :class:`~.placement.Placement`): every algorithm runs under
each of them unchanged.
"""
from __future__ import annotations

import torch

from ..envs.params import ParameterError
from ..profiling import nvtx_range
from .placement import EnvShard, LocalComm, Placement


class ReplicationError(RuntimeError):
    """Data-parallel ranks no longer hold the same parameters."""


class StalenessError(RuntimeError):
    """A trajectory reached the central learner from a policy older than the staleness bound."""


def _flatten(tensors: list[torch.Tensor]) -> torch.Tensor:
    """One float32 vector of ``tensors`` (weights are float32: parameters and running statistics)."""
    return torch.cat([t.detach().reshape(-1).float() for t in tensors])


@torch.no_grad()
def _unflatten_into(flat: torch.Tensor, tensors: list[torch.Tensor]) -> int:
    """Copy consecutive pieces of ``flat`` into ``tensors``; returns how many values were used."""
    offset = 0
    for t in tensors:
        n = t.numel()
        t.copy_(flat[offset:offset + n].view_as(t))
        offset += n
    return offset


class _MultiRank(Placement):
    """What every multi-rank policy shares: an even split of the envs, start-up broadcast, fault hooks."""

    def __init__(self, comm=None, device=None, watchdog=None, replication_check_every: int = 10,
                 max_staleness: int = 0):
        super().__init__(comm, device)
        self.watchdog = watchdog
        self.replication_check_every = replication_check_every
        self.max_staleness = max_staleness

    def env_shard(self, num_envs: int) -> EnvShard:
        world, rank = self.world_size, self.rank
        if num_envs % world:
            raise ParameterError(f"num_envs={num_envs} (global) must be a multiple of the world size {world}")
        per = num_envs // world
        return EnvShard(rank * per, (rank + 1) * per, num_envs)

    def start(self, weights: list[torch.Tensor]) -> bool:
        flat = _flatten(weights)
        self.comm.broadcast_(flat, src=0)
        _unflatten_into(flat, weights)
        return True

    def report_failure(self, message: str) -> None:
        if self.watchdog is not None:
            self.watchdog.report_failure(message)

    def close(self, clean: bool = True) -> None:
        import torch.distributed as dist

        if self.watchdog is not None:
            self.watchdog.stop(clean)
        if dist.is_initialized():
            if clean:
                dist.barrier()  # nobody tears the store down while a peer still needs it
            dist.destroy_process_group()


class SingleDevice(Placement):
    """One device (the trainer's default placement, under its policy name)."""

    name = "single"

    def __init__(self, comm=None, device=None, **_):
        super().__init__(comm, device)


class DataParallel(_MultiRank):
    name = "data_parallel"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._grads: torch.Tensor | None = None

    def learner_shard(self, num_envs: int) -> EnvShard:
        return self.env_shard(num_envs)

    @torch.no_grad()
    def reduce_gradients(self, grads: list[torch.Tensor]) -> None:
        """One all-reduce of every gradient, flattened into a buffer allocated once."""
        if self._grads is None:
            self._grads = torch.empty(sum(g.numel() for g in grads), dtype=torch.float32, device=grads[0].device)
        with nvtx_range("all_reduce"):
            torch.cat([g.reshape(-1) for g in grads], out=self._grads)
            self.comm.all_reduce_(self._grads)
            _unflatten_into(self._grads, grads)

    def after_learn(self, iteration: int, weights: list[torch.Tensor], stats: torch.Tensor) -> tuple[torch.Tensor, bool]:
        every = self.replication_check_every
        if every and (iteration + 1) % every == 0:
            self.check_replication(iteration, weights)
        return stats, False

    @torch.no_grad()
    def check_replication(self, iteration: int, weights: list[torch.Tensor]) -> None:
        """Every rank's weight fingerprint (per tensor: sum and sum of squares, float64) must be
        bit-identical to rank 0's: the same gradients and the same optimizer give the same numbers."""
        mine = torch.stack([f(t.double()) for t in weights for f in (torch.sum, lambda x: x.square().sum())])
        every = self.comm.all_gather_cat(mine.unsqueeze(0), 0)
        bad = [r for r in range(self.world_size) if not torch.equal(every[r], every[0])]
        if bad:
            gap = (every[bad] - every[0]).abs().max().item()
            raise ReplicationError(f"iteration {iteration + 1}: weights of rank(s) {bad} differ from "
                                   f"rank 0's (largest fingerprint difference {gap:.3g}); the ranks are no "
                                   f"longer training the same model")


class CentralLearner(_MultiRank):
    name = "central_learner"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.version = 0          # updates reflected in this rank's weights
        self._pending: list = []  # (work, buffer, version) of broadcasts still in flight (non-learner ranks)
        self._stats: torch.Tensor | None = None

    def learner_shard(self, num_envs: int) -> EnvShard | None:
        return EnvShard(0, num_envs, num_envs) if self.rank == 0 else None

    def learner_comm(self, num_envs: int):
        return LocalComm()  # the learner holds every trajectory

    def before_rollout(self, iteration: int, weights: list[torch.Tensor]) -> bool:
        """Act on weights at most ``max_staleness`` updates behind the learner's."""
        changed = False
        while self._pending and iteration - self.version > self.max_staleness:
            self._apply_oldest(weights)
            changed = True
        return changed

    def after_rollout(self, iteration: int, trajectories: dict[str, torch.Tensor],
                      learner_buffers: dict[str, torch.Tensor] | None) -> None:
        device = next(iter(trajectories.values())).device
        with nvtx_range("gather_trajectories"):
            versions = self.comm.gather_cat(torch.tensor([self.version], device=device), 0)
            for name, tensor in trajectories.items():
                gathered = self.comm.gather_cat(tensor, 1)
                if gathered is not None:
                    learner_buffers[name].copy_(gathered)
        if versions is not None:
            behind = iteration - versions
            late = [r for r in range(self.world_size) if behind[r] > self.max_staleness]  # host-ok: learner
            if late:
                raise StalenessError(f"iteration {iteration + 1}: trajectories of rank(s) {late} come from "
                                     f"policy versions {versions[late].tolist()}, more than max_staleness="
                                     f"{self.max_staleness} updates behind the learner's {iteration}")

    def after_learn(self, iteration: int, weights: list[torch.Tensor], stats: torch.Tensor) -> tuple[torch.Tensor, bool]:
        if self.rank == 0:
            self.comm.broadcast_(torch.cat([_flatten(weights), stats.reshape(-1).float()]), src=0)
            self.version = iteration + 1
            return stats, False
        if self._stats is None:
            self._stats = torch.zeros_like(stats)
        buffer = torch.empty(sum(t.numel() for t in weights) + stats.numel(), dtype=torch.float32,
                             device=stats.device)
        asynchronous = self.max_staleness > 0
        work = self.comm.broadcast_(buffer, src=0, async_op=asynchronous)
        self._pending.append((work, buffer, iteration + 1))
        if asynchronous:
            return self._stats, False
        self._apply_oldest(weights)
        return self._stats, True

    def settle(self, weights: list[torch.Tensor]) -> bool:
        changed = bool(self._pending)
        while self._pending:
            self._apply_oldest(weights)
        return changed

    def _apply_oldest(self, weights: list[torch.Tensor]) -> None:
        work, buffer, version = self._pending.pop(0)
        if work is not None:
            work.wait()
        used = _unflatten_into(buffer, weights)
        self._stats.copy_(buffer[used:].view_as(self._stats))
        self.version = version


POLICIES = {cls.name: cls for cls in (SingleDevice, DataParallel, CentralLearner)}
