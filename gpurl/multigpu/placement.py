"""What a distribution policy is, as the trainer sees it, and its one-device case.

A distribution policy is placement plus communication over named device buffers:
- placement: which global envs a rank steps (:meth:`Placement.env_shard`) and whose samples its learner
  trains on (:meth:`Placement.learner_shard`; None: no learner on this rank);
- communication: at fixed points of every iteration the trainer hands it buffers (the weights the
  actors read, the trajectories of the rollout, the gradients, the learner's statistics) and it moves
  them between ranks.

It never sees an algorithm, a loss or a model: only lists and dicts of tensors. This base class is the
one-device policy: every hook is the identity, so one device pays nothing for the multi-rank machinery.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class EnvShard:
    """Envs ``[lo, hi)`` of ``total``: the slice of the global env ids that a rank steps (or learns on)."""

    lo: int
    hi: int
    total: int

    @property
    def size(self) -> int:
        return self.hi - self.lo

    @property
    def whole(self) -> bool:
        return self.lo == 0 and self.hi == self.total

    def localize(self, idx: torch.Tensor, per_env: int) -> torch.Tensor:
        """Global sample indices of a batch flattened over [T, total, per_env] -> the indices of those
        in this shard, in this shard's flattening over [T, size, per_env] (order kept)."""
        if self.whole:
            return idx
        per_step = self.total * per_env
        t, rest = idx // per_step, idx % per_step
        env, within = rest // per_env, rest % per_env
        mine = (env >= self.lo) & (env < self.hi)  # host-ok: in the learner, not the rollout
        return ((t * self.size + env - self.lo) * per_env + within)[mine]


class LocalComm:
    """World size 1: reductions and broadcasts are no-ops, a gather returns the input."""

    rank = 0
    world_size = 1

    def __init__(self):
        self.bytes_sent = 0

    def all_reduce_(self, tensor: torch.Tensor, op: str = "sum") -> torch.Tensor:
        return tensor

    def broadcast_(self, tensor: torch.Tensor, src: int = 0, async_op: bool = False):
        return None

    def gather_cat(self, tensor: torch.Tensor, dim: int, dst: int = 0) -> torch.Tensor | None:
        return tensor

    def all_gather_cat(self, tensor: torch.Tensor, dim: int) -> torch.Tensor:
        return tensor

    def barrier(self) -> None:
        return None


class Placement:
    """One device: all envs here, the learner here, nothing communicated.

    Hooks take ``weights``: every tensor the actors read and the learner changes (parameters, then
    normalisation buffers), in the same order on every rank. A hook that replaces weights in place
    returns True, so that the trainer lets the algorithm refresh what it derives from them.
    """

    name = "single"

    def __init__(self, comm=None, device: torch.device | None = None):
        self.comm = comm if comm is not None else LocalComm()
        self.device = device

    @property
    def rank(self) -> int:
        return self.comm.rank

    @property
    def world_size(self) -> int:
        return self.comm.world_size

    @property
    def is_main(self) -> bool:
        """This rank logs, prints and writes files."""
        return self.comm.rank == 0

    # ---- placement -------------------------------------------------------------------------------

    def env_shard(self, num_envs: int) -> EnvShard:
        """The global envs this rank steps."""
        return EnvShard(0, num_envs, num_envs)

    def learner_shard(self, num_envs: int) -> EnvShard | None:
        """The envs whose samples this rank's learner trains on; None: no learner on this rank."""
        return EnvShard(0, num_envs, num_envs)

    def learner_comm(self, num_envs: int):
        """What the learner's own reductions (minibatch moments, statistics) sum over: the ranks that
        share the learning, or a :class:`LocalComm` when one learner sees the whole rollout."""
        shard = self.learner_shard(num_envs)
        return LocalComm() if shard is None or shard.whole else self.comm

    # ---- communication (called by the trainer at fixed points of every iteration) ----------------

    def start(self, weights: list[torch.Tensor]) -> bool:
        """After construction and after loading a checkpoint: make every rank's weights equal."""
        return False

    def before_rollout(self, iteration: int, weights: list[torch.Tensor]) -> bool:
        """Before the rollout of ``iteration``: weights the actors may use must have arrived."""
        return False

    def after_rollout(self, iteration: int, trajectories: dict[str, torch.Tensor],
                      learner_buffers: dict[str, torch.Tensor] | None) -> None:
        """After the rollout: ``trajectories`` (this rank's buffers, envs on dim 1) move into the
        learner's ``learner_buffers`` (same names, every rank's envs), where they differ."""

    def reduce_gradients(self, grads: list[torch.Tensor]) -> None:
        """After each minibatch's backward pass, before clipping and the optimizer step."""

    def after_learn(self, iteration: int, weights: list[torch.Tensor], stats: torch.Tensor) -> tuple[torch.Tensor, bool]:
        """After the update: weights move to the actors. Returns the learner's statistics as every rank
        reports them (``stats`` has the same shape on every rank, a placeholder where no learner ran)
        and whether ``weights`` changed here."""
        return stats, False

    def settle(self, weights: list[torch.Tensor]) -> bool:
        """Before a checkpoint or the end of training: nothing may still be in flight."""
        return False

    def report_failure(self, message: str) -> None:
        """This rank is failing with ``message``: tell the peers (so their errors can say why)."""

    def close(self, clean: bool = True) -> None:
        """End of the run (``clean``: it finished; else it is failing)."""


__all__ = ["EnvShard", "LocalComm", "Placement"]
