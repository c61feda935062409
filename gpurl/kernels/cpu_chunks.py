"""How many envs one call of a CPU build's chunk function steps (:func:`.generated_source._cpu_sources`, small worlds).

Its own module because both launch paths need it: :mod:`.program`'s ``EnvKernel.launch`` and
:mod:`.direct_launch`, which launches through an ``EnvKernel`` and so must not import back into it.
"""
from __future__ import annotations

import functools


def envs_per_call(num_envs: int, num_agents: int, threads: int) -> int:
    """Envs per call of the CPU build's chunk function: enough agents per call that the call's argument
    passing is small next to the work, few enough that every one of ``threads`` threads gets several
    chunks (prange splits chunks evenly, and an env's cost varies with its state)."""
    by_work = max(1, 256 // max(1, num_agents))
    by_balance = max(1, num_envs // (8 * max(1, threads)))
    return min(by_work, by_balance)


@functools.lru_cache(maxsize=256)
def _cpu_envs_per_call(num_envs: int, num_agents: int) -> int:
    """:func:`envs_per_call` for Numba's pool: its size, not ``numba.get_num_threads()``, which costs a
    small env's launch a few percent; a lower thread count only leaves some chunks smaller than they could
    be, and the chunking never changes a result."""
    import numba

    return envs_per_call(num_envs, num_agents, numba.config.NUMBA_NUM_THREADS)
