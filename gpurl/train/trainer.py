"""The trainer: rollout, advantages, PPO epochs x minibatches, top to bottom.

Everything a step touches is a device buffer allocated once (``RolloutStorage``): the policy writes
actions, log-probs and values into slot t, the env kernels write observations, rewards and done flags
into slot t (``env.step(..., out=storage.step_outputs(t))``), and the episode statistics accumulate on
the device. The rollout never reads device memory from the host; one read per iteration collects the
truncated steps (for their bootstrap values) and one per log interval the statistics.

The loop is three fragments (:mod:`.fragments`): actor and env per step, learner per iteration. A
:class:`~gpurl.train.placement.Placement` (one device by default; ``gpurl.multigpu`` for several)
decides which envs this rank steps, whether it learns, and what is communicated at the hooks
``before_rollout``, ``after_rollout``, ``reduce_gradients`` and ``after_learn``.
"""
from __future__ import annotations

import dataclasses
import math

import torch
from torch import nn

from ..envs import make, resolve_device
from ..fusion.actor_op import FusedActor
from ..fusion.graph import GraphedRollout
from .config import TrainConfig
from .fragments import ActorFragment, EnvFragment, LearnerFragment
from .host_memory import keep_freed_memory
from .metrics import EpisodeStats, PhaseTimer, nvtx_range
from .placement import Placement
from .policy import ActorCritic
from .ppo import STAT_NAMES
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
    """PPO/A2C on any gpurl env: one :class:`ActorCritic` per trained group, shared by its agents.

    ``cfg.num_envs`` is the global number of envs; ``placement`` says which of them this rank steps.
    """

    def __init__(self, config: TrainConfig, placement: Placement | None = None):
        cfg = self.config = config.validated()
        self.placement = placement = placement or Placement()
        self.device = placement.device or resolve_device(cfg.device)
        if cfg.torch_threads:
            torch.set_num_threads(cfg.torch_threads)
        if self.device.type == "cpu":
            keep_freed_memory()
        self.shard = placement.env_shard(cfg.num_envs)
        self.env = make(cfg.env, num_envs=self.shard.size, device=self.device, seed=cfg.seed, autoreset=True,
                        validate=False, env_id_offset=self.shard.lo, **cfg.env_params)
        groups = self.env.groups
        unknown = sorted(set(cfg.train_groups) - set(groups))
        if unknown:
            raise ValueError(f"train_groups names unknown group(s) {unknown}; {cfg.env} has {list(groups)}")
        self.trained = [g for g in groups if not cfg.train_groups or g in cfg.train_groups]
        torch.manual_seed(cfg.seed)  # parameter init: the same on every rank
        self.policies = nn.ModuleDict({
            name: ActorCritic(groups[name].obs_dim * cfg.frame_stack, groups[name].action_space, cfg.hidden,
                              cfg.activation, cfg.norm_obs)
            for name in self.trained
        }).to(self.device)
        # fused: one kernel for every parameter (4x faster than the per-tensor loop on the CPU).
        self.optimizer = torch.optim.Adam(self.policies.parameters(), lr=cfg.lr, eps=1e-5, fused=True)
        self.storage = self._storage(self.shard.size)
        # Two streams: the minibatch shuffle is drawn for the global rollout and must be identical on
        # every rank; Box-head and random acting sample this rank's envs only.
        self.generator = torch.Generator(self.device).manual_seed(cfg.seed)
        self.sample_generator = torch.Generator(self.device).manual_seed(cfg.seed + 1_000_003 * (1 + placement.rank))
        self.stats = EpisodeStats(self.shard.size, {n: g.agents for n, g in groups.items()},
                                  sorted(self.env.step_metrics()), self.device)
        self.timer = PhaseTimer(self.device)
        # Categorical groups act through the fused actor op (counter RNG keyed by seed, global agent id
        # and step: the same actions from the Triton kernel and its torch reference, however the envs
        # are split over ranks); Box groups sample with the generator.
        self.actors = {
            name: FusedActor(self.policies[name], cfg.activation, cfg.policy_backend, cfg.seed,
                             self.shard.lo, self.env.num_agents, groups[name].agents.start)
            for name in self.trained if hasattr(self.policies[name].dist, "nvec")
        }
        random_policies = {n: RandomPolicy(g.action_space, self.device) for n, g in groups.items()}
        self.actor = ActorFragment(groups, self.policies, self.actors, random_policies)
        self.env_fragment = EnvFragment(self.env, self.stats)
        learner_shard = placement.learner_shard(cfg.num_envs)
        self.learner = None
        self.learner_storage = None
        if learner_shard is not None:
            self.learner = LearnerFragment(cfg, groups, self.trained, self.policies, self.optimizer,
                                           learner_shard, placement)
            self.learner_storage = (self.storage if learner_shard == self.shard
                                    else self._storage(learner_shard.size))
        self.step_counter = torch.zeros(1, dtype=torch.int64, device=self.device)
        self.graphed = None
        if cfg.cuda_graph and self.device.type == "cuda" and set(self.actors) == set(groups):
            self.graphed = GraphedRollout(lambda: self._rollout_steps(timed=False))
        self.iteration = 0
        self.env_steps = 0
        with nvtx_range("reset"):
            self.storage.start(self.env.reset())
        placement.start(self)

    def _storage(self, num_envs: int) -> RolloutStorage:
        first = self.policies[self.trained[0]]
        return RolloutStorage(self.config.rollout_len, num_envs, self.env.num_agents, self.env.obs_dim,
                              first.action_dims, first.action_dtype, self.config.frame_stack - 1, self.device)

    # ---- one iteration ---------------------------------------------------------------------------

    def iterate(self) -> dict[str, torch.Tensor]:
        """Rollout, advantages, update. Returns per-group loss statistics (device tensors; the same on
        every rank)."""
        cfg = self.config
        if cfg.anneal_lr:
            for group in self.optimizer.param_groups:
                group["lr"] = cfg.lr * (1.0 - self.iteration / cfg.iters)
        self.placement.before_rollout(self)
        with nvtx_range("rollout"):
            self.rollout()
        with self.timer.phase("communicate"):
            self.placement.after_rollout(self)
        losses = {}
        if self.learner is not None:
            losses = self.learner.run(self.learner_storage, self.generator, self.timer)
        with self.timer.phase("communicate"):
            losses = self.placement.after_learn(self, losses)
        with self.timer.phase("learn"):
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
        s, env = self.storage, self.env_fragment
        phase = self.timer.phase if timed else (lambda name: nvtx_range(name))
        for t in range(s.steps):
            with phase("act"):
                self.actor.run(s, t, self.step_counter, self.sample_generator)
                self.step_counter += 1
            with phase("env"):
                env.step(s, t)
            with phase("bookkeeping"):
                env.bookkeeping(s, t)

    # ---- measuring a policy ----------------------------------------------------------------------

    @torch.no_grad()
    def evaluate(self, random: bool, min_episodes: int, seed: int, max_steps: int = 100_000) -> dict[str, float]:
        """Episode statistics of the current policies (``random=True``: every group uniformly random)
        on a fresh copy of this rank's envs seeded ``seed``, until ``min_episodes`` episodes have
        finished over all ranks (collective: every rank calls it).

        Training state (env, storage, generator, accumulators) is untouched. Reads the episode count
        from the device once per ``rollout_len`` steps.
        """
        cfg = self.config
        env = make(cfg.env, num_envs=self.shard.size, device=self.device, seed=seed, autoreset=True,
                   validate=False, env_id_offset=self.shard.lo, **cfg.env_params)
        s = RolloutStorage(1, self.shard.size, env.num_agents, env.obs_dim, self.storage.actions.shape[-1],
                           self.storage.actions.dtype, self.storage.history, self.device)
        stats = EpisodeStats(self.shard.size, self.stats.groups, self.stats.metric_names, self.device)
        stepper = EnvFragment(env, stats)
        generator = torch.Generator(self.device).manual_seed(seed + 1_000_003 * self.placement.rank)
        step_counter = torch.zeros(1, dtype=torch.int64, device=self.device)
        s.start(env.reset())
        results: dict[str, float] = {}
        for step in range(1, max_steps + 1):
            self.actor.run(s, 0, step_counter, generator, random=random, seed=seed)
            step_counter += 1
            stepper.step(s, 0)
            stepper.bookkeeping(s, 0)
            s.roll_over()
            if step % cfg.rollout_len == 0 or step == max_steps:
                results = merge_means(results, stats.read(comm=self.placement.comm))
                if results.get("episodes", 0) >= min_episodes:
                    break
        return results

    @torch.no_grad()
    def record_episode(self, seed: int, random: bool = False, max_steps: int = 10_000) -> tuple[object, list]:
        """One episode of the current policies on a fresh one-env copy of the env seeded ``seed``, as
        ``(env, frames)`` for :func:`gpurl.render.save_animation` (host copies of the state per step)."""
        from ..render import record_episode

        cfg = self.config
        env = make(cfg.env, num_envs=1, device=self.device, seed=seed, autoreset=False, validate=False,
                   **cfg.env_params)
        s = RolloutStorage(1, 1, env.num_agents, env.obs_dim, self.storage.actions.shape[-1],
                           self.storage.actions.dtype, self.storage.history, self.device)
        generator = torch.Generator(self.device).manual_seed(seed)
        step_counter = torch.zeros(1, dtype=torch.int64, device=self.device)
        s.start(env.reset())

        def step():
            self.actor.run(s, 0, step_counter, generator, random=random, seed=seed)
            step_counter.add_(1)
            env.step(s.actions[0], out=s.step_outputs(0))
            s.mark_starts(0)
            s.roll_over()  # moves observations only: the step's reward and flags stay in slot 0
            return None, s.reward[0], s.terminated[0], s.truncated[0]

        return env, record_episode(env, step, max_steps)

    def read_stats(self, min_episodes: int) -> dict[str, float]:
        """Episode statistics over all ranks since the last read (collective; see EpisodeStats.read)."""
        return self.stats.read(min_episodes=min_episodes, comm=self.placement.comm)

    # ---- checkpoint state --------------------------------------------------------------------------

    def state_dict(self) -> dict | None:
        """Everything needed to continue this run bit-identically (tensors on the CPU), with the env
        state of all ranks' envs in global order. Collective: every rank calls it; the main rank gets
        the dict, the others None."""
        self.placement.settle(self)
        s, H, comm = self.storage, self.storage.history, self.placement.comm
        env_state = {f.name: comm.gather_cat(getattr(self.env.state, f.name), 0)
                     for f in dataclasses.fields(self.env.state)}
        history_obs, history_starts = comm.gather_cat(s.obs[:H + 1], 1), comm.gather_cat(s.starts[:H + 1], 1)
        stats = self.stats.state_dict()
        running = comm.gather_cat(stats["running"], 0)
        totals = comm.all_reduce_(torch.cat([stats["done_sum"], stats["done_count"].view(1)]))
        if not self.placement.is_main:
            return None
        cpu = lambda t: t.cpu()  # noqa: E731
        return {
            "config": self.config.to_dict(), "iteration": self.iteration, "env_steps": self.env_steps,
            "policies": {k: cpu(v) for k, v in self.policies.state_dict().items()},
            "optimizer": self.optimizer.state_dict(), "generator": cpu(self.generator.get_state()),
            "sample_generator": cpu(self.sample_generator.get_state()), "step_counter": cpu(self.step_counter),
            "env_state": {k: cpu(v) for k, v in env_state.items()}, "history_obs": cpu(history_obs),
            "history_starts": cpu(history_starts),
            "episode_stats": {"running": cpu(running), "done_sum": cpu(totals[:-1]), "done_count": cpu(totals[-1])},
            "world_size": self.placement.world_size, "dist": self.placement.name,
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue from ``state`` (a checkpoint of a run with the same config, saved with any number of
        ranks: each rank takes its envs' slice of the global env state)."""
        s, H, lo, hi = self.storage, self.storage.history, self.shard.lo, self.shard.hi
        saved_envs = state["history_obs"].shape[1]
        if saved_envs != self.shard.total:
            raise ValueError(f"checkpoint holds {saved_envs} envs, this run has num_envs={self.shard.total}")
        for name, tensor in state["env_state"].items():
            getattr(self.env.state, name).copy_(tensor[lo:hi])
        s.obs[:H + 1].copy_(state["history_obs"][:, lo:hi])
        s.starts[:H + 1].copy_(state["history_starts"][:, lo:hi])
        self.policies.load_state_dict(state["policies"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
        if self.placement.is_main:  # other ranks keep their own acting stream
            self.sample_generator.set_state(state["sample_generator"])
        self.step_counter.copy_(state["step_counter"])
        for actor in self.actors.values():
            actor.sync()
        stats = state["episode_stats"]
        main = self.placement.is_main  # the finished-episode sums are counted once, on the main rank
        self.stats.load_state_dict({"running": stats["running"][lo:hi],
                                    "done_sum": stats["done_sum"] * main, "done_count": stats["done_count"] * main})
        self.iteration, self.env_steps = int(state["iteration"]), int(state["env_steps"])
        self.placement.start(self)

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
