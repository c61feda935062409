"""Numba's thread pool started without undoing torch's thread count.

torch and Numba's "omp" threading layer share one OpenMP runtime, and Numba's layer sets OpenMP's thread count
to its own (all CPUs) when it starts, at the first parallel kernel. A script that called
``torch.set_num_threads(1)`` and then stepped a gpurl env on the CPU (``gpurl.make``, the Gymnasium, PettingZoo
or TorchRL adapters) found torch on every CPU afterwards, and a loaded machine made each parallel region wait on
the scheduler. gpurl's CPU builds therefore start Numba's layer before their first launch, give torch its count
back and cap Numba's at it: the process keeps one pool size, the one it chose. (gpurl's own entry points size
both pools first, :mod:`gpurl.train.threads`; then nothing changes here.)
"""
from __future__ import annotations

import sys

_started = False


def start_numba_threads() -> None:
    """Start Numba's threading layer now rather than at the first parallel kernel (idempotent). Numba has no
    public call for this; ``_launch_threads`` is what its first parallel call runs, and it runs once."""
    from numba.np.ufunc.parallel import _launch_threads

    _launch_threads()


def start_numba_keeping_torch_threads() -> None:
    """Before a CPU build's first launch: start Numba's layer; where torch is loaded, give it back the thread
    count it had and give Numba no more (see the module docstring). Later calls return at once."""
    global _started
    if _started:
        return
    torch = sys.modules.get("torch")  # not loaded: no count to keep (the kernels need no torch)
    threads = torch.get_num_threads() if torch is not None else None
    start_numba_threads()
    _started = True
    if threads is not None:
        import numba

        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))


__all__ = ["start_numba_keeping_torch_threads", "start_numba_threads"]
