"""IQL, VDN and QMIX: the value-based algorithm plug-ins (see :mod:`gpurl.algos.base`).

One :class:`~.q_nets.QNetwork` per trained group, shared by the group's agents, with a target copy; QMIX adds
a :class:`~.q_loss.QMixer` per group (and its target) on the env's global state.
- Actor fragment: :class:`~.q_acting.QActor` writes every trained group's epsilon-greedy actions at slot t
  (:meth:`QNetwork.act`, or the fused kernel generated from it, by ``policy_backend``; epsilon annealed
  linearly over the first ``eps_decay_frac`` of the run's steps; greedy when evaluating).
- Learner fragment: :class:`QLearner` learns from the replay buffer the trainer fills with each rollout's
  transitions (``ctx.replay``, :mod:`gpurl.train.replay`): ``q_updates`` updates of ``q_batch`` transitions
  drawn with ``ctx.generator`` (in the same state on every learner rank) over the slots and all envs of the
  run; a data-parallel rank weights the rows of its own envs, so the ranks' summed gradients are the one
  device's (the same draw from the same transitions). Every group's loss summed
  (:func:`~.q_loss.q_loss`), gradients summed over ranks by the distribution policy, each group's gradient
  norm clipped, one Adam step; then the targets move towards the online networks (``target_tau``, every
  ``target_period`` updates; tau 1 is a hard copy).

VDN and QMIX learn a group's team value from its team reward (the mean of its agents' rewards; a group
declares a team reward by giving all its agents the same reward).
"""
from __future__ import annotations

import copy

import torch
from torch import nn

from ..fusion.counter_rng import seed_tensor
from .base import Algorithm, EnvSpec, Field
from .q_acting import QActor
from .q_loss import QMixer, chosen, double_q_next, q_loss
from .q_nets import QNetwork

STAT_NAMES = ("q_loss", "q_taken", "epsilon", "updates")


class QLearner:
    """``q_updates`` TD updates from the replay buffer per iteration (see the module docstring)."""

    inputs = ("replay",)
    outputs = ("weights",)

    def __init__(self, cfg, kind: str, groups, nets: nn.ModuleDict, targets: nn.ModuleDict,
                 mixers: nn.ModuleDict | None, target_mixers: nn.ModuleDict | None, optimizer, actor: QActor,
                 frame_stack: int):
        self.cfg, self.kind, self.groups = cfg, kind, groups
        self.nets, self.targets, self.mixers, self.target_mixers = nets, targets, mixers, target_mixers
        self.optimizer, self.actor, self.frame_stack = optimizer, actor, frame_stack
        self.updates = 0

    def _group_input(self, rows: torch.Tensor, group) -> torch.Tensor:
        """A group's policy inputs [B, n, frame_stack * its obs_dim] from the buffer's rows [B, N, frame_stack *
        the env's obs_dim] (each frame zero-padded to the widest group's obs_dim)."""
        x = rows[:, group.agents]
        B, n = x.shape[:2]
        return x.view(B, n, self.frame_stack, -1)[..., :group.obs_dim].reshape(B, n, -1)

    def _group_loss(self, name: str, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        group = self.groups[name]
        a = group.agents
        x, x_next = self._group_input(batch["inputs"], group), self._group_input(batch["next_inputs"], group)
        q_taken = chosen(self.nets[name](x), batch["actions"][:, a].long())
        with torch.no_grad():
            next_value = double_q_next(self.nets[name](x_next), self.targets[name](x_next))
        mixer = target_mixer = None
        if self.mixers is not None:
            mixer, target_mixer = self.mixers[name], self.target_mixers[name]
        loss = q_loss(self.kind, q_taken, next_value, batch["reward"][:, a], batch["terminated"], self.cfg.gamma,
                      mixer, target_mixer, batch["state"], batch["next_state"], batch["weight"])
        # The mean Q taken, over this rank's rows of the global draw (the loss weights rows the same way):
        # summed over the ranks, it is the one-device mean.
        taken = (q_taken.detach().mean(-1) * batch["weight"]).sum() / q_taken.shape[0]
        return loss, taken

    def _params(self, name: str) -> list[torch.Tensor]:
        mixer = [] if self.mixers is None else list(self.mixers[name].parameters())
        return [*self.nets[name].parameters(), *mixer]

    @torch.no_grad()
    def _update_targets(self) -> None:
        tau = self.cfg.target_tau
        online = [*self.nets.parameters(), *([] if self.mixers is None else self.mixers.parameters())]
        target = [*self.targets.parameters(), *([] if self.mixers is None else self.target_mixers.parameters())]
        torch._foreach_lerp_(target, online, tau)

    def run(self, storage, ctx) -> torch.Tensor:
        cfg, replay = self.cfg, ctx.replay
        names = list(self.nets)
        stats = torch.zeros(len(names), len(STAT_NAMES), device=replay.inputs.device)
        stats[:, 2] = self.actor.epsilon(ctx.step)
        if replay.size * ctx.shard.total < cfg.q_batch:  # not enough transitions yet (all ranks): act only
            return stats
        with ctx.timer.phase("learn"):
            for _ in range(cfg.q_updates):
                batch = replay.sample(cfg.q_batch, ctx.generator, ctx.shard)  # one draw over every rank's envs
                losses, taken = zip(*(self._group_loss(name, batch) for name in names))
                self.optimizer.zero_grad(set_to_none=False)
                torch.stack(losses).sum().backward()
                params = [p for name in names for p in self._params(name)]
                ctx.reduce_gradients([p.grad for p in params])
                if cfg.max_grad_norm > 0:
                    for name in names:
                        nn.utils.clip_grad_norm_(self._params(name), cfg.max_grad_norm, foreach=True)
                self.optimizer.step()
                self.updates += 1
                if self.updates % cfg.target_period == 0:
                    self._update_targets()
                stats[:, 0] += torch.stack(losses).detach() / cfg.q_updates
                stats[:, 1] += torch.stack(taken) / cfg.q_updates
        # Loss and Q taken are this rank's shares of the global draw: their sum over the learner ranks is
        # the one device's figure (epsilon and the update count are the same on every rank).
        stats[:, :2] = ctx.comm.all_reduce_(stats[:, :2].contiguous())
        stats[:, 3] = float(self.updates)
        return stats


class IQL(Algorithm):
    """Independent Q-learning: every agent learns its own Q from its own reward (double-Q targets)."""

    name = "iql"
    stat_names = STAT_NAMES
    uses_replay = True
    supports_recurrent = False
    kind = "iql"

    @classmethod
    def adjust_config(cls, config):
        if config.recurrent != "none":
            raise ValueError(f"{cls.name} has no recurrent policies: recurrent must be 'none', got {config.recurrent!r}")
        if config.learner_backend == "compiled":
            raise ValueError(f"{cls.name} learns with the eager loss: learner_backend must be 'auto' or 'eager', "
                             "got 'compiled'")
        return config

    def __init__(self, config, spec: EnvSpec, trained: list[str], seed: int, generator: torch.Generator):
        cfg = self.config = config
        self.spec, self.trained = spec, trained
        groups = spec.groups
        self.nets = nn.ModuleDict({
            name: QNetwork(groups[name].obs_dim * cfg.frame_stack, groups[name].action_space, cfg.hidden,
                           cfg.activation, generator)
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
        trainable = [*self.nets.parameters(), *([] if self.mixers is None else self.mixers.parameters())]
        self.optimizer = torch.optim.Adam(trainable, lr=cfg.lr, eps=1e-5)
        decay = int(cfg.eps_decay_frac * cfg.iters * cfg.rollout_len)
        self.actor = QActor(groups, self.nets, spec, seed_tensor(seed, spec.device), cfg.eps_start, cfg.eps_end,
                            decay, cfg.policy_backend, cfg.activation)
        self.learner = QLearner(cfg, self.kind, groups, self.nets, self.targets, self.mixers, self.target_mixers,
                                self.optimizer, self.actor, cfg.frame_stack)

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
        return {"acting": self.actor.backend, "learning": "eager"}

    def state_dict(self) -> dict:
        return {"nets": self._modules().state_dict(), "optimizer": self.optimizer.state_dict(),
                "updates": self.learner.updates}

    def load_state_dict(self, state: dict) -> None:
        self._modules().load_state_dict(state["nets"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.learner.updates = int(state["updates"])
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


__all__ = ["IQL", "QMIX", "STAT_NAMES", "VDN"]
