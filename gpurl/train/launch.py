"""Run a training config under the distribution policy it names, in this process (one rank of a
``torchrun`` launch, or a single process), and turn a lost peer into an error naming it.

    torchrun --nproc_per_node=G -m gpurl.train --dist data_parallel ...             # one node
    torchrun --nnodes=N --nproc_per_node=G --rdzv_backend=c10d \\
             --rdzv_endpoint=HOST:29400 --rdzv_id=JOB -m gpurl.train --dist data_parallel ...

A seed sweep (``--seeds``) runs its seeds side by side in one process (:func:`run_sweep`).
"""
from __future__ import annotations

from ..multigpu.process_group import init_placement, is_comm_failure, launcher_world
from .checkpoint import load_checkpoint
from .config import AUTO_RESUME, TrainConfig
from .process import configure_process
from .run import train
from .sweep import check_sweep_flags, sweep
from .threads import describe


class LostRankError(RuntimeError):
    """A collective failed because another rank died, hung or raised; the message names it."""


def run(cfg: TrainConfig, say=print) -> dict | None:
    """Train ``cfg`` under the distribution policy it names; the main rank returns the result.

    This is an entry point: it makes the process-wide settings (threads, allocator, compile cache) and
    prints the thread policy in effect (:mod:`gpurl.train.threads`).
    A rank that raises reports the error to its peers before exiting; a rank whose collective fails
    because a peer is gone raises :class:`LostRankError` naming that peer.
    """
    placement = init_placement(cfg.dist, cfg.device, cfg.dist_timeout, cfg.replication_check_every,
                               cfg.max_staleness)
    threads = configure_process(cfg.torch_threads, placement.device, cfg.tf32)
    if placement.is_main:
        say(describe(threads))
    try:
        # "auto" left unresolved: gpurl.train.cli found no checkpoint in the log dir (a fresh start)
        checkpoint = load_checkpoint(cfg.resume) if cfg.resume and cfg.resume != AUTO_RESUME else None
        result = train(cfg, checkpoint, say=say, placement=placement)
    except BaseException as err:
        watchdog = getattr(placement, "watchdog", None)
        lost = watchdog.lost_peers() if watchdog is not None and is_comm_failure(err) else None
        placement.report_failure(f"{type(err).__name__}: {err}")
        placement.close(clean=False)
        if lost:
            raise LostRankError(f"rank {placement.rank}: a collective failed ({type(err).__name__}); {lost}") from err
        raise
    placement.close(clean=True)
    return result


def run_sweep(configs: list[TrainConfig], say=print, sweep_dir=None) -> dict:
    """Train ``configs`` (one per seed) side by side in this one process (:func:`gpurl.train.sweep.sweep`) and
    return the sweep's payload. An entry point like :func:`run`; refused under a multi-rank launch."""
    _, world, _ = launcher_world()
    check_sweep_flags({}, world)
    cfg = configs[0]
    placement = init_placement(cfg.dist, cfg.device, cfg.dist_timeout, cfg.replication_check_every,
                               cfg.max_staleness)
    say(describe(configure_process(cfg.torch_threads, placement.device, cfg.tf32)))
    try:
        checkpoints = [load_checkpoint(c.resume) if c.resume and c.resume != AUTO_RESUME else None for c in configs]
        payload = sweep(configs, checkpoints, say=say, placement=placement, sweep_dir=sweep_dir)
    except BaseException:
        placement.close(clean=False)
        raise
    placement.close(clean=True)
    return payload


__all__ = ["LostRankError", "run", "run_sweep"]
