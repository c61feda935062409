"""The trainer: rollout, advantages, PPO epochs x minibatches, top to bottom.

Everything a step touches is a device buffer allocated once (``RolloutStorage``): the policy writes
actions, log-probs and values into slot t, the env kernels write observations, rewards and done flags
into slot t (``env.step(..., out=storage.step_outputs(t))``), and the episode statistics accumulate on
the device. The rollout never reads device memory from the host; one read per iteration collects the
truncated steps (for their bootstrap values) and one per log interval the statistics.
"""
from __future__ import annotations

import dataclasses
import math

import torch
from torch import nn

from ..envs import make, resolve_device
from .config import TrainConfig
from ..fusion.gae import gae
from .metrics import EpisodeStats, PhaseTimer, nvtx_range
from .policy import ActorCritic
from .ppo import STAT_NAMES, GroupBatch, ppo_update
from ..fusion.actor_op import FusedActor
from ..fusion.graph import GraphedRollout
from .random_policy import RandomPolicy
from .storage import RolloutStorage


def merge_means(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    """Episode-weighted union of two ``EpisodeStats.read()`` results."""
    na, nb = a.get("episodes", 0.0), b.get("episodes", 0.0)
    if na + nb == 0:
        return {}
    out = {k: (a.get(k, 0.0) * na + b.get(k, 0.0) * nb) / (na + nb) for k in {*a, *b} if k != "episodes"}
    out["episodes"] = na + nb
    return out


class NonFiniteLossError(FloatingPointError):
    """A loss or statistic became NaN/Inf; the message names the iteration."""


class Trainer:
    """PPO/A2C on any gpurl env: one :class:`ActorCritic` per trained group, shared by its agents."""

    def __init__(self, config: TrainConfig):
        cfg = self.config = config.validated()
        self.device = resolve_device(cfg.device)
        if cfg.torch_threads:
            torch.set_num_threads(cfg.torch_threads)
        self.env = make(cfg.env, num_envs=cfg.num_envs, device=self.device, seed=cfg.seed, autoreset=True,
                        validate=False, **cfg.env_params)
        groups = self.env.groups
        unknown = sorted(set(cfg.train_groups) - set(groups))
        if unknown:
            raise ValueError(f"train_groups names unknown group(s) {unknown}; {cfg.env} has {list(groups)}")
        self.trained = [g for g in groups if not cfg.train_groups or g in cfg.train_groups]
        torch.manual_seed(cfg.seed)  # parameter init
        self.policies = nn.ModuleDict({
            name: ActorCritic(groups[name].obs_dim * cfg.frame_stack, groups[name].action_space, cfg.hidden,
                              cfg.activation, cfg.norm_obs)
            for name in self.trained
        }).to(self.device)
        self.optimizer = torch.optim.Adam(self.policies.parameters(), lr=cfg.lr, eps=1e-5)
        first = self.policies[self.trained[0]]
        self.storage = RolloutStorage(cfg.rollout_len, cfg.num_envs, self.env.num_agents, self.env.obs_dim,
                                      first.action_dims, first.action_dtype, cfg.frame_stack - 1, self.device)
        self.generator = torch.Generator(self.device).manual_seed(cfg.seed)
        self.stats = EpisodeStats(cfg.num_envs, {n: g.agents for n, g in groups.items()},
                                  sorted(self.env.step_metrics()), self.device)
        self.timer = PhaseTimer(self.device)
        self.random_policies = {n: RandomPolicy(g.action_space, self.device) for n, g in groups.items()}
        # Categorical groups act through the fused actor op (counter RNG keyed by seed, global agent id
        # and step: the same actions from the Triton kernel and its torch reference); Box groups sample
        # with the generator.
        self.actors = {
            name: FusedActor(self.policies[name], cfg.activation, cfg.policy_backend, cfg.seed,
                             self.env.env_id_offset, self.env.num_agents, groups[name].agents.start)
            for name in self.trained if hasattr(self.policies[name].dist, "nvec")
        }
        self.step_counter = torch.zeros(1, dtype=torch.int64, device=self.device)
        self.graphed = None
        if cfg.cuda_graph and self.device.type == "cuda" and set(self.actors) == set(groups):
            self.graphed = GraphedRollout(lambda: self._rollout_steps(timed=False))
        self.iteration = 0
        self.env_steps = 0
        self.storage.start(self.env.reset())

    # ---- one iteration ---------------------------------------------------------------------------

    def iterate(self) -> dict[str, torch.Tensor]:
        """Rollout, advantages, update. Returns per-group loss statistics (device tensors)."""
        cfg = self.config
        if cfg.anneal_lr:
            for group in self.optimizer.param_groups:
                group["lr"] = cfg.lr * (1.0 - self.iteration / cfg.iters)
        with nvtx_range("rollout"):
            self.rollout()
        with self.timer.phase("advantages"):
            self.compute_advantages()
        with self.timer.phase("learn"):
            batches = self.group_batches()
            losses = ppo_update(self.policies, self.optimizer, batches, cfg, self.generator)
            if cfg.norm_obs:  # for the next rollout; this one's update saw the statistics it acted on
                for name, batch in batches.items():
                    self.policies[name].obs_norm.update(batch.inputs)
            for actor in self.actors.values():  # the rollout reads weights from static buffers
                actor.sync()
        self.storage.roll_over()
        self.iteration += 1
        self.env_steps += cfg.num_envs * cfg.rollout_len
        return losses

    def rollout(self) -> None:
        """T steps of act + env + bookkeeping; on CUDA (``cuda_graph``) one graph replay after warm-up,
        timed as one phase ("rollout") since a graph has no per-phase boundaries."""
        if self.graphed is None:
            self._rollout_steps(timed=True)
            return
        with self.timer.phase("rollout"):
            self.graphed()

    def _rollout_steps(self, timed: bool) -> None:
        s, env = self.storage, self.env
        phase = self.timer.phase if timed else (lambda name: nvtx_range(name))
        for t in range(s.steps):
            with phase("act"):
                self.act(s, t, self.generator, self.step_counter)
                self.step_counter += 1
            with phase("env"):
                env.step(s.actions[t], out=s.step_outputs(t))
            with phase("bookkeeping"):
                s.mark_starts(t)
                self.stats.update(s.reward[t], s.terminated[t], s.truncated[t], env.step_metrics())

    def act(self, s: RolloutStorage, t: int, generator: torch.Generator, step: torch.Tensor,
            random: bool = False, seed: int | None = None) -> None:
        """Actions, log-probs and values of step t for every group, into slot t (``step``: int64 [1]
        on the device, the counter RNG's step; ``seed`` overrides the run's for evaluation)."""
        for name, group in self.env.groups.items():
            agents = group.agents
            if random or name not in self.policies:
                s.actions[t, :, agents] = self.random_policies[name](s.actions[t, :, agents].shape, generator)
                continue
            x = s.policy_input(t, t + 1, agents, group.obs_dim)[0]
            if name in self.actors:
                self.actors[name](x, step, s.actions[t, :, agents], s.log_prob[t, :, agents], s.value[t, :, agents],
                                  seed)
                continue
            E, n, _ = x.shape
            action, log_prob, value = self.policies[name].act(x.reshape(E * n, -1), generator)
            s.actions[t, :, agents] = action.view(E, n, -1)
            s.log_prob[t, :, agents] = log_prob.view(E, n)
            s.value[t, :, agents] = value.view(E, n)

    @torch.no_grad()
    def compute_advantages(self) -> None:
        s, cfg = self.storage, self.config
        T = s.steps
        s.final_value.zero_()
        # The one host read of the iteration: which (t, e) were cut by the time limit.
        ended_t, ended_e = s.truncated.nonzero(as_tuple=True)  # host-ok: after the rollout
        for name in self.trained:
            group = self.env.groups[name]
            policy, agents = self.policies[name], group.agents
            x = s.policy_input(T, T + 1, agents, group.obs_dim)[0]
            s.value[T, :, agents] = policy.value(x.reshape(-1, x.shape[-1])).view(x.shape[:2])
            if len(ended_t):
                xf = s.final_input(ended_t, ended_e, agents, group.obs_dim)
                s.final_value[ended_t, ended_e, agents] = policy.value(xf.reshape(-1, xf.shape[-1])).view(xf.shape[:2])
        backend = {"auto": "auto", "torch": "torch", "fused": "triton"}[cfg.policy_backend]
        s.advantages, s.returns = gae(s.reward, s.value, s.final_value, s.terminated, s.truncated,
                                      cfg.gamma, cfg.gae_lambda, backend=backend)

    def group_batches(self) -> dict[str, GroupBatch]:
        s = self.storage
        batches = {}
        for name in self.trained:
            group = self.env.groups[name]
            a = group.agents
            inputs = s.policy_input(0, s.steps, a, group.obs_dim)
            batches[name] = GroupBatch(
                inputs=inputs.reshape(-1, inputs.shape[-1]), actions=s.actions[:, :, a].reshape(-1, s.actions.shape[-1]),
                log_prob=s.log_prob[:, :, a].reshape(-1), advantages=s.advantages[:, :, a].reshape(-1),
                returns=s.returns[:, :, a].reshape(-1), values=s.value[:-1, :, a].reshape(-1))
        return batches

    # ---- measuring a policy ----------------------------------------------------------------------

    @torch.no_grad()
    def evaluate(self, random: bool, min_episodes: int, seed: int, max_steps: int = 100_000) -> dict[str, float]:
        """Episode statistics of the current policies (``random=True``: every group uniformly random)
        on a fresh copy of the env seeded ``seed``, until ``min_episodes`` episodes have finished.

        Training state (env, storage, generator, accumulators) is untouched. Reads the episode count
        from the device once per ``rollout_len`` steps.
        """
        cfg = self.config
        env = make(cfg.env, num_envs=cfg.num_envs, device=self.device, seed=seed, autoreset=True,
                   validate=False, **cfg.env_params)
        s = RolloutStorage(1, cfg.num_envs, env.num_agents, env.obs_dim, self.storage.actions.shape[-1],
                           self.storage.actions.dtype, self.storage.history, self.device)
        stats = EpisodeStats(cfg.num_envs, self.stats.groups, self.stats.metric_names, self.device)
        generator = torch.Generator(self.device).manual_seed(seed)
        step_counter = torch.zeros(1, dtype=torch.int64, device=self.device)
        s.start(env.reset())
        results: dict[str, float] = {}
        for step in range(1, max_steps + 1):
            self.act(s, 0, generator, step_counter, random=random, seed=seed)
            step_counter += 1
            env.step(s.actions[0], out=s.step_outputs(0))
            s.mark_starts(0)
            stats.update(s.reward[0], s.terminated[0], s.truncated[0], env.step_metrics())
            s.roll_over()
            if step % cfg.rollout_len == 0 or step == max_steps:
                results = merge_means(results, stats.read())
                if results.get("episodes", 0) >= min_episodes:
                    break
        return results

    # ---- checkpoint state --------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """Everything needed to continue this run bit-identically (tensors on the CPU)."""
        s, H = self.storage, self.storage.history
        env_state = {f.name: getattr(self.env.state, f.name).cpu() for f in dataclasses.fields(self.env.state)}
        return {
            "config": self.config.to_dict(), "iteration": self.iteration, "env_steps": self.env_steps,
            "policies": {k: v.cpu() for k, v in self.policies.state_dict().items()},
            "optimizer": self.optimizer.state_dict(), "generator": self.generator.get_state().cpu(),
            "step_counter": self.step_counter.cpu(),
            "env_state": env_state, "history_obs": s.obs[:H + 1].cpu(), "history_starts": s.starts[:H + 1].cpu(),
            "episode_stats": {k: v.cpu() for k, v in self.stats.state_dict().items()},
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue from ``state`` (a checkpoint of a run with the same config)."""
        s, H = self.storage, self.storage.history
        for name, tensor in state["env_state"].items():
            getattr(self.env.state, name).copy_(tensor)
        s.obs[:H + 1].copy_(state["history_obs"])
        s.starts[:H + 1].copy_(state["history_starts"])
        self.policies.load_state_dict(state["policies"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
        self.step_counter.copy_(state["step_counter"])
        for actor in self.actors.values():
            actor.sync()
        self.stats.load_state_dict(state["episode_stats"])
        self.iteration, self.env_steps = int(state["iteration"]), int(state["env_steps"])

    # ---- reading results (host reads: once per log interval) -------------------------------------

    def read_losses(self, losses: dict[str, torch.Tensor]) -> dict[str, float]:
        """Loss statistics as floats; raises NonFiniteLossError naming the iteration on NaN/Inf."""
        out = {}
        for name, stats in losses.items():
            values = stats.tolist()  # host-ok: once per iteration, after the update
            for stat, v in zip(STAT_NAMES, values):
                out[f"{stat}/{name}"] = v
            bad = [stat for stat, v in zip(STAT_NAMES, values) if not math.isfinite(v)]
            if bad:
                raise NonFiniteLossError(f"iteration {self.iteration}: non-finite {', '.join(bad)} in group "
                                         f"{name!r} ({dict(zip(STAT_NAMES, values))}); stopping the run")
        return out
