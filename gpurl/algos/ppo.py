"""PPO and A2C: the first algorithm plug-ins (see :mod:`gpurl.algos.base`).

One :class:`~.nets.ActorCritic` per trained group, shared by the group's agents.
- Actor fragment: :class:`~.acting.Acting` writes every group's actions, log-probs and values at
  slot t (fused Triton kernel, compiled or eager torch: all one definition, ``ActorCritic.act``).
- Learner fragment: GAE(lambda) that bootstraps truncated episodes from the value of their final
  observation and not terminated ones; then epochs x minibatches of :func:`~.ppo_loss.ppo_loss`
  (eager or compiled), every group's gradients summed by the distribution policy, each group's
  gradient norm clipped on its own, one Adam step.

Minibatches are drawn from the *global* rollout (all envs of all ranks, flattened over [T, E, n]) by
a generator every rank holds in the same state; a rank trains on the members of each minibatch that
fall in its env shard, every mean is a sum divided by the global minibatch size, and the distribution
policy sums gradients and moments over ranks. So the update is the same arithmetic however the envs
are split: data-parallel on two ranks gives the parameters single-device training gives.

A2C is PPO with one epoch, one minibatch and no clipping.
"""
from __future__ import annotations

import torch
from torch import nn

from ..fusion.counter_rng import seed_tensor
from ..fusion.gae import gae
from ..profiling import nvtx_range
from .acting import Acting
from .base import Algorithm, EnvSpec, Field, LearnContext
from .compiling import compile_step
from .flat import FlatParameters
from .nets import ActorCritic
from .ppo_loss import STAT_NAMES, GroupBatch, LossCoefficients, advantage_moments, groups_loss

LEARNING_BACKENDS = ("auto", "eager", "compiled")

_groups_loss_compiled = compile_step(groups_loss)


def values(nets: list[ActorCritic], inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Every group's value of its input rows [B, in_dim] -> [B], in one call."""
    return [net.value(x) for net, x in zip(nets, inputs)]


_values_compiled = compile_step(values)


class PPOActor:
    """Every trained group's policy at step t (untrained groups are the trainer's)."""

    inputs = ("obs[H + t]", "starts")
    outputs = ("actions[t]", "log_prob[t]", "value[t]")

    def __init__(self, groups, acting: Acting):
        self.groups, self.acting = groups, acting

    def run(self, s, t: int, step: torch.Tensor, seed: torch.Tensor | None = None) -> None:
        inputs, outputs = {}, {}
        for name in self.acting.policies:
            group = self.groups[name]
            a = group.agents
            inputs[name] = s.policy_input(t, t + 1, a, group.obs_dim)[0]
            outputs[name] = (s.actions[t, :, a], s.log_prob[t, :, a], s.value[t, :, a])
        self.acting(inputs, step, outputs, seed)


class PPOLearner:
    """Advantages and the PPO update over a whole rollout storage."""

    inputs = ("obs", "starts", "final_obs", "reward", "terminated", "truncated", "actions", "log_prob", "value")
    outputs = ("weights", "statistics")

    def __init__(self, cfg, groups, nets: nn.ModuleDict, optimizer: torch.optim.Optimizer, flat: FlatParameters,
                 backend: str):
        self.cfg, self.groups, self.nets, self.optimizer, self.flat = cfg, groups, nets, optimizer, flat
        self.coef = LossCoefficients(cfg.clip_coef, cfg.clip_vloss, cfg.vf_coef, cfg.ent_coef)
        self.loss = _groups_loss_compiled if backend == "compiled" else groups_loss
        self.values = _values_compiled if backend == "compiled" else values
        self._final_value: torch.Tensor | None = None

    def run(self, s, ctx: LearnContext) -> torch.Tensor:
        with ctx.timer.phase("advantages"):
            advantages, returns = self.advantages(s)
        with ctx.timer.phase("learn"):
            batches = self.group_batches(s, advantages, returns)
            stats = self.update(batches, ctx)
            if self.cfg.norm_obs:  # for the next rollout; this one's update saw the statistics it acted on
                for name, batch in batches.items():
                    self.nets[name].obs_norm.update(batch.inputs, ctx.comm)
        return stats

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
        nets = list(self.nets.values())
        agents = [self.groups[name].agents for name in self.nets]
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
        backend = {"eager": "torch", "triton": "triton"}.get(cfg.policy_backend, "auto")
        with nvtx_range("gae"):
            return gae(s.reward, s.value, final_value, s.terminated, s.truncated, cfg.gamma, cfg.gae_lambda,
                       backend=backend)

    @torch.no_grad()
    def group_batches(self, s, advantages: torch.Tensor, returns: torch.Tensor) -> dict[str, GroupBatch]:
        """Each group's samples with its inputs normalised once: the statistics are fixed during an
        update (they move after it, see :meth:`run`)."""
        batches = {}
        for name, net in self.nets.items():
            group = self.groups[name]
            a = group.agents
            inputs = s.policy_input(0, s.steps, a, group.obs_dim)
            batches[name] = GroupBatch(
                inputs=net.normalize(inputs.reshape(-1, inputs.shape[-1])),
                actions=s.actions[:, :, a].reshape(-1, s.actions.shape[-1]),
                log_prob=s.log_prob[:, :, a].reshape(-1), advantages=advantages[:, :, a].reshape(-1),
                returns=returns[:, :, a].reshape(-1), values=s.value[:-1, :, a].reshape(-1),
                agents=a.stop - a.start)
        return batches

    def update(self, batches: dict[str, GroupBatch], ctx: LearnContext) -> torch.Tensor:
        """Epochs x minibatches over every group's batch; returns the mean statistics per group,
        float32 [groups, len(STAT_NAMES)], the same on every rank."""
        cfg, shard = self.cfg, ctx.shard
        names = list(batches)
        # Samples per group over all ranks: this rank's rows hold shard.size of the shard.total envs.
        sizes = {name: len(b) // shard.size * shard.total for name, b in batches.items()}
        device = self.flat.grad.device
        totals = torch.zeros(len(names), len(STAT_NAMES), device=device)
        no_norm = (torch.zeros((), device=device), torch.ones((), device=device))
        steps = 0
        for _ in range(cfg.epochs):
            chunks = {name: torch.randperm(sizes[name], device=device, generator=ctx.generator).tensor_split(cfg.minibatches)
                      for name in names}
            for m in range(cfg.minibatches):
                present, mbs, mb_sizes, moments = [], [], [], []
                for g, name in enumerate(names):
                    chunk = chunks[name][m]
                    mb = batches[name].rows(shard.localize(chunk, batches[name].agents))
                    size = len(chunk)
                    moment = (advantage_moments(mb.advantages, size, ctx.comm) if cfg.norm_adv and size > 1
                              else no_norm)
                    if len(mb):  # a rank may hold none of a minibatch: its gradients stay zero
                        present.append(g)
                        mbs.append(mb)
                        mb_sizes.append(size)
                        moments.append(moment)
                self.flat.grad.zero_()
                if present:
                    loss, stats = self.loss([self.nets[names[g]] for g in present], mbs, mb_sizes, moments, self.coef)
                    loss.backward()
                    totals[present] += stats
                ctx.reduce_gradients([self.flat.grad])
                if cfg.max_grad_norm > 0:
                    self.flat.clip_(cfg.max_grad_norm)
                self.optimizer.step()
                steps += 1
        return ctx.comm.all_reduce_(totals / steps)


class PPO(Algorithm):
    """Proximal policy optimisation (clipped surrogate, GAE), one actor-critic per trained group."""

    name = "ppo"
    stat_names = STAT_NAMES

    def __init__(self, config, spec: EnvSpec, trained: list[str], seed: int, generator: torch.Generator):
        cfg = self.config = config
        self.spec, self.trained = spec, trained
        groups = spec.groups
        self.nets = nn.ModuleDict({
            name: ActorCritic(groups[name].obs_dim * cfg.frame_stack, groups[name].action_space, cfg.hidden,
                              cfg.activation, cfg.norm_obs, generator)
            for name in trained
        }).to(spec.device)
        self.flat = FlatParameters(self.nets)
        # One flat parameter, fused: the whole step is one kernel.
        self.optimizer = torch.optim.Adam([self.flat.param], lr=cfg.lr, eps=1e-5, fused=True)
        self.acting = Acting({name: self.nets[name] for name in trained},
                             {name: groups[name].agents.start for name in trained}, cfg.policy_backend,
                             seed_tensor(seed, spec.device), spec.env_offset, spec.num_agents)
        if cfg.learner_backend not in LEARNING_BACKENDS:
            raise ValueError(f"learner_backend must be one of {LEARNING_BACKENDS}, got {cfg.learner_backend!r}")
        self.learning_backend = "eager" if cfg.learner_backend == "eager" else "compiled"
        self.actor = PPOActor(groups, self.acting)
        self.learner = PPOLearner(cfg, groups, self.nets, self.optimizer, self.flat, self.learning_backend)

    def fields(self) -> dict[str, Field]:
        return {"log_prob": Field(), "value": Field(extra_steps=1)}

    def weights(self) -> list[torch.Tensor]:
        return [self.flat.param, *self.nets.buffers()]  # the parameters are views of the flat one

    def sync_actors(self) -> None:
        self.acting.sync()

    def backends(self) -> dict[str, str]:
        acting = sorted(set(self.acting.backends.values()))
        return {"acting": "/".join(acting) or "none", "learning": self.learning_backend}


class A2C(PPO):
    """Advantage actor-critic: PPO's loss with one epoch, one minibatch and no clipping."""

    name = "a2c"

    @classmethod
    def adjust_config(cls, config):
        config.epochs, config.minibatches, config.clip_coef, config.clip_vloss = 1, 1, 0.0, False
        return config


__all__ = ["A2C", "LEARNING_BACKENDS", "PPO"]
