"""A whole training run: log dir claimed and run record written, random baseline, training loop, logs,
checkpoints, final measurement, curve.

``train(config)`` runs it on the ranks of a placement (:func:`gpurl.train.launch.run` chooses one; that is
what ``gpurl train`` and ``bench/tag_ppo.py`` call) and returns the run's result dict (the RESULT line's
payload). Everything that can refuse a run (nothing left to do, a checkpoint of another env or
algorithm, a logger whose extra is missing, a log dir of another run) refuses it before anything is
written. :class:`TrainingRun` is the same run in parts, so that a seed sweep (:mod:`gpurl.train.sweep`)
can step several side by side.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from contextlib import ExitStack, nullcontext
from pathlib import Path

import torch

from ..algos.flat_adam import annealed_lr
from ..envs.checks import derived_seed
from ..kernels import compile_log
from .checkpoint import CHECKPOINT_FILE, CheckpointError, atomic_write_bytes, check_matches, save_checkpoint
from .config import AUTO_RESUME, TrainConfig, checkpoint_seconds
from .iteration_records import IterationRecords
from .log_dir_lock import LogDirLock
from .resume import RESULT_FILE, check_work_left, restarted_run_id
from ..multigpu.placement import Placement
from ..profiling import ProfilerWindow, nvtx_range
from .machine import describe_machine
from .loggers import check_loggers, describe_loggers, start_loggers
from .outputs import RunLog, plot_curve, progress_wanted
from .run_record import claim_log_dir, new_run_id, remove_stale_temp_files, write_run_record
from .threads import adapt_threads
from .trainer import Trainer

#: The clock of time-based checkpoints (tests replace it).
_clock = time.monotonic


class CheckpointSchedule:
    """When a run checkpoints (besides its last iteration): every ``checkpoint_every`` iterations, or, given a
    time, once that long has passed since the last checkpoint (or the start). The main rank's clock decides
    and every rank follows its flag (a checkpoint is a collective: the ranks send their envs' state)."""

    def __init__(self, every: int | str, comm, device: torch.device):
        self.iterations, self.seconds = (every, None) if isinstance(every, int) else (0, checkpoint_seconds(every))
        self.comm = comm
        self.flag = torch.zeros(1, device=device)
        self.last = _clock()

    def due(self, iteration: int) -> bool:
        if self.seconds is None:
            return bool(self.iterations) and iteration % self.iterations == 0
        if self.comm.world_size == 1:  # nobody to agree with: no device flag, no read
            return _clock() - self.last >= self.seconds
        self.flag.fill_(float(_clock() - self.last >= self.seconds))
        self.comm.broadcast_(self.flag, src=0)
        return bool(self.flag.item())  # host-ok: one flag per iteration, time-based checkpoints over ranks only

    def saved(self) -> None:
        self.last = _clock()


def default_log_dir(cfg: TrainConfig, run_id: str) -> Path:
    return Path("runs") / f"{cfg.preset or cfg.env}-seed{cfg.seed}-{run_id}"


def train(cfg: TrainConfig, checkpoint: dict | None = None, say=print, placement: Placement | None = None) -> dict | None:
    """Run ``cfg`` (continuing ``checkpoint`` if given) and return the result payload.

    With a multi-rank ``placement`` every rank calls this; the main rank alone prints, logs, writes
    checkpoints and returns the result (the others return None).
    """
    run = TrainingRun(cfg, checkpoint, say=say, placement=placement)
    # The main rank says what its first launches and iteration compile, and how long that took.
    live = sys.stderr if progress_wanted(run.cfg.progress) else None  # a terminal: a status line moves in place
    with compile_log.listening(say, live) if run.main else nullcontext():
        run.build()
        try:
            run.begin()
            while not run.done:
                run.step()
        except BaseException:
            run.close(failed=True)
            raise
        run.close()
    return run.finish()


def first_iteration_work(trainer: Trainer) -> str:
    """What a process's first training iteration compiles, and where the compiled code is kept."""
    backends = trainer.algo.backends()
    compiled = [part for part, how in backends.items() if how == "compiled"]
    work = []
    if compiled:
        cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR", "inductor's default cache")
        work.append(f"torch.compile of the {' and '.join(compiled)} steps (cached in {cache}: a later run of this "
                    "configuration loads them)")
    if "triton" in backends.values():
        work.append("the Triton kernels (cached in Triton's cache)")
    if trainer.device.type == "cuda" and (trainer.graphed or trainer.graphed_iteration):
        work.append("then the CUDA graph capture in the next iteration")
    return "; ".join(work) if work else "nothing to compile (eager backends)"


def _silent(*args, **kwargs) -> None:
    pass


class TrainingRun:
    """One run in parts, so that a seed sweep (:mod:`gpurl.train.sweep`) can step several side by side:

    - construction refuses what cannot run (nothing left to do, a checkpoint of another env or algorithm, a
      logger whose extra is missing, a log dir of another run) and picks the run id and log dir: nothing is
      built or written;
    - ``build()`` makes the trainer (and loads the checkpoint into it): memory, no files;
    - ``begin()`` takes the log dir's lock (:mod:`.log_dir_lock`, held until ``finish()`` or a failed ``close()``),
      writes ``run.json``, starts the loggers and measures the random baseline;
    - ``step()`` is one training iteration with its log line and checkpoint (``done`` says when none is left);
    - ``close()`` closes the logs; ``finish()`` measures the trained policy and returns the result.
    """

    def __init__(self, cfg: TrainConfig, checkpoint: dict | None = None, say=print, placement: Placement | None = None,
                 lines=print):
        """``say``: the run's messages; ``lines``: its plain progress lines (print-like)."""
        cfg = cfg.validated()
        #: the checkpoint ends the run and only its result is missing: no training, the result rewritten
        self.finish_only = False
        if checkpoint is not None:  # refusals first: nothing is built or written yet
            self.finish_only = check_work_left(checkpoint, cfg)
            check_matches(checkpoint, cfg.resume, cfg.env, cfg.env_params, cfg.algo)
        check_loggers(cfg)
        cfg.import_env_modules()
        self.placement = placement = placement or Placement()
        self.main = placement.is_main
        self.say = say if self.main else _silent
        self.lines = lines
        self.checkpoint = checkpoint
        restarted = None if checkpoint is not None or cfg.resume != AUTO_RESUME else restarted_run_id(cfg.log_dir, cfg)
        self.restarted = bool(restarted)
        self.run_id = str(checkpoint["run_id"]) if checkpoint is not None else restarted or new_run_id()
        log_dir = Path(cfg.log_dir) if cfg.log_dir else default_log_dir(cfg, self.run_id)
        if self.main:
            log_dir = claim_log_dir(log_dir, self.run_id, cfg.fresh_log_dir, self.say)
        self.log_dir = log_dir
        # Held from the first write (begin) to the last (finish): one writer per log dir.
        self.lock = LogDirLock(log_dir) if self.main else None
        self.cfg = dataclasses.replace(cfg, log_dir=str(log_dir))
        self.trainer: Trainer | None = None
        self.runlog: RunLog | None = None
        self._open = ExitStack()  # what close() closes: loggers, the profiler
        self._failed = False

    @property
    def done(self) -> bool:
        return self.trainer.iteration >= self.cfg.iters

    def build(self) -> None:
        """The trainer, with the checkpoint's state; says the run's id, log dir, env and backends."""
        cfg, say = self.cfg, self.say
        say(f"gpurl train: run {self.run_id}, log_dir={self.log_dir}"
            + (f", resuming {cfg.resume}" if self.checkpoint else "")
            + (", restarted from iteration 0 (--resume auto: no checkpoint yet)" if self.restarted else ""))
        if self.finish_only:
            say(f"the checkpoint ends the run (iteration {self.checkpoint['iteration']}) but {self.log_dir / RESULT_FILE} "
                "is missing or torn: no training; measuring the trained policy again and rewriting it from the "
                "checkpoint and the logs")
        self.trainer = trainer = Trainer(cfg, self.placement)
        self.extras: dict = {}
        if self.checkpoint is not None:
            try:
                trainer.load_state_dict(self.checkpoint)
            except ValueError as err:
                where = f"checkpoint {cfg.resume}" if cfg.resume else "the checkpoint given"
                raise CheckpointError(f"{where} does not fit this run: {err}") from err
            self.extras = dict(self.checkpoint["extras"])
        placement = self.placement
        say(f"env={cfg.env} preset={cfg.preset} device={trainer.device} "
            f"num_envs={cfg.num_envs} agents={trainer.env.num_agents} groups={list(trainer.env.groups)} "
            f"trained={trainer.trained} iters={cfg.iters} (from {trainer.iteration}) rollout_len={cfg.rollout_len} "
            f"dist={placement.name} world_size={placement.world_size}")
        say(f"algorithm: {cfg.algo}; {trainer.backends()}")

    def begin(self) -> None:
        """The run record, the loggers, the random baseline; then ready to step."""
        cfg, say, trainer, log_dir = self.cfg, self.say, self.trainer, self.log_dir
        self.machine = describe_machine(trainer.device)
        if self.main:  # the record goes first, so a run that dies in the baseline still leaves one
            self.lock.acquire()
            # Again under the lock: a run that took the dir since this one claimed it has written its files.
            claim_log_dir(log_dir, self.run_id, fresh=False, say=say)
            remove_stale_temp_files(log_dir, say)
            write_run_record(log_dir, self.run_id, cfg.to_dict(), self.machine, trainer.iteration)
        say(f"machine: {self.machine}")
        say("config: " + " ".join(f"{k}={v}" for k, v in cfg.flat().items()))
        loggers = []
        if self.main:
            loggers = start_loggers(cfg, log_dir, self.run_id)
            for logger in loggers:
                self._open.callback(logger.close, failed=True)  # until the run log takes them over
            say(describe_loggers(loggers))

        extras = self.extras
        if "baseline" not in extras:
            extras["baseline"] = {}
            if cfg.eval_episodes:
                say(f"measuring a random policy over >= {cfg.eval_episodes} episodes "
                    f"(same config, seed {derived_seed(cfg.seed, 1)})")
                extras["baseline"] = trainer.evaluate(random=True, min_episodes=cfg.eval_episodes,
                                                      seed=derived_seed(cfg.seed, 1))
        self.baseline = extras["baseline"]

        if self.main:
            self.runlog = RunLog(log_dir, cfg.iters, trainer.iteration, progress_wanted(cfg.progress),
                                 run_id=self.run_id, start_env_steps=trainer.env_steps, restarted=self.restarted,
                                 loggers=loggers, lines=self.lines)
            self._open = ExitStack()  # the loggers' closes are the run log's now
            self._open.callback(lambda: self.runlog.close(failed=self._failed))
        self.phases: dict[str, float] = {}
        self.train_seconds, self.train_steps = 0.0, 0
        self.bytes_start = self.placement.comm.bytes_sent
        # The first iteration of a process compiles (the env kernels, unless the baseline did, and the fast
        # paths); on CUDA the second captures the graphs. Neither is counted in the throughput or the phase
        # split when iterations follow them.
        self.warmup = max(0, min(2, cfg.iters - trainer.iteration - 1))
        self.start_iteration = trainer.iteration
        self.records = IterationRecords(trainer, min_episodes=max(1, cfg.num_envs // 4))
        self.seconds: dict[int, float] = {}
        self.profiler = _profiler(cfg, log_dir) if self.main else None
        if self.profiler is not None:
            self._open.enter_context(self.profiler)
        self.nsys_window = ProfilerWindow(cfg.nsys_iters, trainer.device)
        self.schedule = CheckpointSchedule(cfg.checkpoint_every, self.placement.comm, trainer.device)

    def step(self) -> None:
        """One iteration: rollout and update queued, then the previous iteration's log line (its record is read
        one iteration late: :mod:`.iteration_records`), and a checkpoint when due."""
        cfg, trainer = self.cfg, self.trainer
        self.nsys_window.before(trainer.iteration)
        adapt_threads()  # the entry point's thread policy: pools as wide as the CPUs left free
        first = trainer.iteration == self.start_iteration
        if first and self.main and compile_log.active():
            self.say(f"gpurl: iteration {trainer.iteration + 1} is this process's first: {first_iteration_work(trainer)}")
        t0 = time.perf_counter()
        with nvtx_range(f"iteration {trainer.iteration}"), \
                compile_log.waiting("running the first iteration, its compiles included") if first else nullcontext():
            losses = trainer.iterate()
        self.nsys_window.after(trainer.iteration)
        self.records.update(losses)
        last = trainer.iteration == cfg.iters
        checkpoint = self.schedule.due(trainer.iteration) or last
        log_row = trainer.iteration % cfg.log_every == 0 or last
        if log_row or checkpoint:
            self.records.push(losses, log_row)
        # NaN/Inf stops the run here; before a checkpoint every record is read, so none is saved after one.
        records = self.records.pop(flush=checkpoint)
        seconds = time.perf_counter() - t0
        self.seconds[trainer.iteration] = seconds
        if first and self.main and compile_log.active():
            self.say(f"gpurl: first iteration done in {seconds:.1f} s, its compiles included (not counted in "
                     "the throughput)")
        if self.warmup:  # compiles, and on CUDA the graph captures: not timed
            self.warmup -= 1
            trainer.timer.read()
        else:
            self.train_seconds += seconds
            self.train_steps += cfg.num_envs * cfg.rollout_len
        if self.profiler is not None:
            self.profiler.step()
        for record in records:
            if record.log_row:
                self._log(record)
        if checkpoint:
            # This process's training time, for a result rewritten from the checkpoint (finish_only).
            self.extras["timing"] = {"train_seconds": self.train_seconds, "train_steps": self.train_steps,
                                     "phases": dict(self.phases)}
            state = trainer.state_dict()  # collective: every rank sends its envs' state
            if self.main:
                save_checkpoint(self.log_dir / CHECKPOINT_FILE, {**state, "extras": self.extras, "run_id": self.run_id},
                                keep_previous=True)
            self.schedule.saved()

    def _log(self, record) -> None:
        """The log row of a record: learner statistics, episode means, throughput, learning rate, phases."""
        cfg, trainer = self.cfg, self.trainer
        for name, value in trainer.timer.read().items():
            self.phases[name] = self.phases.get(name, 0.0) + value
        scalars = trainer.named_losses(record.losses)
        scalars.update(record.episodes)
        seconds = self.seconds.pop(record.iteration)
        scalars["agent_steps_per_s"] = cfg.num_envs * cfg.rollout_len * trainer.env.num_agents / seconds
        p = cfg.algo_params
        scalars["lr"] = annealed_lr(p.lr, record.iteration - 1, cfg.iters, p.anneal_lr)
        for done in [k for k in self.seconds if k < record.iteration]:
            del self.seconds[done]
        if self.runlog is not None:
            self.runlog.log(record.iteration, record.env_steps, scalars)

    def close(self, failed: bool = False) -> None:
        """Stop the profiler and close the logs (idempotent); ``failed``: the run stops on an error."""
        self._failed = failed
        stack, self._open = self._open, ExitStack()
        try:
            stack.close()
        finally:
            if failed:
                self._release()

    def _release(self) -> None:
        if self.lock is not None:
            self.lock.release()

    def finish(self) -> dict | None:
        """After the last step and ``close()``: the trained policy measured, the curve and ``result.json``; the
        result payload (main rank; None elsewhere). Releases the log dir."""
        try:
            return self._finish()
        finally:
            self._release()

    def _finish(self) -> dict | None:
        cfg, say, trainer, placement, log_dir = self.cfg, self.say, self.trainer, self.placement, self.log_dir
        trainer.placement.settle(trainer)
        # Bytes every rank put on the wire during training, summed over ranks (collective).
        comm_bytes = float(placement.comm.all_reduce_(
            torch.tensor([float(placement.comm.bytes_sent - self.bytes_start)], dtype=torch.float64,
                         device=trainer.device)))
        final = {}
        if cfg.eval_episodes:
            say(f"measuring the trained policy over >= {cfg.eval_episodes} episodes "
                f"(seed {derived_seed(cfg.seed, 2)})")
            final = trainer.evaluate(random=False, min_episodes=cfg.eval_episodes, seed=derived_seed(cfg.seed, 2))
        if not self.main:
            return None
        ranks = f" x {placement.world_size} ranks" if placement.world_size > 1 else ""
        curve = plot_curve(self.runlog.rows, log_dir / "learning_curve.png", self.baseline,
                           f"{cfg.preset or cfg.env}: {cfg.num_envs} envs x {trainer.env.num_agents} agents, "
                           f"{trainer.device}{ranks}")
        timing = (self.train_seconds, self.train_steps, self.phases)
        if self.finish_only and "timing" in self.extras:  # the process that trained is gone: its own record
            saved = self.extras["timing"]
            timing = (saved["train_seconds"], saved["train_steps"], saved["phases"])
        result = _result(cfg, trainer, self.baseline, final, timing[2], timing[0], timing[1], log_dir, curve)
        result.update(run_id=self.run_id, machine=self.machine)
        if self.finish_only:
            result["rewritten_from_checkpoint"] = True
        if cfg.render_final:
            result["final_episode"] = str(_render_final(trainer, log_dir, cfg, say))
        start = (self.checkpoint or {}).get("iteration", 0)
        result["comm_bytes_per_iteration"] = comm_bytes / max(1, trainer.iteration - start)
        atomic_write_bytes(log_dir / RESULT_FILE, json.dumps(result, indent=1, sort_keys=True).encode())
        return result


def _profiler(cfg: TrainConfig, log_dir: Path):
    """torch.profiler over iterations 2-3 (after warm-up), trace into log_dir."""
    if not cfg.profile:
        return None
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    return profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
                   on_trace_ready=tensorboard_trace_handler(str(log_dir / "profile")))


def _render_final(trainer, log_dir: Path, cfg: TrainConfig, say) -> Path:
    """One episode of the trained policies (seed + 3, env 0) as log_dir/final_episode.gif."""
    from ..render import save_animation

    env, frames = trainer.record_episode(seed=derived_seed(cfg.seed, 3))
    path = save_animation(env, frames, log_dir / "final_episode.gif",
                          title=f"{cfg.preset or cfg.env}, trained ({trainer.iteration} iterations)")
    say(f"final episode ({len(frames) - 1} steps) drawn into {path}")
    return path


def _result(cfg, trainer, baseline, final, phases, train_seconds, train_steps, log_dir, curve) -> dict:
    agents = trainer.env.num_agents
    result = {
        "device": str(trainer.device), "env": cfg.env, "preset": cfg.preset, "num_envs": cfg.num_envs,
        "num_agents": agents, "iterations": trainer.iteration, "env_steps": trainer.env_steps,
        "agent_steps": trainer.env_steps * agents, "rollout_len": cfg.rollout_len, "algo": cfg.algo,
        "seed": cfg.seed, "world_size": trainer.placement.world_size, "dist": trainer.placement.name,
        "agent_steps_per_s": train_steps * agents / train_seconds if train_seconds else None,
        "train_seconds": train_seconds, "timed_iterations": train_steps // (cfg.num_envs * cfg.rollout_len),
        "phase_seconds": {k: round(v, 4) for k, v in sorted(phases.items())},
        "log_dir": str(log_dir), "learning_curve": str(curve) if curve else None,
    }
    for key in sorted({*baseline, *final}):
        if key != "episodes":
            name = key.replace("return/", "return_")
            result[f"{name}_random"] = baseline.get(key)
            result[f"{name}_final"] = final.get(key)
    # An env metric per env step (its episode sum over the episode length, both means over the same episodes):
    # where an episode ends once every runner is caught, a faster catch shows here and not in the sum per
    # episode (tag-10v100's random taggers catch nearly all of its 100 runners within the 500 steps).
    for which, measured in (("random", baseline), ("final", final)):
        for key, value in measured.items():
            if key.endswith("_per_episode") and measured.get("episode_length"):
                result[f"{key.removesuffix('_per_episode')}_per_step_{which}"] = value / measured["episode_length"]
    return result
