"""IQL, VDN and QMIX: the value-based algorithm plug-ins (see :mod:`gpurl.algos.base`).

One :class:`~.q_nets.QNetwork` per trained group, shared by the group's agents, with a target copy; QMIX adds
a :class:`~.q_loss.QMixer` per group (and its target) on the env's global state.
- Actor fragment: :class:`~.q_acting.QActor` writes every trained group's epsilon-greedy actions at slot t
  (:meth:`QNetwork.act`, or the fused kernel generated from it, by ``policy_backend``; epsilon annealed
  linearly over the first ``eps_decay_frac`` of the run's steps; greedy when evaluating).
- Learner fragment: :class:`QLearner` learns from the replay buffer the trainer fills with each rollout's
  transitions (``ctx.replay``, :mod:`gpurl.storage.replay`): ``q_updates`` updates of ``q_batch`` transitions
  drawn with ``ctx.generator`` (in the same state on every learner rank) over the slots and all envs of the
  run; a data-parallel rank weights the rows of its own envs, so the ranks' summed gradients are the one
  device's (the same draw from the same transitions). Every group's loss summed
  (:func:`~.q_loss.q_loss`), gradients summed over ranks by the distribution policy, each group's gradient
  norm clipped, one Adam step; then the targets move towards the online networks (``target_tau``, every
  ``target_period`` updates; tau 1 is a hard copy).

VDN and QMIX learn a group's team value from its team reward, the sum of its agents' rewards (JaxMARL's and
EPyMARL's convention; :mod:`.q_loss`).
"""
from __future__ import annotations

import copy
from typing import NamedTuple

import torch
from torch import nn

from ..fusion.counter_rng import seed_tensor
from ..storage.replay import gather_rows, group_inputs
from ..storage.rollout import RolloutStorage
from .base import Algorithm, EnvSpec, Field, LearnContext
from .flat import FlatParameters
from .flat_adam import FlatAdam, annealed_lr
from .q_acting import QActor
from .q_loss import QMixer, chosen, double_q_next, q_loss
from .q_nets import QNetwork
from .q_params import QParams
from .update_step import GradientStep



class QTerms(NamedTuple):
    """One group's figures of one update, float32 scalars: the TD loss and the mean Q of the actions taken."""

    q_loss: torch.Tensor
    q_taken: torch.Tensor


#: The learner's statistics per group: each update's :class:`QTerms` summed over the iteration's updates, the
#: exploration epsilon and the updates done.
STAT_NAMES = (*QTerms._fields, "epsilon", "updates")
LEARNED, EPSILON, UPDATES = slice(0, len(QTerms._fields)), STAT_NAMES.index("epsilon"), STAT_NAMES.index("updates")


class QObjective(nn.Module):
    """The TD loss of one update, every group's summed, as the module the learner differentiates
    (:mod:`.update_step`): ``forward(u, rows, buffers)`` gathers update ``u``'s (int64 [1]) transitions from the
    replay buffers (``rows``: the iteration's draws, ``LearnContext.batches.replay_rows``) and returns ``(loss,
    statistics float32 [groups, len(QTerms._fields)])`` (each group's :class:`QTerms`, divided by the updates per
    iteration: summed over the iteration's updates they are its means).

    ``trainable``: the online Q-networks (and ``mixer:<group>``); ``targets``: their target copies, laid out
    the same way (constants of the loss)."""

    def __init__(self, params: QParams, kind: str, groups, trainable: nn.ModuleDict, targets: nn.ModuleDict,
                 names: list[str]):
        super().__init__()
        self.trainable, self.targets = trainable, targets
        self.params, self.kind, self.groups, self.names = params, kind, groups, names

    def _group_input(self, rows: torch.Tensor, group) -> torch.Tensor:
        return group_inputs(rows, group.agents, group.obs_dim, self.params.frame_stack)

    def forward(self, u: torch.Tensor, rows: tuple, buffers: tuple):
        p = self.params
        batch = gather_rows(buffers, *(r.index_select(0, u).squeeze(0) for r in rows))
        losses, terms = [], []
        for name in self.names:
            group = self.groups[name]
            a = group.agents
            x, x_next = self._group_input(batch["inputs"], group), self._group_input(batch["next_inputs"], group)
            net, target = self.trainable[name], self.targets[name]
            q_taken = chosen(net(x), batch["actions"][:, a].long())
            next_value = double_q_next(net(x_next).detach(), target(x_next))
            mixer = target_mixer = None
            if self.kind == "qmix":
                mixer, target_mixer = self.trainable[f"mixer:{name}"], self.targets[f"mixer:{name}"]
            losses.append(q_loss(self.kind, q_taken, next_value, batch["reward"][:, a], batch["terminated"],
                                 p.gamma, mixer, target_mixer, batch["state"], batch["next_state"], batch["weight"]))
            # The mean Q taken, over this rank's rows of the global draw (the loss weights rows the same way):
            # summed over the ranks, it is the one-device mean.
            taken = (q_taken.detach().mean(-1) * batch["weight"]).sum() / q_taken.shape[0]
            terms.append(QTerms(q_loss=losses[-1].detach(), q_taken=taken))
        stats = torch.stack([torch.stack(t) for t in terms]) / p.q_updates
        return sum(losses), stats


class QLearner:
    """``q_updates`` TD updates from the replay buffer per iteration (see the module docstring): each one
    compiled region (draw, loss, gradient, clip, Adam: :mod:`.update_step`), then the targets move."""

    inputs = ("replay",)
    outputs = ("weights",)

    def __init__(self, params: QParams, iters: int, objective: QObjective, flat: FlatParameters,
                 target_flat: FlatParameters, adam: FlatAdam, actor: QActor, seed: torch.Tensor, compiled: bool):
        self.params, self.iters = params, iters
        self.objective, self.flat, self.target_flat, self.adam = objective, flat, target_flat, adam
        self.actor, self.seed, self.compiled = actor, seed, compiled
        self.updates = 0
        device = flat.param.device
        #: int64 [1]: the draw number of the next update (= updates; a device copy the draws read)
        self.draw = torch.zeros(1, dtype=torch.int64, device=device)
        self.totals = torch.zeros(len(objective.names), len(QTerms._fields), device=device)
        self.step: GradientStep | None = None

    def set_updates(self, updates: int) -> None:
        """Continue after ``updates`` updates (a loaded checkpoint)."""
        self.updates = updates
        self.draw.fill_(updates)

    def run(self, storage: RolloutStorage, ctx: LearnContext) -> torch.Tensor:
        p, replay = self.params, ctx.replay
        names = self.objective.names
        stats = torch.zeros(len(names), len(STAT_NAMES), device=replay.inputs.device)
        stats[:, EPSILON] = self.actor.epsilon(ctx.step)
        if ctx.batches.replay_transitions(replay) < p.q_batch:  # not enough transitions yet (all ranks): act only
            return stats
        if self.step is None:
            reduce = ctx.reduce_gradients if ctx.comm.world_size > 1 else None
            self.step = GradientStep(self.objective, self.flat, "trainable.", self.adam, p.max_grad_norm,
                                     self.compiled, reduce)
            self.update_ids = [torch.full((1,), u, dtype=torch.int64, device=self.draw.device)
                               for u in range(p.q_updates)]
        with ctx.timer.phase("learn"):
            self.adam.lr.copy_(annealed_lr(p.lr, ctx.iteration, self.iters, p.anneal_lr))
            self.totals.zero_()
            # Every update's draw over every rank's envs, at once.
            rows = ctx.batches.replay_rows(replay, self.seed, self.draw, p.q_updates, p.q_batch)
            buffers = replay.buffers()
            for u in self.update_ids:
                self.step(self.totals, u, rows, buffers)
                self.updates += 1
                if self.updates % p.target_period == 0:
                    self.target_flat.data.lerp_(self.flat.data, p.target_tau)
            self.draw += p.q_updates
        # Loss and Q taken are this rank's shares of the global draw: their sum over the learner ranks is
        # the one device's figure (epsilon and the update count are the same on every rank).
        stats[:, LEARNED] = ctx.comm.all_reduce_(self.totals.clone())
        stats[:, UPDATES].fill_(self.updates)  # a fill (a setitem of a Python number copies from a host tensor)
        return stats


class IQL(Algorithm):
    """Independent Q-learning: every agent learns its own Q from its own reward (double-Q targets)."""

    name = "iql"
    stat_names = STAT_NAMES
    params_type = QParams
    uses_replay = True
    kind = "iql"

    def __init__(self, config, spec: EnvSpec, trained: list[str], seed: int, generator: torch.Generator):
        p: QParams = config.algo_params
        self.params, self.spec, self.trained = p, spec, trained
        groups = spec.groups
        self.nets = nn.ModuleDict({
            name: QNetwork(groups[name].obs_dim * p.frame_stack, groups[name].action_space, p.hidden,
                           p.activation, generator)
            for name in trained}).to(spec.device)
        self.targets = copy.deepcopy(self.nets).requires_grad_(False)
        self.mixers = self.target_mixers = None
        if self.kind == "qmix":
            if spec.state_dim < 1:
                raise ValueError("qmix mixes on the env's global state, and this env has none (global_state_dim 0)")
            self.mixers = nn.ModuleDict({
                name: QMixer(groups[name].agents.stop - groups[name].agents.start, spec.state_dim,
                             generator=generator)
                for name in trained}).to(spec.device)
            self.target_mixers = copy.deepcopy(self.mixers).requires_grad_(False)
        # Every trained network (and its target copy) as views of one flat parameter: one Adam step, one clip
        # per network, one target update per update.
        mixers = {} if self.mixers is None else {f"mixer:{k}": m for k, m in self.mixers.items()}
        target_mixers = {} if self.mixers is None else {f"mixer:{k}": m for k, m in self.target_mixers.items()}
        self.trainable = nn.ModuleDict({**self.nets, **mixers})
        self.target_modules = nn.ModuleDict({**self.targets, **target_mixers})
        self.flat = FlatParameters(self.trainable)
        self.target_flat = FlatParameters(self.target_modules)
        self.target_flat.param.requires_grad_(False)
        self.optimizer = FlatAdam(self.flat.data, p.lr, eps=1e-5)
        decay = int(p.eps_decay_frac * config.iters * config.rollout_len)
        seed_key = seed_tensor(seed, spec.device)
        self.actor = QActor(groups, self.nets, spec, seed_key, p.eps_start, p.eps_end, decay, p.policy_backend,
                            p.activation)
        objective = QObjective(p, self.kind, groups, self.trainable, self.target_modules, list(trained))
        self.learner = QLearner(p, config.iters, objective, self.flat, self.target_flat, self.optimizer, self.actor,
                                seed_key, compiled=p.learner_backend != "eager")

    def fields(self) -> dict[str, Field]:
        return {}

    def _modules(self) -> nn.ModuleDict:
        mixers = {} if self.mixers is None else {"mixers": self.mixers, "target_mixers": self.target_mixers}
        return nn.ModuleDict({"nets": self.nets, "targets": self.targets, **mixers})

    def weights(self) -> list[torch.Tensor]:
        # The actors read the Q-networks; the targets and mixers are the learner's, kept equal on every
        # learner rank by the same updates.
        return [*self.nets.parameters()]

    def sync_actors(self) -> None:
        self.actor.sync()

    def backends(self) -> dict[str, str]:
        return {"acting": self.actor.backend, "learning": "compiled" if self.learner.compiled else "eager"}

    def state_dict(self) -> dict:
        return {"nets": self._modules().state_dict(), "optimizer": self.optimizer.state_dict(),
                "updates": self.learner.updates}

    def load_state_dict(self, state: dict) -> None:
        self._modules().load_state_dict(state["nets"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.learner.set_updates(int(state["updates"]))
        self.sync_actors()


class VDN(IQL):
    """Value decomposition: a group's team Q is the sum of its agents' Qs, learned from the team reward."""

    name = "vdn"
    kind = "vdn"


class QMIX(IQL):
    """QMIX: a group's team Q is a monotonic mix of its agents' Qs by hypernetworks of the global state."""

    name = "qmix"
    kind = "qmix"
    reads_global_state = True


__all__ = ["IQL", "QMIX", "QTerms", "STAT_NAMES", "VDN"]
