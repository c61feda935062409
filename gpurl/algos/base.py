"""The algorithm interface: what an algorithm declares, and all the trainer and the distribution
policies know of it.

An algorithm is a plug-in (MSRL's fragments, with torch buffers as the interface):
- :meth:`Algorithm.fields`: the per-step buffers its actor writes into the rollout storage beside the
  env's own (log-prob, value, hidden state, Q-values, ...), as :class:`Field` declarations;
- :attr:`Algorithm.actor`: its acting step, a fragment that reads the policy input at slot t and writes
  the actions and its fields at slot t (:class:`ActorFragment`);
- :attr:`Algorithm.learner`: its learning step, a fragment over a rollout storage (or, for off-policy
  algorithms, over a replay buffer it fills from that storage), given a :class:`LearnContext`
  (:class:`LearnerFragment`);
- :meth:`Algorithm.weights`, :meth:`Algorithm.sync_actors`: the tensors actors read and the learner
  changes (what a distribution policy broadcasts, all-reduces or checks), and the hook that refreshes
  whatever the acting step derives from them (packed copies for a fused kernel);
- :meth:`Algorithm.state_dict` / :meth:`Algorithm.load_state_dict`: its checkpoint state.

No algorithm knows the world size: the learner sums what must be summed over ranks through
``ctx.comm`` and ``ctx.reduce_gradients``, which are no-ops on one device. docs/design.md sketches how
a centralized critic, a recurrent policy and an off-policy learner fit this interface.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, ClassVar, Protocol

import torch
from torch import nn

from ..envs.spaces import Group
from ..multigpu.minibatches import LearnerBatches
from ..storage.fields import Field
from ..storage.replay import ReplayBuffer
from ..storage.rollout import RolloutStorage
from .params import AlgoParams


@dataclass(frozen=True)
class EnvSpec:
    """What an algorithm sees of the env, and of this rank's envs in the global numbering.

    ``env_offset`` is the global id of this rank's first env: acting keys its random draws by global
    agent ids, so actions do not depend on how envs are split over ranks.
    """

    groups: dict[str, Group]
    num_agents: int
    obs_dim: int
    num_envs: int
    env_offset: int
    device: torch.device
    #: S of the env's global state [E, S] (``env.global_state``, docs/specs/global_state.md)
    state_dim: int = 0

    @classmethod
    def of(cls, env, env_offset: int = 0) -> "EnvSpec":
        """The spec of a gpurl env whose first env has global id ``env_offset``."""
        return cls(groups=dict(env.groups), num_agents=env.num_agents, obs_dim=env.obs_dim, num_envs=env.num_envs,
                   env_offset=env_offset, device=env.device, state_dim=env.global_state_dim)


@dataclass
class LearnContext:
    """What a learner fragment gets from the trainer and the distribution policy.

    - ``batches``: the one door to the samples: minibatch layouts of a rollout and replay draws over the global
      envs, with this learner's share of each (a learner never sees ranks or shards);
    - ``comm``: sums over the ranks that share the learning (``all_reduce_``); a no-op with one learner;
    - ``reduce_gradients``: called with the gradient buffers after every backward pass;
    - ``generator``: draws the global minibatches (in the same state on every learner rank);
    - ``timer``: ``timer.phase(name)`` times and NVTX-marks a phase;
    - ``replay``, ``step``, ``iteration``: see below.
    """

    batches: LearnerBatches
    comm: object
    reduce_gradients: Callable[[list[torch.Tensor]], None]
    generator: torch.Generator
    timer: object
    #: an off-policy algorithm's replay buffer (``uses_replay``), filled by the trainer with each rollout's
    #: transitions before the learner runs; None otherwise
    replay: ReplayBuffer | None = None
    #: int64 [1]: the global step counter of acting (schedules such as epsilon read it)
    step: torch.Tensor | None = None
    #: int64 [1]: the iterations done before this update (the learning-rate schedule and the minibatch
    #: shuffles read it on the device)
    iteration: torch.Tensor | None = None


class ActorFragment(Protocol):
    """Acting at step t: reads ``inputs`` of the storage, writes ``outputs`` (names of its buffers)."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def run(self, storage: RolloutStorage, t: int, step: torch.Tensor, seed: torch.Tensor | None = None,
            deterministic: bool = False) -> None:
        """``step``: int64 [1] on the device, the counter RNG's global step; ``seed``: int64 [2] to act
        with another seed (evaluation), None for the run's; ``deterministic``: each agent's most likely
        action instead of a sample (evaluation)."""


class LearnerFragment(Protocol):
    """One update from a whole rollout storage; returns statistics float32 [groups, len(stat_names)]
    (device tensors, this rank's view of the means over every rank). A learner may also define
    ``prepare(storage, ctx)``: the trainer calls it once before the first iteration, to allocate (and check
    the memory of) what its updates need."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def run(self, storage: RolloutStorage, ctx: LearnContext) -> torch.Tensor: ...


class Algorithm(ABC):
    """Base of every algorithm plug-in (see the module docstring).

    ``config`` is the run's :class:`~gpurl.train.config.TrainConfig`: its ``algo_params`` are this algorithm's
    parameters (an instance of ``params_type``, validated), and an algorithm may read the run's sizes and
    length (``num_envs``, ``rollout_len``, ``iters``) from it; ``trained`` the groups it trains (others act
    uniformly at random, done by the trainer); ``seed`` keys the counter RNG; ``generator`` draws the initial
    weights (the same on every rank).
    """

    #: the ``--algo`` name
    name: ClassVar[str]
    #: one statistic per column of what the learner returns (NaN/Inf in any stops the run)
    stat_names: ClassVar[tuple[str, ...]]
    #: its parameters' dataclass (:class:`~.params.AlgoParams` or a subclass): the trainer's flags for this
    #: algorithm, their defaults, ranges and checks
    params_type: ClassVar[type[AlgoParams]] = AlgoParams
    #: the rollout storage keeps the env's global state (``global_state``, ``final_global_state``)
    reads_global_state: ClassVar[bool] = False
    #: off-policy: the trainer keeps a replay buffer of ``params.replay_capacity`` steps on every learner rank
    #: (its contents in checkpoints when ``params.replay_in_checkpoint``: :class:`~.q_params.QParams` has both),
    #: fills it with each rollout's transitions and hands it to the learner as ``ctx.replay``
    uses_replay: ClassVar[bool] = False
    #: the learner fragment is device work alone, with every changing value read from device tensors (no host
    #: number that moves between iterations): on one CUDA device the trainer captures the whole iteration as
    #: one CUDA graph
    graph_safe_update: ClassVar[bool] = False

    #: the run's ``config.algo_params``
    params: AlgoParams
    actor: ActorFragment
    learner: LearnerFragment
    #: the trained networks, one entry per trained group
    nets: nn.ModuleDict
    optimizer: torch.optim.Optimizer

    @abstractmethod
    def fields(self) -> dict[str, Field]:
        """The per-step buffers the actor writes besides ``actions``."""

    def weights(self) -> list[torch.Tensor]:
        """Everything the actors read and the learner changes: parameters, then buffers
        (normalisation statistics), in an order every rank shares."""
        return [*self.nets.parameters(), *self.nets.buffers()]

    def sync_actors(self) -> None:
        """The weights changed (an update, a broadcast, a loaded checkpoint): refresh what acting
        derives from them."""

    def backends(self) -> dict[str, str]:
        """{"acting": ..., "learning": ...}: which implementation runs each, in words."""
        return {}

    def state_dict(self) -> dict:
        """The algorithm's checkpoint state (tensors may stay on the device; the trainer moves them)."""
        return {"nets": self.nets.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.nets.load_state_dict(state["nets"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.sync_actors()


__all__ = ["ActorFragment", "Algorithm", "EnvSpec", "Field", "LearnContext", "LearnerFragment"]
