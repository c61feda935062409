"""Where the trainer's fragments run, as the trainer sees it: the single-device case.

The trainer is written once against :class:`Placement`; a distribution policy (``gpurl.multigpu``)
subclasses it to shard envs over ranks and to supply the communication between the env, actor and
learner fragments. This base class is the one-device placement: every hook is the identity, so the
trainer on one device pays nothing for the multi-device machinery.
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

    def localize(self, idx: torch.Tensor, agents: int) -> torch.Tensor:
        """Global sample indices of a rollout flattened over [T, total, agents] -> the indices of those
        in this shard, in this shard's flattening over [T, size, agents] (order kept)."""
        if self.whole:
            return idx
        per_step = self.total * agents
        t, rest = idx // per_step, idx % per_step
        env, agent = rest // agents, rest % agents
        mine = (env >= self.lo) & (env < self.hi)  # host-ok: in the learner, not the rollout
        return ((t * self.size + env - self.lo) * agents + agent)[mine]


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
    """One device: all envs here, the learner here, nothing communicated."""

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

    # ---- communication hooks (called by the trainer at fixed points of every iteration) -----------

    def start(self, trainer) -> None:
        """After construction (and after loading a checkpoint): make every rank's weights equal."""

    def before_rollout(self, trainer) -> None:
        """Before the rollout: weights the actors may use must have arrived."""

    def after_rollout(self, trainer) -> None:
        """After the rollout: trajectories move to where the learner is."""

    def reduce_gradients(self, params: list[torch.nn.Parameter]) -> None:
        """After each minibatch's backward pass, before clipping and the optimizer step."""

    def after_learn(self, trainer, losses: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """After the update: weights move to the actors; returns the loss statistics every rank reports."""
        return losses

    def settle(self, trainer) -> None:
        """Before a checkpoint or the end of training: nothing may still be in flight."""

    def report_failure(self, message: str) -> None:
        """This rank is failing with ``message``: tell the peers (so their errors can say why)."""

    def close(self, clean: bool = True) -> None:
        """End of the run (``clean``: it finished; else it is failing)."""
