"""PPO's learner fragment: GAE over a rollout storage, then epochs x minibatches of the PPO loss.

It serves every variant of the family (PPO, A2C, MAPPO; feed-forward or recurrent actors):
- values: each policy's own critic on its input (PPO), or a central critic on the env's global state
  (MAPPO, :class:`~.central_critic.CentralCritic`), de-normalised by its :class:`ValueNorm` if any;
- minibatches: feed-forward actors draw samples (t, e, i) of the whole rollout; recurrent actors draw
  envs and replay their whole sequences from the state that entered step 0 (truncated BPTT over T);
  a central critic draws env rows (t, e) and predicts every agent of each at once.

Minibatches are drawn from the *global* rollout (all envs of all ranks) by a generator every rank holds
in the same state; a rank trains on the members of each minibatch that fall in its env shard, every
mean is a sum divided by the global minibatch size, and the distribution policy sums gradients and
moments over ranks. So the update is the same arithmetic however the envs are split.
"""
from __future__ import annotations

import torch
from torch import nn

from ..fusion.gae import gae
from ..profiling import nvtx_range
from .base import LearnContext
from .compiling import compile_step
from .flat import FlatParameters
from .gru import gru_cell
from .ppo_loss import (STAT_NAMES, CriticBatch, GroupBatch, LossCoefficients, SequenceBatch, advantage_moments,
                       groups_loss)

LEARNING_BACKENDS = ("auto", "eager", "compiled")

_groups_loss_compiled = compile_step(groups_loss)


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

    ``nets``: the trained groups' policies; ``critics`` (MAPPO) their central critics (None: each
    policy's own critic) and ``value_norms`` their value normalisers (None: raw values)."""

    inputs = ("obs", "starts", "final_obs", "reward", "terminated", "truncated", "actions", "log_prob", "value",
              "hidden (recurrent)", "global_state, final_global_state (central critics)")
    outputs = ("weights", "statistics")

    def __init__(self, cfg, groups, nets: nn.ModuleDict, optimizer: torch.optim.Optimizer, flat: FlatParameters,
                 backend: str, critics: nn.ModuleDict | None = None, value_norms: nn.ModuleDict | None = None):
        self.cfg, self.groups, self.nets, self.optimizer, self.flat = cfg, groups, nets, optimizer, flat
        self.critics, self.value_norms = critics, value_norms
        self.recurrent = cfg.recurrent != "none"
        self.coef = LossCoefficients(cfg.clip_coef, cfg.clip_vloss, cfg.vf_coef, cfg.ent_coef)
        compiled = backend == "compiled"
        self.loss = _groups_loss_compiled if compiled and not self.recurrent else groups_loss
        if compiled and self.recurrent:  # the replay steps a compiled cell: one small graph, not one T long
            for net in nets.values():
                net.actor.replay_cell = _gru_cell_compiled
        self.values = _values_compiled if compiled else values
        self.central_values = central_values_compiled if compiled else central_values
        self._final_value: torch.Tensor | None = None

    def _norm(self, name: str):
        return None if self.value_norms is None else self.value_norms[name]

    def run(self, s, ctx: LearnContext) -> torch.Tensor:
        with ctx.timer.phase("advantages"):
            advantages, returns = self.advantages(s)
        with ctx.timer.phase("learn"):
            if self.value_norms is not None:  # the targets' statistics, fixed for this update
                for name, norm in self.value_norms.items():
                    norm.update(returns[:, :, self.groups[name].agents], ctx.comm)
            batches = self.group_batches(s, advantages, returns)
            critic_batches = self.critic_batches(s, returns) if self.critics is not None else None
            stats = self.update(batches, ctx, critic_batches)
            # For the next rollout; this one's update saw the statistics it acted on.
            if self.cfg.norm_obs:
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
    def advantages(self, s) -> tuple[torch.Tensor, torch.Tensor]:
        """GAE over the storage: float32 [T, E, N] advantages and returns (values of slot T and of the
        final observations of truncated episodes computed here)."""
        cfg, T = self.cfg, s.steps
        if self._final_value is None or self._final_value.shape != s.reward.shape:
            self._final_value = torch.zeros_like(s.reward)
        final_value = self._final_value.zero_()
        # The one host read of the iteration: which (t, e) were cut by the time limit.
        ended_t, ended_e = s.truncated.nonzero(as_tuple=True)  # host-ok: after the rollout
        agents = [self.groups[name].agents for name in self.nets]
        if self.critics is not None:
            self._central_bootstrap(s, ended_t, ended_e, agents, final_value)
        else:
            self._own_bootstrap(s, ended_t, ended_e, agents, final_value)
        backend = {"eager": "torch", "triton": "triton"}.get(cfg.policy_backend, "auto")
        with nvtx_range("gae"):
            return gae(s.reward, s.value, final_value, s.terminated, s.truncated, cfg.gamma, cfg.gae_lambda,
                       backend=backend)

    def _own_bootstrap(self, s, ended_t, ended_e, agents, final_value) -> None:
        T, nets = s.steps, list(self.nets.values())
        dims = [self.groups[name].obs_dim for name in self.nets]
        last = [s.policy_input(T, T + 1, a, d)[0] for a, d in zip(agents, dims)]
        for a, x, v in zip(agents, last, self.values(nets, [x.reshape(-1, x.shape[-1]) for x in last])):
            s.value[T, :, a] = v.view(x.shape[:2])
        if len(ended_t):
            final = [s.final_input(ended_t, ended_e, a, d) for a, d in zip(agents, dims)]
            # Their count changes every iteration (one env, or many): tensors of their own (no view of a
            # batch-sized base) with an unbacked size, so that no count specialises the compiled pass.
            rows = [x.reshape(-1, x.shape[-1]).clone() for x in final]
            for x in rows:
                torch._dynamo.decorators.mark_unbacked(x, 0)
            for a, x, v in zip(agents, final, self.values(nets, rows)):
                final_value[ended_t, ended_e, a] = v.view(x.shape[:2])

    def _central_bootstrap(self, s, ended_t, ended_e, agents, final_value) -> None:
        critics = list(self.critics.values())
        norms = [self._norm(name) for name in self.nets]
        for a, v in zip(agents, self.central_values(critics, norms, s.global_state[s.steps])):
            s.value[s.steps, :, a] = v
        if len(ended_t):
            states = s.final_global_state[ended_t, ended_e].clone()
            torch._dynamo.decorators.mark_unbacked(states, 0)
            for a, v in zip(agents, self.central_values(critics, norms, states)):
                final_value[ended_t, ended_e, a] = v

    # ---- the samples of an update ------------------------------------------------------------------

    @torch.no_grad()
    def group_batches(self, s, advantages: torch.Tensor, returns: torch.Tensor) -> dict:
        """Each group's actor samples with its inputs normalised once: the statistics are fixed during
        an update (they move after it, see :meth:`run`). Feed-forward: :class:`GroupBatch` rows over
        [T, E, n]; recurrent: :class:`SequenceBatch` of every env, [T, E * n]."""
        batches = {}
        for name, net in self.nets.items():
            group = self.groups[name]
            a = group.agents
            inputs = s.policy_input(0, s.steps, a, group.obs_dim)
            normalized = net.normalize(inputs.reshape(-1, inputs.shape[-1]))
            if self.recurrent:
                T, E, n, D = inputs.shape
                batches[name] = SequenceBatch(
                    inputs=normalized.view(T, E * n, D), actions=s.actions[:, :, a].reshape(T, E * n, -1),
                    log_prob=s.log_prob[:, :, a].reshape(T, E * n), advantages=advantages[:, :, a].reshape(T, E * n),
                    returns=returns[:, :, a].reshape(T, E * n), values=s.value[:-1, :, a].reshape(T, E * n),
                    hidden=s.hidden[0, :, a].reshape(E * n, -1),
                    starts=s.starts[s.history:s.history + T].repeat_interleave(n, 1))
            else:
                batches[name] = GroupBatch(
                    inputs=normalized, actions=s.actions[:, :, a].reshape(-1, s.actions.shape[-1]),
                    log_prob=s.log_prob[:, :, a].reshape(-1), advantages=advantages[:, :, a].reshape(-1),
                    returns=returns[:, :, a].reshape(-1), values=s.value[:-1, :, a].reshape(-1),
                    agents=a.stop - a.start)
        return batches

    @torch.no_grad()
    def critic_batches(self, s, returns: torch.Tensor) -> dict[str, CriticBatch]:
        """Each group's central-critic samples, one row per (t, e) over [T, E]: the global state, and
        the group's returns and rollout values, normalised when a value normaliser is on."""
        T, E = s.steps, s.global_state.shape[1]
        states = s.global_state[:T].reshape(T * E, -1)
        out = {}
        for name in self.nets:
            a, norm = self.groups[name].agents, self._norm(name)
            ret, old = returns[:, :, a].reshape(T * E, -1), s.value[:T, :, a].reshape(T * E, -1)
            if norm is not None:
                ret, old = norm.normalize(ret), norm.normalize(old)
            out[name] = CriticBatch(states, ret, old)
        return out

    # ---- the update ----------------------------------------------------------------------------------

    def _draw(self, count: int, ctx: LearnContext) -> list[torch.Tensor]:
        return list(torch.randperm(count, device=self.flat.grad.device, generator=ctx.generator)
                    .tensor_split(self.cfg.minibatches))

    def update(self, batches: dict, ctx: LearnContext, critic_batches: dict | None = None) -> torch.Tensor:
        """Epochs x minibatches over every group's batch; returns the mean statistics per group,
        float32 [groups, len(STAT_NAMES)], the same on every rank."""
        cfg, shard = self.cfg, ctx.shard
        names = list(batches)
        device = self.flat.grad.device
        totals = torch.zeros(len(names), len(STAT_NAMES), device=device)
        no_norm = (torch.zeros((), device=device), torch.ones((), device=device))
        central = critic_batches is not None
        steps = 0
        for _ in range(cfg.epochs):
            # Every rank draws the same global permutations, in the same order.
            if self.recurrent:  # whole sequences: minibatches of envs
                chunks = {name: self._draw(shard.total, ctx) for name in names}
            else:               # samples (t, e, i) of the global rollout
                chunks = {name: self._draw(len(b) // shard.size * shard.total, ctx) for name, b in batches.items()}
            critic_chunks = ({name: self._draw(len(b.states) // shard.size * shard.total, ctx)
                              for name, b in critic_batches.items()} if central and not self.recurrent else None)
            for m in range(cfg.minibatches):
                present, parts = [], []
                for g, name in enumerate(names):
                    mb, size, cmb, value_size = self._minibatch(batches[name], chunks[name][m],
                                                                critic_batches and critic_batches[name],
                                                                critic_chunks and critic_chunks[name][m], shard)
                    moment = (advantage_moments(mb.advantages, size, ctx.comm) if cfg.norm_adv and size > 1
                              else no_norm)
                    if len(mb) or (cmb is not None and len(cmb.states)):  # else this rank's gradients stay zero
                        present.append(g)
                        parts.append((mb, size, cmb, value_size, moment))
                self.flat.grad.zero_()
                if present:
                    mbs, sizes, cmbs, value_sizes, moments = (list(x) for x in zip(*parts))
                    critics = [self.critics[names[g]] for g in present] if central else None
                    loss, stats = self.loss([self.nets[names[g]] for g in present], mbs, sizes, moments, self.coef,
                                            critics, cmbs if central else None, value_sizes)
                    loss.backward()
                    totals[present] += stats
                ctx.reduce_gradients([self.flat.grad])
                if cfg.max_grad_norm > 0:
                    self.flat.clip_(cfg.max_grad_norm)
                self.optimizer.step()
                steps += 1
        return ctx.comm.all_reduce_(totals / steps)

    def _minibatch(self, batch, chunk: torch.Tensor, critic_batch: CriticBatch | None,
                   critic_chunk: torch.Tensor | None, shard):
        """This rank's part of one group's minibatch: ``(actor samples, their global count, critic rows
        or None, the global count of values they predict)``."""
        if isinstance(batch, SequenceBatch):
            envs = shard.localize(chunk, 1)  # global env ids -> this shard's envs
            T, n = batch.starts.shape[0], batch.hidden.shape[0] // shard.size
            rows = (envs[:, None] * n + torch.arange(n, device=envs.device)).reshape(-1)
            mb = SequenceBatch(*(x.index_select(1, rows) for x in (batch.inputs, batch.actions, batch.log_prob,
                                                                   batch.advantages, batch.returns, batch.values)),
                               hidden=batch.hidden.index_select(0, rows), starts=batch.starts.index_select(1, rows))
            size = len(chunk) * T * n
            if critic_batch is None:
                return mb, size, None, size
            E = shard.size
            env_rows = (torch.arange(T, device=envs.device)[:, None] * E + envs[None, :]).reshape(-1)
            return mb, size, critic_batch.rows(env_rows), size
        mb = batch.rows(shard.localize(chunk, batch.agents))
        size = len(chunk)
        if critic_batch is None:
            return mb, size, None, size
        n = critic_batch.returns.shape[1]
        return mb, size, critic_batch.rows(shard.localize(critic_chunk, 1)), len(critic_chunk) * n


__all__ = ["LEARNING_BACKENDS", "PPOLearner", "central_values", "central_values_compiled", "values"]
