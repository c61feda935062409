"""A whole training run: log dir claimed and run record written, random baseline, training loop, logs,
checkpoints, final measurement, curve.

``train(config)`` runs it on the ranks of a placement (:func:`gpurl.train.launch.run` chooses one; that is
what ``gpurl train`` and ``bench/tag_ppo.py`` call) and returns the run's result dict (the RESULT line's
payload). Everything that can refuse a run (nothing left to do, a checkpoint of another env or
algorithm, a log dir of another run) refuses it before anything is written.
"""
from __future__ import annotations

import dataclasses
import json
import time
from contextlib import nullcontext
from pathlib import Path

import torch

from .checkpoint import CHECKPOINT_FILE, CheckpointError, atomic_write_bytes, check_matches, save_checkpoint
from .config import AUTO_RESUME, TrainConfig, checkpoint_seconds
from ..multigpu.placement import Placement
from ..profiling import ProfilerWindow, nvtx_range
from .machine import describe_machine
from .outputs import RunLog, plot_curve, progress_wanted
from .run_record import RUN_FILE, claim_log_dir, new_run_id, remove_stale_temp_files, write_run_record
from .threads import adapt_threads
from .trainer import Trainer

#: Fields a resumed run may change; every other field comes from the checkpoint.
RESUME_OVERRIDABLE = ("iters", "total_steps", "log_dir", "log_every", "checkpoint_every", "profile", "progress",
                      "resume", "torch_threads", "device", "render_final", "nsys_iters", "dist", "dist_timeout",
                      "replication_check_every", "max_staleness", "env_modules", "policy_backend",
                      "learner_backend", "cuda_graph", "fresh_log_dir")


def resume_config(checkpoint: dict, overrides: dict) -> TrainConfig:
    """The checkpoint's config with the run-control fields in ``overrides`` replaced."""
    saved = TrainConfig.from_dict(checkpoint["config"])
    fixed = sorted(set(overrides) - set(RESUME_OVERRIDABLE))
    if fixed:
        raise ValueError(f"--resume continues the saved config; these cannot change: {fixed} "
                         f"(changeable: {list(RESUME_OVERRIDABLE)})")
    changes = dict(overrides)
    changes.setdefault("fresh_log_dir", False)  # asked for per start, not inherited from the saved run
    if "iters" in changes or "total_steps" in changes:
        changes.setdefault("iters", 0)
        changes.setdefault("total_steps", 0)
    return dataclasses.replace(saved, **changes).validated()


def config_differences(saved: dict, given: dict) -> list[str]:
    """The fields (``TrainConfig.to_dict`` form) that differ between two configs, other than those a resume
    may change: "name: saved there, given here" for each. Compared as JSON holds them (a tuple is a list)."""
    saved, given = json.loads(json.dumps(saved)), json.loads(json.dumps(given))
    names = sorted(k for k in {*saved, *given} if k not in RESUME_OVERRIDABLE and saved.get(k) != given.get(k))
    return [f"{k}: {saved.get(k, '(unset)')!r} there, {given.get(k, '(unset)')!r} here" for k in names]


def restarted_run_id(log_dir: Path, cfg: TrainConfig) -> str | None:
    """``--resume auto`` found no checkpoint: the id of the run in ``log_dir`` when that run is an earlier start
    of this same command (its run.json holds this config) that died before its first checkpoint. The
    restart continues that run from iteration 0 and rewrites its logs; None: a fresh run."""
    try:
        record = json.loads((Path(log_dir) / RUN_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not record.get("run_id") or not isinstance(record.get("config"), dict):
        return None
    return None if config_differences(record["config"], cfg.to_dict()) else str(record["run_id"])


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
        self.flag.fill_(float(_clock() - self.last >= self.seconds))
        self.comm.broadcast_(self.flag, src=0)
        return bool(self.flag.item())  # host-ok: one flag per iteration, time-based checkpoints only

    def saved(self) -> None:
        self.last = _clock()


def check_work_left(checkpoint: dict, cfg: TrainConfig) -> None:
    """Refuse a resume whose checkpoint is already at (or past) the requested iteration count."""
    done = int(checkpoint["iteration"])
    if done >= cfg.iters:
        where = f"--resume {cfg.resume}" if cfg.resume else "the checkpoint given"
        raise ValueError(f"{where}: the checkpoint is at iteration {done} and this run asks for iters={cfg.iters}: "
                         f"nothing left to do, nothing written (pass --iters greater than {done} to train further)")


def default_log_dir(cfg: TrainConfig, run_id: str) -> Path:
    return Path("runs") / f"{cfg.preset or cfg.env}-seed{cfg.seed}-{run_id}"


def train(cfg: TrainConfig, checkpoint: dict | None = None, say=print, placement: Placement | None = None) -> dict | None:
    """Run ``cfg`` (continuing ``checkpoint`` if given) and return the result payload.

    With a multi-rank ``placement`` every rank calls this; the main rank alone prints, logs, writes
    checkpoints and returns the result (the others return None).
    """
    cfg = cfg.validated()
    if checkpoint is not None:  # refusals first: nothing is built or written yet
        check_work_left(checkpoint, cfg)
        check_matches(checkpoint, cfg.resume, cfg.env, cfg.env_params, cfg.algo)
    cfg.import_env_modules()
    placement = placement or Placement()
    main = placement.is_main
    if not main:
        say = lambda *args, **kwargs: None  # noqa: E731
    restarted = None if checkpoint is not None or cfg.resume != AUTO_RESUME else restarted_run_id(cfg.log_dir, cfg)
    run_id = str(checkpoint["run_id"]) if checkpoint is not None else restarted or new_run_id()
    log_dir = Path(cfg.log_dir) if cfg.log_dir else default_log_dir(cfg, run_id)
    if main:
        log_dir = claim_log_dir(log_dir, run_id, cfg.fresh_log_dir, say)
    cfg = dataclasses.replace(cfg, log_dir=str(log_dir))
    say(f"gpurl train: run {run_id}, log_dir={log_dir}" + (f", resuming {cfg.resume}" if checkpoint else "")
        + (", restarted from iteration 0 (--resume auto: no checkpoint yet)" if restarted else ""))
    trainer = Trainer(cfg, placement)
    extras: dict = {}
    if checkpoint is not None:
        try:
            trainer.load_state_dict(checkpoint)
        except ValueError as err:
            where = f"checkpoint {cfg.resume}" if cfg.resume else "the checkpoint given"
            raise CheckpointError(f"{where} does not fit this run: {err}") from err
        extras = dict(checkpoint["extras"])
    say(f"env={cfg.env} preset={cfg.preset} device={trainer.device} "
        f"num_envs={cfg.num_envs} agents={trainer.env.num_agents} groups={list(trainer.env.groups)} "
        f"trained={trainer.trained} iters={cfg.iters} (from {trainer.iteration}) rollout_len={cfg.rollout_len} "
        f"dist={placement.name} world_size={placement.world_size}")
    say(f"algorithm: {cfg.algo}; {trainer.backends()}")
    machine = describe_machine(trainer.device)
    if main:  # the record goes first, so a run that dies in the baseline still leaves one
        remove_stale_temp_files(log_dir, say)
        write_run_record(log_dir, run_id, cfg.to_dict(), machine, trainer.iteration)
    say(f"machine: {machine}")
    say("config: " + " ".join(f"{k}={v}" for k, v in cfg.to_dict().items()))

    if "baseline" not in extras:
        extras["baseline"] = {}
        if cfg.eval_episodes:
            say(f"measuring a random policy over >= {cfg.eval_episodes} episodes (same config, seed {cfg.seed + 1})")
            extras["baseline"] = trainer.evaluate(random=True, min_episodes=cfg.eval_episodes, seed=cfg.seed + 1)
    baseline = extras["baseline"]

    runlog = RunLog(log_dir, cfg.iters, trainer.iteration, progress_wanted(cfg.progress), run_id=run_id,
                    start_env_steps=trainer.env_steps, restarted=bool(restarted)) if main else None
    phases: dict[str, float] = {}
    train_seconds, train_steps = 0.0, 0
    bytes_start = placement.comm.bytes_sent
    # The first iteration of a process compiles the env kernels (unless the baseline did): it is not
    # counted in the throughput or the phase split when more iterations follow.
    warmup = 1 if cfg.iters - trainer.iteration > 1 else 0
    profiler = _profiler(cfg, log_dir) if main else None
    nsys_window = ProfilerWindow(cfg.nsys_iters, trainer.device)
    schedule = CheckpointSchedule(cfg.checkpoint_every, placement.comm, trainer.device)
    try:
        with profiler or nullcontext():
            while trainer.iteration < cfg.iters:
                nsys_window.before(trainer.iteration)
                adapt_threads()  # the entry point's thread policy: pools as wide as the CPUs left free
                t0 = time.perf_counter()
                with nvtx_range(f"iteration {trainer.iteration}"):
                    losses = trainer.iterate()
                nsys_window.after(trainer.iteration)
                scalars = trainer.read_losses(losses)  # NaN/Inf stops the run here, before any checkpoint
                seconds = time.perf_counter() - t0
                if warmup:
                    warmup = 0
                    trainer.timer.read()
                else:
                    train_seconds += seconds
                    train_steps += cfg.num_envs * cfg.rollout_len
                if profiler is not None:
                    profiler.step()
                last = trainer.iteration == cfg.iters
                if trainer.iteration % cfg.log_every == 0 or last:
                    for name, value in trainer.timer.read().items():
                        phases[name] = phases.get(name, 0.0) + value
                    # Envs start in step, so some intervals see few episode ends: wait for a quarter of them.
                    scalars.update(trainer.read_stats(min_episodes=max(1, cfg.num_envs // 4)))
                    scalars["agent_steps_per_s"] = cfg.num_envs * cfg.rollout_len * trainer.env.num_agents / seconds
                    scalars["lr"] = trainer.algo.optimizer.param_groups[0]["lr"]
                    if runlog is not None:
                        runlog.log(trainer.iteration, trainer.env_steps, scalars)
                if schedule.due(trainer.iteration) or last:
                    state = trainer.state_dict()  # collective: every rank sends its envs' state
                    if main:
                        save_checkpoint(log_dir / CHECKPOINT_FILE, {**state, "extras": extras, "run_id": run_id},
                                        keep_previous=True)
                    schedule.saved()
    finally:
        if runlog is not None:
            runlog.close()
    trainer.placement.settle(trainer)
    # Bytes every rank put on the wire during training, summed over ranks (collective).
    comm_bytes = float(placement.comm.all_reduce_(
        torch.tensor([float(placement.comm.bytes_sent - bytes_start)], dtype=torch.float64, device=trainer.device)))
    final = {}
    if cfg.eval_episodes:
        say(f"measuring the trained policy over >= {cfg.eval_episodes} episodes (seed {cfg.seed + 2})")
        final = trainer.evaluate(random=False, min_episodes=cfg.eval_episodes, seed=cfg.seed + 2)
    if not main:
        return None
    curve = plot_curve(runlog.rows, log_dir / "learning_curve.png", baseline,
                       f"{cfg.preset or cfg.env}: {cfg.num_envs} envs x {trainer.env.num_agents} agents, "
                       f"{trainer.device}" + (f" x {placement.world_size} ranks" if placement.world_size > 1 else ""))
    result = _result(cfg, trainer, baseline, final, phases, train_seconds, train_steps, log_dir, curve)
    result.update(run_id=run_id, machine=machine)
    if cfg.render_final:
        result["final_episode"] = str(_render_final(trainer, log_dir, cfg, say))
    result["comm_bytes_per_iteration"] = comm_bytes / max(1, trainer.iteration - (checkpoint or {}).get("iteration", 0))
    atomic_write_bytes(log_dir / "result.json", json.dumps(result, indent=1, sort_keys=True).encode())
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

    env, frames = trainer.record_episode(seed=cfg.seed + 3)
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
    return result
