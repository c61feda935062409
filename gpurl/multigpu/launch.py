"""Process groups from torchrun's environment, the distribution policy of a run, and a run wrapper
that turns a lost peer into an error naming it.

    torchrun --nproc_per_node=G bench/tag_ppo.py --dist data_parallel ...           # one node
    torchrun --nnodes=N --nproc_per_node=G --rdzv_backend=c10d \\
             --rdzv_endpoint=HOST:29400 --rdzv_id=JOB bench/tag_ppo.py --dist data_parallel ...

Without a launcher (no WORLD_SIZE in the environment) a run is one process and ``dist`` may only be
``single``, ``auto``, or a policy that then runs with world size 1.
"""
from __future__ import annotations

import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

from ..envs import resolve_device
from ..train.checkpoint import load_checkpoint
from ..train.config import TrainConfig
from ..train.placement import LocalComm
from ..train.run import train
from .comm import ProcessGroupComm
from .policies import POLICIES
from .watchdog import PeerWatchdog


class LostRankError(RuntimeError):
    """A collective failed because another rank died, hung or raised; the message names it."""


def launcher_world() -> tuple[int, int, int]:
    """(rank, world_size, local_rank) from torchrun's variables; (0, 1, 0) without a launcher."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    return rank, world, int(os.environ.get("LOCAL_RANK", str(rank)))


def policy_name(cfg: TrainConfig, world: int) -> str:
    if cfg.dist == "auto":
        return "data_parallel" if world > 1 else "single"
    if cfg.dist == "single" and world > 1:
        raise ValueError(f"dist='single' but the launcher started {world} ranks; use --dist data_parallel "
                         f"or --dist central_learner")
    return cfg.dist


def rank_device(cfg: TrainConfig, local_rank: int) -> torch.device:
    """cuda:LOCAL_RANK when CUDA is asked for (or usable, with device None), else the CPU."""
    wanted = cfg.device
    if wanted is None:
        wanted = "cuda" if torch.cuda.is_available() else "cpu"
    if torch.device(wanted).type == "cpu":
        return torch.device("cpu")
    device = resolve_device(f"cuda:{local_rank}")
    torch.cuda.set_device(device)
    return device


def init_placement(cfg: TrainConfig):
    """The distribution policy of this process (initialising torch.distributed under a launcher)."""
    rank, world, local_rank = launcher_world()
    name = policy_name(cfg, world)
    options = dict(replication_check_every=cfg.replication_check_every, max_staleness=cfg.max_staleness)
    if world == 1:
        return POLICIES[name](LocalComm(), resolve_device(cfg.device), **options)
    device = rank_device(cfg, local_rank)
    backend = "nccl" if device.type == "cuda" else "gloo"
    timeout = timedelta(seconds=cfg.dist_timeout)
    dist.init_process_group(backend, rank=rank, world_size=world, timeout=timeout)
    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    # A client of its own: the heartbeat thread must not share a connection with the main thread.
    store = dist.TCPStore(host, port, is_master=False, timeout=timeout)
    watchdog = PeerWatchdog(store, rank, world, cfg.dist_timeout, f"{host}:{port}").start()
    return POLICIES[name](ProcessGroupComm(), device, watchdog, **options)


def run(cfg: TrainConfig, say=print) -> dict | None:
    """Train ``cfg`` under the distribution policy it names; the main rank returns the result.

    A rank that raises reports the error to its peers before exiting; a rank whose collective fails
    because a peer is gone raises :class:`LostRankError` naming that peer.
    """
    placement = init_placement(cfg)
    try:
        checkpoint = load_checkpoint(cfg.resume) if cfg.resume else None
        result = train(cfg, checkpoint, say=say, placement=placement)
    except BaseException as err:
        watchdog = getattr(placement, "watchdog", None)
        lost = watchdog.lost_peers() if watchdog is not None and _is_comm_failure(err) else None
        placement.report_failure(f"{type(err).__name__}: {err}")
        placement.close(clean=False)
        if lost:
            raise LostRankError(f"rank {placement.rank}: a collective failed ({type(err).__name__}); {lost}") from err
        raise
    placement.close(clean=True)
    return result


def _is_comm_failure(err: BaseException) -> bool:
    return isinstance(err, (RuntimeError, dist.DistError)) and not isinstance(err, (FloatingPointError,))


def main_from_config(cfg: TrainConfig) -> dict | None:
    """Front-end helper for bench/tag_ppo.py: run, and print a one-line summary on the main rank."""
    result = run(cfg)
    if result is not None:
        print(f"done: {result['iterations']} iterations, {result['agent_steps_per_s']:.3g} agent-steps/s "
              f"({result['dist']} x {result['world_size']})", file=sys.stderr)
    return result
