"""Process groups from torchrun's environment, and the distribution policy of this process.

    torchrun --nproc_per_node=G -m gpurl.train --dist data_parallel ...           # one node
    torchrun --nnodes=N --nproc_per_node=G --rdzv_backend=c10d \\
             --rdzv_endpoint=HOST:29400 --rdzv_id=JOB -m gpurl.train --dist data_parallel ...

Without a launcher (no WORLD_SIZE in the environment) a run is one process and ``dist`` may only be
``single``, ``auto``, or a policy that then runs with world size 1.
"""
from __future__ import annotations

import os
from datetime import timedelta

import torch
import torch.distributed as dist

from ..envs import resolve_device
from .comm import ProcessGroupComm
from .placement import LocalComm, Placement
from .policies import POLICIES
from .watchdog import PeerWatchdog

DIST_CHOICES = ("auto", *POLICIES)


def launcher_world() -> tuple[int, int, int]:
    """(rank, world_size, local_rank) from torchrun's variables; (0, 1, 0) without a launcher."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    return rank, world, int(os.environ.get("LOCAL_RANK", str(rank)))


def launcher_attempt() -> str | None:
    """torchrun's restart count of this worker (``TORCHELASTIC_RESTART_COUNT``), when torchrun's agent hosts the
    store; None otherwise."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    return os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")


def attempt_store(host: str, port: int, attempt: str | None, timeout: timedelta):
    """A client of the rendezvous store, its keys private to torchrun's attempt ``attempt`` (None: the store
    as it is). torchrun's static rendezvous (``--master-port``) keeps one store across restarts, and a
    restarted worker that read the previous attempt's keys would connect to the dead workers' addresses."""
    store = dist.TCPStore(host, port, is_master=False, timeout=timeout)
    return store if attempt is None else dist.PrefixStore(f"gpurl/attempt-{attempt}/", store)


def policy_name(dist_name: str, world: int) -> str:
    """The policy ``dist_name`` stands for with ``world`` ranks (``auto``: data_parallel when several)."""
    if dist_name == "auto":
        return "data_parallel" if world > 1 else "single"
    if dist_name == "single" and world > 1:
        raise ValueError(f"dist='single' but the launcher started {world} ranks; use --dist data_parallel "
                         f"or --dist central_learner")
    return dist_name


def rank_device(device: str | None, local_rank: int) -> torch.device:
    """cuda:LOCAL_RANK when CUDA is asked for (or usable, with device None), else the CPU."""
    wanted = device
    if wanted is None:
        wanted = "cuda" if torch.cuda.is_available() else "cpu"
    if torch.device(wanted).type == "cpu":
        return torch.device("cpu")
    chosen = resolve_device(f"cuda:{local_rank}")
    torch.cuda.set_device(chosen)
    return chosen


def init_placement(dist_name: str, device: str | None, timeout_s: float, replication_check_every: int = 10,
                   max_staleness: int = 0) -> Placement:
    """The distribution policy of this process (initialising torch.distributed under a launcher):
    NCCL between GPUs, gloo between CPU processes; a peer watchdog beside it."""
    rank, world, local_rank = launcher_world()
    name = policy_name(dist_name, world)
    options = dict(replication_check_every=replication_check_every, max_staleness=max_staleness)
    if world == 1:
        return POLICIES[name](LocalComm(), resolve_device(device), **options)
    chosen = rank_device(device, local_rank)
    backend = "nccl" if chosen.type == "cuda" else "gloo"
    timeout = timedelta(seconds=timeout_s)
    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    attempt = launcher_attempt()
    if attempt is None:  # ranks started by hand: env:// makes rank 0 host the store
        dist.init_process_group(backend, rank=rank, world_size=world, timeout=timeout)
    else:
        dist.init_process_group(backend, store=attempt_store(host, port, attempt, timeout), rank=rank,
                                world_size=world, timeout=timeout)
    # A client of its own: the heartbeat thread must not share a connection with the main thread.
    store = attempt_store(host, port, attempt, timeout)
    watchdog = PeerWatchdog(store, rank, world, timeout_s, f"{host}:{port}").start()
    return POLICIES[name](ProcessGroupComm(), chosen, watchdog, **options)


def is_comm_failure(err: BaseException) -> bool:
    """Could ``err`` come from a collective whose peer is gone (rather than from this rank's own code)?"""
    return isinstance(err, (RuntimeError, dist.DistError)) and not isinstance(err, FloatingPointError)


__all__ = ["DIST_CHOICES", "init_placement", "is_comm_failure", "launcher_world", "policy_name", "rank_device"]
