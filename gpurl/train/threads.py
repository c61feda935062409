"""The process's thread policy: one pool size for torch and Numba, following the CPUs other processes
leave free. The entry point applies it (:func:`apply_thread_policy`, through
:func:`gpurl.train.process.configure_process`) and the run loop calls :func:`adapt_threads` between
iterations; a ``Trainer`` never touches it.

Why this policy:

- torch and Numba share one pool. torch loads its own OpenMP runtime (libgomp), and Numba's "omp"
  threading layer binds to that library, already loaded, so both run on one OpenMP pool. The policy
  asks Numba for that layer first (Numba's default prefers TBB where it is installed: a second pool
  beside torch's) and sizes both the same.
- Numba's threading layer sets OpenMP's thread count to its own when it starts, which undid an
  earlier ``torch.set_num_threads`` (``--torch-threads``) at the first env step; the policy starts
  Numba's layer first, then sizes both pools.
- The size follows the load. A parallel region ends when its slowest thread does; beside busy
  processes some thread of each region shares its CPU and waits for the scheduler's next time slice,
  while the idle OpenMP workers spin (GNU OpenMP's default) in slices the other processes wanted. So
  before every iteration the pool takes the CPUs this process may run on (``os.sched_getaffinity``:
  a container's cpuset or ``taskset`` makes them fewer than the machine's) less what other processes
  kept busy during the last one, rounded down to all, half or one of them (:func:`pool_sizes`); when
  the others stop, the next iteration takes the CPUs back.
- Idle workers still spin for a moment before they sleep (OpenMP's default): sleeping at once
  (``OMP_WAIT_POLICY=PASSIVE``) makes every parallel region pay a wake-up, which costs a quiet run
  more than the spinning costs a shared one once the pool has shrunk. A user's ``OMP_WAIT_POLICY`` is
  left as it is, and the report names it.

Override with ``GPURL_THREADS``: ``auto`` (the default, the policy above), ``off`` (torch and Numba as
they start by themselves; only ``--torch-threads`` is applied, as before this policy existed), or a
number N (N threads for both pools, whatever the load). ``--torch-threads N`` fixes the number the same
way and wins over the variable. ``NUMBA_THREADING_LAYER`` or ``NUMBA_THREADING_LAYER_PRIORITY`` set by
the user are left as they are.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

from ..kernels.cpu_threads import start_numba_threads

ENV_VAR = "GPURL_THREADS"
#: Numba's threading layers in the order the policy tries them: first the one on torch's OpenMP runtime.
NUMBA_LAYER_PRIORITY = ["omp", "tbb", "workqueue"]

#: The policy :func:`apply_thread_policy` applied last, for :func:`thread_report`.
_applied: "ThreadPolicy | None" = None
#: What sizes the pools between iterations under ``auto`` on a CPU run, for :func:`adapt_threads`.
_free_cpus: "FreeCpus | None" = None


@dataclass(frozen=True)
class ThreadPolicy:
    """``setting``: ``GPURL_THREADS`` as read ("auto" when unset); ``threads``: the pool size for torch
    and Numba to start with, None when the policy is off; ``adaptive``: the size follows the free CPUs
    (``auto`` without ``--torch-threads``); ``torch_threads``: ``--torch-threads`` (0 = unset)."""

    setting: str
    threads: int | None
    adaptive: bool = False
    torch_threads: int = 0

    @property
    def off(self) -> bool:
        return self.threads is None


def process_cpus() -> set[int]:
    """The CPUs this process may run on (its affinity mask), not every CPU of the machine."""
    try:
        return set(os.sched_getaffinity(0))
    except AttributeError:  # no affinity masks here (macOS, Windows)
        return set(range(os.cpu_count() or 1))


def max_threads() -> int:
    """The largest pool a thread count may ask for: the machine's CPUs. More threads than CPUs only wait for
    each other, and OpenMP runtimes crash on absurd counts (100000 threads: SIGSEGV) instead of refusing them."""
    return max(os.cpu_count() or 1, len(process_cpus()))


def read_policy(torch_threads: int = 0, environ=None) -> ThreadPolicy:
    """The policy ``GPURL_THREADS`` asks for; ``--torch-threads`` (0 = unset) fixes the pool size when
    it is on. ValueError names the variable (or the flag) when its value is not ``auto``, ``off`` or a
    whole number in [1, :func:`max_threads`]."""
    environ = os.environ if environ is None else environ
    most = max_threads()
    if torch_threads > most:
        raise ValueError(f"--torch-threads {torch_threads}: this machine has {most} CPUs; allowed 0 (the thread "
                         f"policy) or 1..{most}")
    raw = environ.get(ENV_VAR, "")
    setting = raw.strip().lower() or "auto"
    if setting == "off":
        return ThreadPolicy("off", None, False, torch_threads)
    if setting == "auto":
        threads = len(process_cpus())
    else:
        threads = int(setting) if setting.isdigit() else 0
        if not 1 <= threads <= most:
            raise ValueError(f"{ENV_VAR} must be 'auto', 'off' or a number of threads in 1..{most} (this machine's "
                             f"CPUs), got {raw!r}")
    return ThreadPolicy(setting, torch_threads or threads, setting == "auto" and not torch_threads, torch_threads)


def apply_thread_policy(policy: ThreadPolicy, cpu_run: bool = True) -> dict:
    """Start Numba's threading layer (on torch's OpenMP runtime where it can), then give torch and
    Numba ``policy.threads`` threads; on a CPU run (``cpu_run``) an adaptive policy then follows the
    free CPUs through :func:`adapt_threads`. With the policy off, only an explicit ``--torch-threads``
    is applied, as before the policy. Returns :func:`thread_report`."""
    global _applied, _free_cpus
    import numba
    import torch

    _applied, _free_cpus = policy, None
    if policy.off:
        if policy.torch_threads:
            torch.set_num_threads(policy.torch_threads)
        return thread_report()
    if not (os.environ.get("NUMBA_THREADING_LAYER") or os.environ.get("NUMBA_THREADING_LAYER_PRIORITY")):
        numba.config.THREADING_LAYER_PRIORITY = list(NUMBA_LAYER_PRIORITY)
    start_numba_threads()
    set_pool_size(policy.threads)
    if policy.adaptive and cpu_run:
        _free_cpus = FreeCpus(process_cpus())
    return thread_report()


def set_pool_size(threads: int) -> None:
    """``threads`` for torch and Numba. Both counts belong to the calling thread (OpenMP's and Numba's
    are per thread), so the thread that trains calls this."""
    import numba
    import torch

    # Numba launched NUMBA_NUM_THREADS workers and can use no more than those.
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)  # after Numba's start, which resets OpenMP's count


def adapt_threads() -> int | None:
    """Between iterations (the run loop calls it): under ``auto`` on a CPU run, size both pools to the
    CPUs other processes left free since the last call. Returns the size, None when the policy in
    effect does not adapt."""
    if _free_cpus is None:
        return None
    threads = _free_cpus.free_threads()
    set_pool_size(threads)
    return threads


class FreeCpus:
    """How many of ``cpus`` other processes left free between two looks: the kernel's busy time of
    those CPUs (``/proc/stat``) less this process's own CPU time. Where that file cannot be read (not
    Linux), every CPU counts as free."""

    STAT = "/proc/stat"
    #: A shorter interval keeps the last answer: the kernel counts CPU time in ticks of 10 ms.
    MIN_INTERVAL_S = 0.2

    def __init__(self, cpus: set[int]):
        self.cpus = cpus
        self.ticks_per_s = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.last = self._look()
        self.threads = len(cpus)

    def _look(self) -> tuple[float, float, float] | None:
        """(busy seconds of ``cpus``, this process's CPU seconds, wall seconds), None if unreadable."""
        try:
            with open(self.STAT) as f:
                lines = f.readlines()
        except OSError:
            return None
        busy = 0
        for line in lines:
            name, *ticks = line.split()
            if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in self.cpus:
                t = [int(x) for x in ticks[:8]]  # user nice system idle iowait irq softirq steal
                busy += t[0] + t[1] + t[2] + t[5] + t[6] + t[7]  # steal: the hypervisor ran someone else
        own = os.times()
        return busy / self.ticks_per_s, own.user + own.system, time.monotonic()

    def others(self) -> float | None:
        """CPUs' worth of time other processes (and the hypervisor) used since the last answer; None
        when that was too recent to tell, or the kernel's counts cannot be read."""
        now, last = self._look(), self.last
        if now is None or last is None or now[2] - last[2] < self.MIN_INTERVAL_S:
            return None
        self.last = now
        return max(0.0, ((now[0] - last[0]) - (now[1] - last[1])) / (now[2] - last[2]))

    def free_threads(self) -> int:
        """The largest of :func:`pool_sizes` not above the CPUs left free (rounded to the nearest whole
        one); the last answer when :meth:`others` has none."""
        others = self.others()
        if others is not None:
            free = math.floor(len(self.cpus) - others + 0.5)
            self.threads = next((n for n in pool_sizes(len(self.cpus)) if n <= free), 1)
        return self.threads


def pool_sizes(cpus: int) -> list[int]:
    """The sizes an adaptive pool takes on ``cpus`` CPUs, largest first: all of them, half, one. Few on
    purpose: torch.compile guards on the thread count, so every size compiles its own graphs the
    first time it is used, and Dynamo keeps only a few versions of a function before it gives up
    compiling it."""
    return sorted({cpus, max(1, cpus // 2), 1}, reverse=True)


def thread_report() -> dict:
    """The threads in effect: the policy applied, torch's and Numba's thread counts now, Numba's
    threading layer and the OpenMP wait policy. Reading it starts nothing."""
    import numba
    import torch

    try:
        layer = numba.threading_layer()
        numba_threads = numba.get_num_threads()
    except ValueError:  # not started: no parallel kernel has run and the policy is off
        layer, numba_threads = "not started", numba.config.NUMBA_NUM_THREADS
    policy = "not applied"
    if _applied is not None:
        policy = f"{ENV_VAR}={_applied.setting}"
        if _applied.torch_threads:
            policy += f", --torch-threads {_applied.torch_threads}"
        if _free_cpus is not None:
            policy += f" (threads follow the free CPUs of {len(_free_cpus.cpus)})"
    return {"thread_policy": policy, "torch_threads": torch.get_num_threads(), "numba_threads": numba_threads,
            "numba_threading_layer": layer,
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY") or "OpenMP's default"}


def describe(report: dict) -> str:
    """:func:`thread_report` as one line of a run's printed configuration."""
    return (f"threads: {report['thread_policy']}; torch={report['torch_threads']} "
            f"numba={report['numba_threads']} ({report['numba_threading_layer']}), "
            f"OMP_WAIT_POLICY={report['omp_wait_policy']}")


__all__ = ["ENV_VAR", "FreeCpus", "ThreadPolicy", "adapt_threads", "apply_thread_policy", "describe", "pool_sizes",
           "process_cpus", "read_policy", "set_pool_size", "start_numba_threads", "thread_report"]
