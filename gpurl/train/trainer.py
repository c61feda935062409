"""The trainer: rollout, then the algorithm's learner, top to bottom, over the algorithm interface.

Everything a step touches is a device buffer allocated once (``RolloutStorage``): the algorithm's
actor writes actions and its declared fields into slot t, the env kernels write observations, rewards
and done flags into slot t (``env.step(..., out=storage.step_outputs(t))``), and the episode
statistics accumulate on the device. The rollout never reads device memory from the host.

The trainer knows an algorithm only through :class:`gpurl.algos.Algorithm` (fields, actor fragment,
learner fragment, weights, checkpoint state) and a distribution policy only through
:class:`gpurl.multigpu.Placement` (which envs this rank steps, whether it learns, and what crosses
between ranks at ``before_rollout``, ``after_rollout``, ``reduce_gradients`` and ``after_learn``).
It changes no process-wide setting (threads, allocator, global seeds): the entry point does
(:mod:`gpurl.train.process`).
"""
from __future__ import annotations

import dataclasses
import math
import warnings

import gymnasium
import torch

from ..algos import ALGORITHMS, EnvSpec, LearnContext
from ..envs import make, resolve_device
from ..envs.checks import derived_seed
from ..envs.params import ParameterError
from ..fusion.counter_rng import seed_tensor
from ..fusion.graph import GraphCaptureFailed, GraphedCall, GraphedRollout
from ..multigpu.minibatches import LearnerBatches
from ..multigpu.placement import Placement
from ..profiling import nvtx_range
from ..storage import ReplayBuffer, RolloutStorage, rollout_transitions
from .config import TrainConfig
from .fragments import EnvFragment, RandomActor
from .metrics import EpisodeStats, PhaseTimer, UntimedPhases
from .network_memory import check_networks_fit
from .process import matmul_precision


def merge_means(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    """Episode-weighted union of two ``EpisodeStats.read()`` results."""
    na, nb = a.get("episodes", 0.0), b.get("episodes", 0.0)
    if na + nb == 0:
        return {}
    out = {k: (a.get(k, 0.0) * na + b.get(k, 0.0) * nb) / (na + nb) for k in {*a, *b} if k != "episodes"}
    out["episodes"] = na + nb
    return out



def refuse_mixed_box_widths(groups: dict, env_name: str) -> None:
    """Policies write each group's actions into one [T, E, N, D] buffer at full width D; groups whose Box
    actions are narrower than D (mpe2's speaker and listener, continuous) are not trainable yet."""
    widths = {name: g.action_space.shape[0] for name, g in groups.items()
              if isinstance(g.action_space, gymnasium.spaces.Box)}
    if len(set(widths.values())) > 1:
        raise ParameterError(f"{env_name}: groups have Box actions of different widths {widths}; training such an env "
                         "is not supported yet (train it with continuous_actions=False)")

class NonFiniteLossError(FloatingPointError):
    """A loss or statistic became NaN/Inf; the message names the iteration."""


class Trainer:
    """Any registered algorithm on any gpurl env; ``cfg.num_envs`` is the global number of envs and
    ``placement`` says which of them this rank steps and whether it learns."""

    def __init__(self, config: TrainConfig, placement: Placement | None = None):
        cfg = self.config = config.validated()
        self.placement = placement = placement or Placement()
        self.device = placement.device or resolve_device(cfg.device)
        self.shard = placement.env_shard(cfg.num_envs)
        # The env writes its global state only for an algorithm that reads it (it costs simple_tag ~15%).
        self.reads_global_state = ALGORITHMS[cfg.algo].reads_global_state
        self.env = make(cfg.env, num_envs=self.shard.size, device=self.device, seed=cfg.seed, autoreset=True,
                        validate=False, env_id_offset=self.shard.lo, global_state=self.reads_global_state,
                        **cfg.env_params)
        groups = self.env.groups
        refuse_mixed_box_widths(groups, cfg.env)
        unknown = sorted(set(cfg.train_groups) - set(groups))
        if unknown:
            raise ParameterError(f"train_groups names unknown group(s) {unknown}; {cfg.env} has {list(groups)}")
        self.trained = [g for g in groups if not cfg.train_groups or g in cfg.train_groups]
        check_networks_fit(cfg, {g: groups[g] for g in self.trained}, self.device)
        spec = EnvSpec.of(self.env, env_offset=self.shard.lo)
        # Initial weights from a generator of their own: the same on every rank, no global seed set.
        init = torch.Generator().manual_seed(cfg.seed)
        self.algo = ALGORITHMS[cfg.algo](cfg, spec, self.trained, cfg.seed, init)
        self.storage = self._storage(self.shard.size)
        # Two streams: the minibatch shuffle is drawn for the global rollout and must be identical on
        # every rank; random acting samples this rank's envs only.
        self.generator = torch.Generator(self.device).manual_seed(cfg.seed)
        self.sample_generator = torch.Generator(self.device).manual_seed(
            derived_seed(cfg.seed, 1_000_003 * (1 + placement.rank)))
        self.stats = EpisodeStats(self.shard.size, {n: g.agents for n, g in groups.items()},
                                  sorted(self.env.step_metrics()), self.device, self._bookkeeping_backend())
        self.timer = PhaseTimer(self.device)
        self.random_actor = RandomActor({n: g for n, g in groups.items() if n not in self.trained}, self.device)
        self.baseline_actor = RandomActor(dict(groups), self.device)
        self.env_fragment = EnvFragment(self.env, self.stats)
        learner_shard = placement.learner_shard(cfg.num_envs)
        self.learn_context = None
        self.learner_storage = None
        self.replay = None
        self.step_counter = torch.zeros(1, dtype=torch.int64, device=self.device)
        #: int64 [1]: iterations done (the learners' schedules read it on the device; ``iteration`` is the host's)
        self.iteration_counter = torch.zeros(1, dtype=torch.int64, device=self.device)
        if learner_shard is not None:
            if self.algo.uses_replay:  # on every learner rank: the transitions of the envs it learns from
                self.replay = self._replay(learner_shard.size)
            self.learn_context = LearnContext(LearnerBatches(learner_shard), placement.learner_comm(cfg.num_envs),
                                              placement.reduce_gradients, self.generator, self.timer,
                                              replay=self.replay, step=self.step_counter,
                                              iteration=self.iteration_counter)
            self.learner_storage = (self.storage if learner_shard == self.shard
                                    else self._storage(learner_shard.size))
            self._untimed_context = dataclasses.replace(self.learn_context, timer=UntimedPhases())
            prepare = getattr(self.algo.learner, "prepare", None)
            if prepare is not None:  # the update's buffers: allocated (and their memory checked) now
                prepare(self.learner_storage, self.learn_context)
        # On CUDA: the whole iteration as one graph where it is device work alone (one device, an update that
        # reads no host value); else the rollout as one graph and the update launched as it runs.
        self.graphed = self.graphed_iteration = None
        if cfg.cuda_graph and self.device.type == "cuda" and not self.random_actor.groups:
            if placement.world_size == 1 and self.algo.graph_safe_update:
                self.graphed_iteration = GraphedCall(self._device_iteration, name="training iteration")
            else:
                self.graphed = GraphedRollout(lambda: self._rollout_steps(timed=False))
        self.iteration = 0
        self.env_steps = 0
        with nvtx_range("reset"):
            self.storage.start(self.env.reset(), self.env.global_state)
        self._weights_changed(placement.start(self.algo.weights()))

    def _bookkeeping_backend(self) -> str:
        """Eager acting keeps the rollout's bookkeeping eager too (nothing compiles at start)."""
        return "eager" if self.config.algo_params.policy_backend == "eager" else "auto"

    def _storage(self, num_envs: int, steps: int | None = None, env=None) -> RolloutStorage:
        env = env or self.env
        return RolloutStorage(steps or self.config.rollout_len, num_envs, env.num_agents, env.obs_dim,
                              env.action_dims, env.action_dtype, self.config.algo_params.frame_stack - 1, self.device,
                              self.algo.fields(), env.global_state_dim if self.reads_global_state else 0)

    def _replay(self, num_envs: int) -> ReplayBuffer:
        env, params = self.env, self.algo.params
        return ReplayBuffer(params.replay_capacity, num_envs, env.num_agents, env.obs_dim * params.frame_stack,
                            env.action_dims, env.action_dtype, self.device,
                            env.global_state_dim if self.reads_global_state else 0)

    def _weights_changed(self, changed: bool) -> None:
        if changed:
            self.algo.sync_actors()

    def backends(self) -> str:
        """One line naming what runs acting, learning and the env kernels (and, on CUDA, what a CUDA graph
        captures and the float32 matmul precision)."""
        b = self.algo.backends()
        line = (f"backends: acting={b.get('acting', '?')} learning={b.get('learning', '?')} "
                f"env={self.env.launch_path}")
        if self.device.type == "cuda":
            graph = "iteration" if self.graphed_iteration else "rollout" if self.graphed else "none"
            line += f"; cuda_graph={graph} matmul={matmul_precision()}"
        return line

    # ---- one iteration ---------------------------------------------------------------------------

    def iterate(self) -> torch.Tensor:
        """Rollout, then the learner. Returns its statistics float32 [groups, len(stat_names)] (device
        tensor; the same on every rank). Queues device work and reads nothing back."""
        if self.graphed_iteration is not None:
            with self.timer.phase("iteration"):  # a graph has no phases inside
                try:
                    stats = self.graphed_iteration()
                except GraphCaptureFailed as err:
                    warnings.warn(f"{err}; the run goes on without the graph")
                    self.graphed_iteration = None
                    stats = self._device_iteration()
        else:
            stats = self._iteration()
        self.iteration += 1
        self.env_steps += self.config.num_envs * self.config.rollout_len
        return stats

    def _device_iteration(self) -> torch.Tensor:
        """One iteration on one device as device work alone, what a CUDA graph captures: the rollout, the
        learner (no phase timers: events cannot be timed inside a graph), the weights to the actors."""
        self._rollout_steps(timed=False)
        stats = self.algo.learner.run(self.learner_storage, self._untimed_context)
        self.algo.sync_actors()  # the rollout reads weights from static buffers
        self.storage.roll_over()
        self.iteration_counter += 1
        return stats

    def _iteration(self) -> torch.Tensor:
        cfg, p, weights = self.config, self.placement, self.algo.weights()
        self._weights_changed(p.before_rollout(self.iteration, weights))
        with nvtx_range("rollout"):
            self.rollout()
        with self.timer.phase("communicate"):
            p.after_rollout(self.iteration, self.storage.buffers(),
                            None if self.learner_storage is None else self.learner_storage.buffers())
        stats = torch.zeros(len(self.trained), len(self.algo.stat_names), device=self.device)
        if self.learn_context is not None:
            if self.replay is not None:
                with self.timer.phase("replay"):
                    self.replay.insert(**rollout_transitions(self.learner_storage, self.env.obs_dim))
            stats = self.algo.learner.run(self.learner_storage, self.learn_context)
        with self.timer.phase("communicate"):
            stats, changed = p.after_learn(self.iteration, weights, stats)
        with self.timer.phase("learn"):
            self.algo.sync_actors()  # the rollout reads weights from static buffers
        self.storage.roll_over()
        self.iteration_counter += 1
        return stats

    def rollout(self) -> None:
        """T steps of act + env + bookkeeping; on CUDA (``cuda_graph``) one graph replay after warm-up,
        timed as one phase ("rollout") since a graph has no per-phase boundaries."""
        if self.graphed is None:
            self._rollout_steps(timed=True)
            return
        with self.timer.phase("rollout"):
            self.graphed()

    def _act(self, s: RolloutStorage, t: int, step: torch.Tensor, generator: torch.Generator,
             random: bool = False, seed: torch.Tensor | None = None) -> None:
        if random:
            self.baseline_actor.run(s, t, generator)
            return
        self.random_actor.run(s, t, generator)
        self.algo.actor.run(s, t, step, seed)

    def _rollout_steps(self, timed: bool) -> None:
        s, env = self.storage, self.env_fragment
        phase = self.timer.phase if timed else (lambda name: nvtx_range(name))
        for t in range(s.steps):
            with phase("act"):
                self._act(s, t, self.step_counter, self.sample_generator)
            with phase("env"):
                env.step(s, t)
            with phase("bookkeeping"):  # the step counter moves on here
                env.bookkeeping(s, t, self.step_counter)

    # ---- measuring a policy ----------------------------------------------------------------------

    @torch.no_grad()
    def evaluate(self, random: bool, min_episodes: int, seed: int, max_steps: int = 100_000) -> dict[str, float]:
        """Episode statistics of the current policies (``random=True``: every group uniformly random)
        on a fresh copy of this rank's envs seeded ``seed``, until ``min_episodes`` episodes have
        finished over all ranks (collective: every rank calls it).

        Training state (env, storage, generators, accumulators) is untouched. Reads the episode count
        from the device once per ``rollout_len`` steps.
        """
        cfg = self.config
        env = make(cfg.env, num_envs=self.shard.size, device=self.device, seed=seed, autoreset=True,
                   validate=False, env_id_offset=self.shard.lo, global_state=self.reads_global_state,
                   **cfg.env_params)
        s = self._storage(self.shard.size, steps=1, env=env)
        stats = EpisodeStats(self.shard.size, self.stats.groups, self.stats.metric_names, self.device,
                             self._bookkeeping_backend())
        stepper = EnvFragment(env, stats)
        generator = torch.Generator(self.device).manual_seed(derived_seed(seed, 1_000_003 * self.placement.rank))
        step_counter = torch.zeros(1, dtype=torch.int64, device=self.device)
        policy_seed = seed_tensor(seed, self.device)
        s.start(env.reset(), env.global_state)
        results: dict[str, float] = {}
        for step in range(1, max_steps + 1):
            self._act(s, 0, step_counter, generator, random=random, seed=policy_seed)
            stepper.step(s, 0)
            stepper.bookkeeping(s, 0, step_counter)
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
                   global_state=self.reads_global_state, **cfg.env_params)
        s = self._storage(1, steps=1, env=env)
        generator = torch.Generator(self.device).manual_seed(seed)
        step_counter = torch.zeros(1, dtype=torch.int64, device=self.device)
        policy_seed = seed_tensor(seed, self.device)
        s.start(env.reset(), env.global_state)

        def step():
            self._act(s, 0, step_counter, generator, random=random, seed=policy_seed)
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
        self._weights_changed(self.placement.settle(self.algo.weights()))
        s, H, comm = self.storage, self.storage.history, self.placement.comm
        env_state = {f.name: comm.gather_cat(getattr(self.env.state, f.name), 0)
                     for f in dataclasses.fields(self.env.state)}
        history_obs, history_starts = comm.gather_cat(s.obs[:H + 1], 1), comm.gather_cat(s.starts[:H + 1], 1)
        # What slot 0 of the next rollout continues from: the global state, recurrent states.
        carried = {name: comm.gather_cat(getattr(s, name)[0], 0) for name in self._carried_buffers()}
        stats = self.stats.state_dict()
        running = comm.gather_cat(stats["running"], 0)
        totals = comm.all_reduce_(torch.cat([stats["done_sum"], stats["done_count"].view(1)]))
        replay = self._replay_state()
        if not self.placement.is_main:
            return None
        return _to_cpu({
            "config": self.config.to_dict(), "iteration": self.iteration, "env_steps": self.env_steps,
            "algorithm": self.config.algo, "algo_state": self.algo.state_dict(),
            "generator": self.generator.get_state(), "sample_generator": self.sample_generator.get_state(),
            "step_counter": self.step_counter, "env_state": env_state, "history_obs": history_obs,
            "history_starts": history_starts, "carried": carried,
            "episode_stats": {"running": running, "done_sum": totals[:-1], "done_count": totals[-1]},
            "world_size": self.placement.world_size, "dist": self.placement.name, "replay": replay,
        })

    def _replay_state(self) -> dict | None:
        """The replay buffer's checkpoint state, its envs in global order: gathered from every rank under
        data_parallel (collective there), rank 0's own under central_learner; None without a buffer."""
        if self.replay is None:
            return None
        state = self.replay.state_dict(contents=self.algo.params.replay_in_checkpoint)
        if "buffers" in state and self.learn_context.batches.shard == self.shard:  # each rank holds its own envs
            state["buffers"] = {k: self.placement.comm.gather_cat(v, 1) for k, v in state["buffers"].items()}
        return state

    def _load_replay(self, state: dict) -> None:
        """This learner's envs' slice of the checkpoint's replay state (checked whole before it changes)."""
        saved = state.get("replay")
        if saved is None:
            raise ValueError(f"checkpoint holds no replay buffer, and algorithm {self.config.algo!r} keeps one")
        lo, hi = self.learn_context.batches.shard.lo, self.learn_context.batches.shard.hi
        local = dict(saved)
        if "buffers" in saved:
            local["buffers"] = {k: v[:, lo:hi] for k, v in saved["buffers"].items()}
        self.replay.load_state_dict(local)

    def load_state_dict(self, state: dict) -> None:
        """Continue from ``state`` (a checkpoint of a run with the same config, saved with any number of
        ranks: each rank takes its envs' slice of the global env state)."""
        s, H, lo, hi = self.storage, self.storage.history, self.shard.lo, self.shard.hi
        saved_envs = state["history_obs"].shape[1]
        if saved_envs != self.shard.total:
            raise ValueError(f"checkpoint holds {saved_envs} envs, this run has num_envs={self.shard.total}")
        if state["algorithm"] != self.config.algo:
            raise ValueError(f"checkpoint was saved by algorithm {state['algorithm']!r}, this run is {self.config.algo!r}")
        self._check_env_fits(state)
        if self.replay is not None:  # first: it checks itself whole, so a bad one changes nothing
            self._load_replay(state)
        for name, tensor in state["env_state"].items():
            getattr(self.env.state, name).copy_(tensor[lo:hi])
        s.obs[:H + 1].copy_(state["history_obs"][:, lo:hi])
        s.starts[:H + 1].copy_(state["history_starts"][:, lo:hi])
        for name in self._carried_buffers():
            getattr(s, name)[0].copy_(state["carried"][name][lo:hi])
        self.algo.load_state_dict(state["algo_state"])
        self.generator.set_state(state["generator"])
        if self.placement.is_main:  # other ranks keep their own acting stream
            self.sample_generator.set_state(state["sample_generator"])
        self.step_counter.copy_(state["step_counter"])
        stats = state["episode_stats"]
        main = self.placement.is_main  # the finished-episode sums are counted once, on the main rank
        self.stats.load_state_dict({"running": stats["running"][lo:hi],
                                    "done_sum": stats["done_sum"] * main, "done_count": stats["done_count"] * main})
        self.iteration, self.env_steps = int(state["iteration"]), int(state["env_steps"])
        self.iteration_counter.fill_(self.iteration)
        self._weights_changed(self.placement.start(self.algo.weights()))
        self.algo.sync_actors()

    def _carried_buffers(self) -> list[str]:
        """Storage buffers whose slot 0 continues the last rollout (besides the observation history)."""
        return (["global_state"] if self.storage.state_dim else []) + self.storage.carried()

    def _check_env_fits(self, state: dict) -> None:
        """ValueError naming the first env state field or observation shape the checkpoint's env does not
        share with this one (a different env, or the same env with other sizes), before anything is copied."""
        fields = {f.name: getattr(self.env.state, f.name) for f in dataclasses.fields(self.env.state)}
        saved = state["env_state"]
        if set(saved) != set(fields):
            raise ValueError(f"its env state has fields {sorted(saved)}, this {self.config.env!r} env has "
                             f"{sorted(fields)} (a different env)")
        for name, tensor in fields.items():
            if tuple(saved[name].shape[1:]) != tuple(tensor.shape[1:]) or saved[name].dtype != tensor.dtype:
                raise ValueError(f"env state field {name!r} is {list(saved[name].shape[1:])} {saved[name].dtype} per "
                                 f"env there, {list(tensor.shape[1:])} {tensor.dtype} in this {self.config.env!r} env")
        obs, saved_obs = self.storage.obs, state["history_obs"]
        if tuple(saved_obs.shape[2:]) != tuple(obs.shape[2:]):
            raise ValueError(f"its observations are {list(saved_obs.shape[2:])} per env, this {self.config.env!r} "
                             f"env's are {list(obs.shape[2:])}")

    # ---- reading results (host reads: once per log interval) -------------------------------------

    def read_losses(self, stats: torch.Tensor) -> dict[str, float]:
        """The learner's statistics as floats (one host read); raises NonFiniteLossError naming the iteration
        on NaN/Inf. A training run reads them one iteration late instead (:mod:`.readback`)."""
        values = stats.tolist()  # host-ok: a caller's own read (tests, benchmarks)
        self.check_finite(values, self.iteration)
        return self.named_losses(values)

    def named_losses(self, values: list[list[float]]) -> dict[str, float]:
        """``{"<stat>/<group>": value}`` of the learner's statistics read on the host ([groups][stats])."""
        return {f"{stat}/{group}": v for group, row in zip(self.trained, values)
                for stat, v in zip(self.algo.stat_names, row)}

    def check_finite(self, values: list[list[float]], iteration: int) -> None:
        """NonFiniteLossError naming ``iteration`` (1-based), the group and the statistics if any of ``values``
        ([groups][stats], read on the host) is NaN/Inf."""
        names = self.algo.stat_names
        for group, row in zip(self.trained, values):
            bad = [stat for stat, v in zip(names, row) if not math.isfinite(v)]
            if bad:
                raise NonFiniteLossError(f"iteration {iteration}: non-finite {', '.join(bad)} in group "
                                         f"{group!r} ({dict(zip(names, row))}); stopping the run")


def _to_cpu(value):
    """``value`` with every tensor (in nested dicts and lists) copied to the CPU."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()  # host-ok: checkpoint state, written between iterations
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_cpu(v) for v in value)
    return value
