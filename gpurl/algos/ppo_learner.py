"""PPO's learner fragment: GAE over a rollout storage, then epochs x minibatches of the PPO loss.

It serves every variant of the family (PPO, A2C, MAPPO; feed-forward or recurrent actors):
- values: each policy's own critic on its input (PPO), or a central critic on the env's global state
  (MAPPO, :class:`~.central_critic.CentralCritic`), de-normalised by its :class:`ValueNorm` if any;
- minibatches (``LearnContext.batches``, :mod:`gpurl.multigpu.minibatches`): feed-forward actors deal each env's samples (t, i) over the
  minibatches; recurrent actors deal whole envs and replay their sequences from the state that entered
  step 0 (truncated BPTT over T); a central critic deals env rows (t, e) and predicts every agent of each.

An update reads nothing from the host: truncated episodes bootstrap from values computed for every step
and read where the episode was cut, minibatches are shuffled on the device with keys of the counter RNG
(global sample ids, the run's seed and the draw number: the same however envs are split over ranks),
each minibatch is one compiled region (gradient, clip, Adam: :mod:`.update_step`) and the learning rate
is a device tensor annealed from the device's iteration counter. Every mean is a sum divided by the
global minibatch size, and the distribution policy sums gradients and moments over ranks, so the update is
the same arithmetic however the envs are split.
"""
from __future__ import annotations

import torch
from torch import nn

from ..fusion.gae import gae
from ..profiling import nvtx_range
from ..storage.rollout import RolloutStorage
from .base import LearnContext
from .compiling import compile_step
from .flat import FlatParameters
from .flat_adam import FlatAdam, annealed_lr
from .gru import gru_cell
from .ppo_loss import STAT_NAMES, LossCoefficients
from .ppo_objective import PPOObjective, minibatch_moments
from .ppo_params import PPOParams
from .ppo_samples import GroupColumns, PPOSamples
from .update_step import GradientStep

def values(nets: list, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Every group's value of its input rows [B, in_dim] -> [B], in one call."""
    return [net.value(x) for net, x in zip(nets, inputs)]


def central_values(critics: list, norms: list, states: torch.Tensor) -> list[torch.Tensor]:
    """Every group's values of the global states [B, S] -> [B, n_group], de-normalised (``norms``
    entries may be None), in one call."""
    out = [critic.values(states) for critic in critics]
    return [v if norm is None else norm.denormalize(v) for v, norm in zip(out, norms)]


_values_compiled = compile_step(values)
_gru_cell_compiled = compile_step(gru_cell)
#: the one compiled wrapper of central_values (the acting pass and the learner share its graphs)
central_values_compiled = compile_step(central_values)


class PPOLearner:
    """Advantages and the PPO update over a whole rollout storage.

    ``params``: the algorithm's parameters; ``iters``: the run's iterations (the learning rate anneals over
    them); ``nets``: the trained groups' policies; ``trainable``: every network the update trains (``nets``, then
    MAPPO's ``critic:<group>``), laid out in ``flat`` and stepped by ``adam``; ``critics`` (MAPPO) the
    central critics (None: each policy's own critic) and ``value_norms`` their value normalisers (None: raw
    values); ``seed`` int64 [2] keys the minibatch shuffles."""

    inputs = ("obs", "starts", "final_obs", "reward", "terminated", "truncated", "actions", "log_prob", "value",
              "hidden (recurrent)", "global_state, final_global_state (central critics)")
    outputs = ("weights", "statistics")

    def __init__(self, params: PPOParams, iters: int, groups, nets: nn.ModuleDict, trainable: nn.ModuleDict,
                 flat: FlatParameters, adam: FlatAdam, backend: str, seed: torch.Tensor, critics: nn.ModuleDict | None = None,
                 value_norms: nn.ModuleDict | None = None):
        p = self.params = params
        self.iters, self.groups, self.nets, self.flat, self.adam, self.seed = iters, groups, nets, flat, adam, seed
        self.critics, self.value_norms = critics, value_norms
        self.recurrent = p.recurrent != "none"
        self.compiled = backend == "compiled"
        if self.compiled and self.recurrent:  # the replay steps a compiled cell: one small graph, not one T long
            for net in nets.values():
                net.actor.replay_cell = _gru_cell_compiled
        self.values = _values_compiled if self.compiled else values
        self.central_values = central_values_compiled if self.compiled else central_values
        self.columns = {name: GroupColumns(groups[name].obs_dim, groups[name].obs_dim * p.frame_stack,
                                           net.action_dims, net.action_dtype == torch.int64,
                                           groups[name].agents.stop - groups[name].agents.start, self.recurrent)
                        for name, net in nets.items()}
        coef = LossCoefficients(p.clip_coef, p.clip_vloss, p.vf_coef, p.ent_coef)
        self.objective = PPOObjective(trainable, self.columns, coef, central=critics is not None)
        device = flat.param.device
        #: minibatch m's index, int64 [1] each (a tensor: the compiled step never specialises on it)
        self.minibatch_ids = [torch.full((1,), m, dtype=torch.int64, device=device) for m in range(p.minibatches)]
        self.totals = torch.zeros(len(nets), len(STAT_NAMES), device=device)
        self.moments = {name: torch.zeros(p.minibatches, 2, device=device) for name in nets}
        self.samples: PPOSamples | None = None
        self.step: GradientStep | None = None
        self._built_for = None
        self._final_value: torch.Tensor | None = None
        self._final_index = None

    def _norm(self, name: str):
        return None if self.value_norms is None else self.value_norms[name]

    def prepare(self, s: RolloutStorage, ctx: LearnContext) -> None:
        """Allocate the buffers of an update of storage ``s`` (the trainer calls it once, before any iteration;
        a learner not prepared prepares at its first update)."""
        self._build(s, ctx)

    def _build(self, s: RolloutStorage, ctx: LearnContext) -> None:
        key = (id(s), ctx.batches)
        if self._built_for == key:
            return
        p = self.params
        agents = {name: (self.groups[name].agents, cols) for name, cols in self.columns.items()}
        self.samples = PPOSamples(agents, s.steps, ctx.batches, p.minibatches,
                                  s.state_dim if self.critics is not None else 0, p.hidden[0], s.reward.device)
        reduce = ctx.reduce_gradients if ctx.comm.world_size > 1 else None
        self.step = GradientStep(self.objective, self.flat, "trainable.", self.adam, p.max_grad_norm,
                                 self.compiled, reduce, compile_gradient=not self.recurrent)
        self._final_value = torch.zeros_like(s.reward)
        T, E = s.steps, s.reward.shape[1]
        self._final_index = (torch.arange(T, device=s.reward.device).repeat_interleave(E),
                             torch.arange(E, device=s.reward.device).repeat(T))
        self._built_for = key

    def run(self, s: RolloutStorage, ctx: LearnContext) -> torch.Tensor:
        self._build(s, ctx)
        with ctx.timer.phase("advantages"):
            advantages, returns = self.advantages(s)
        with ctx.timer.phase("learn"):
            if self.value_norms is not None:  # the targets' statistics, fixed for this update
                for name, norm in self.value_norms.items():
                    norm.update(returns[:, :, self.groups[name].agents], ctx.comm)
            self.samples.pack(s, advantages, returns, self.nets, self.value_norms)
            stats = self.update(ctx)
            # For the next rollout; this one's update saw the statistics it acted on.
            if self.params.norm_obs:
                for name, net in self.nets.items():
                    group = self.groups[name]
                    raw = s.policy_input(0, s.steps, group.agents, group.obs_dim)
                    net.obs_norm.update(raw.reshape(-1, raw.shape[-1]), ctx.comm)
                    if self.critics is not None:
                        self.critics[name].state_norm.update(s.global_state[:s.steps].reshape(-1, s.state_dim),
                                                             ctx.comm)
        return stats

    # ---- advantages --------------------------------------------------------------------------------

    @torch.no_grad()
    def advantages(self, s: RolloutStorage) -> tuple[torch.Tensor, torch.Tensor]:
        """GAE over the storage: float32 [T, E, N] advantages and returns. The values of slot T, and of the
        final observation of every step (GAE reads them where the time limit cut an episode), are computed
        here, for every step: which steps were cut is never read back to the host."""
        p = self.params
        final_value = self._final_value
        agents = [self.groups[name].agents for name in self.nets]
        if self.critics is not None:
            self._central_bootstrap(s, agents, final_value)
        else:
            self._own_bootstrap(s, agents, final_value)
        backend = {"eager": "torch", "triton": "triton"}.get(p.policy_backend, "auto")
        with nvtx_range("gae"):
            return gae(s.reward, s.value, final_value, s.terminated, s.truncated, p.gamma, p.gae_lambda,
                       backend=backend)

    def _own_bootstrap(self, s: RolloutStorage, agents, final_value) -> None:
        T, E, nets = s.steps, s.reward.shape[1], list(self.nets.values())
        dims = [self.groups[name].obs_dim for name in self.nets]
        last = [s.policy_input(T, T + 1, a, d)[0] for a, d in zip(agents, dims)]
        final = [s.final_input(*self._final_index, a, d) for a, d in zip(agents, dims)]      # [T E, n, in]
        rows = [x.reshape(-1, x.shape[-1]) for x in last + final]
        out = self.values(nets + nets, rows)
        for a, x, v in zip(agents, last, out[:len(nets)]):
            s.value[T, :, a] = v.view(x.shape[:2])
        for a, v in zip(agents, out[len(nets):]):
            final_value[:, :, a] = v.view(T, E, -1)

    def _central_bootstrap(self, s: RolloutStorage, agents, final_value) -> None:
        T, E = s.steps, s.reward.shape[1]
        critics = list(self.critics.values())
        norms = [self._norm(name) for name in self.nets]
        states = torch.cat([s.global_state[T], s.final_global_state.view(T * E, -1)])
        for a, v in zip(agents, self.central_values(critics, norms, states)):
            s.value[T, :, a] = v[:E]
            final_value[:, :, a] = v[E:].view(T, E, -1)

    # ---- the update ----------------------------------------------------------------------------------

    def update(self, ctx: LearnContext) -> torch.Tensor:
        """Epochs x minibatches over the packed samples; returns the mean statistics per group, float32
        [groups, len(STAT_NAMES)], the same on every rank."""
        p, samples, names = self.params, self.samples, list(self.nets)
        self.adam.lr.copy_(annealed_lr(p.lr, ctx.iteration, self.iters, p.anneal_lr))
        self.totals.zero_()
        for epoch in range(p.epochs):
            with nvtx_range("shuffle"):
                samples.shuffle(self.seed, ctx.iteration * p.epochs + epoch)
                sums = ctx.comm.all_reduce_(torch.stack([samples.sums[name] for name in names]))
                for name, group_sums in zip(names, sums):
                    self.moments[name].copy_(minibatch_moments(group_sums, samples.counts[name], p.norm_adv))
            inputs = [samples.group_inputs(name, self.moments[name]) for name in names]
            for m in self.minibatch_ids:
                self.step(self.totals, m, inputs)
        return ctx.comm.all_reduce_(self.totals / (p.epochs * p.minibatches))


__all__ = ["PPOLearner", "central_values", "central_values_compiled", "values"]
