"""Peer liveness: a rank that dies or hangs makes every other rank exit with an error naming it.

Collectives alone do not guarantee that: a gloo peer that is SIGSTOPped, or an NCCL peer that died,
can leave the others blocked inside a collective. So every rank runs a daemon thread that bumps its own
counter in the rendezvous store (``store.add``, no clocks compared across machines) and watches its
peers' counters. A peer whose counter has not moved for ``timeout_s`` is lost: the thread prints which
rank (and the failure that rank reported, if it had time to report one) and ends the process with
``EXIT_LOST_PEER``, whatever the main thread is blocked in. A rank that fails with an exception writes
the exception into the store first (``report_failure``) so its peers can say why.
"""
from __future__ import annotations

import os
import sys
import threading
import time

EXIT_LOST_PEER = 75
_PREFIX = "gpurl/watchdog/"


class PeerWatchdog:
    """Heartbeats for ``rank`` of ``world_size`` through ``store`` (a torch.distributed Store)."""

    def __init__(self, store, rank: int, world_size: int, timeout_s: float, store_address: str = "",
                 exit=os._exit):
        self.store, self.rank, self.world_size = store, rank, world_size
        self.timeout_s = float(timeout_s)
        self.interval_s = min(max(self.timeout_s / 10.0, 0.1), 5.0)
        self.store_address = store_address
        self._exit = exit
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"gpurl-watchdog-rank{rank}", daemon=True)

    def start(self) -> "PeerWatchdog":
        self._beat()
        self._thread.start()
        return self

    def stop(self, clean: bool = True) -> None:
        """Stop watching; ``clean`` tells the peers this rank finished (its silence is not a loss)."""
        if clean:
            try:
                self.store.set(f"{_PREFIX}done/{self.rank}", "1")
            except Exception:  # noqa: BLE001 - the store may already be gone at shutdown
                pass
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2 * self.interval_s + 1)

    def report_failure(self, message: str) -> None:
        """Leave ``message`` in the store for the peers' error messages (best effort)."""
        try:
            self.store.set(f"{_PREFIX}failed/{self.rank}", message[-2000:])
        except Exception:  # noqa: BLE001 - reporting must never mask the original error
            pass

    # ---- the thread ------------------------------------------------------------------------------

    def _beat(self) -> None:
        self.store.add(f"{_PREFIX}beat/{self.rank}", 1)

    def _run(self) -> None:
        peers = [r for r in range(self.world_size) if r != self.rank]
        last_count = {r: -1 for r in peers}
        last_change = {r: time.monotonic() for r in peers}
        while not self._stop.wait(self.interval_s):
            try:
                self._beat()
                now = time.monotonic()
                for r in peers:
                    count = self.store.add(f"{_PREFIX}beat/{r}", 0)
                    if count != last_count[r]:
                        last_count[r], last_change[r] = count, now
                lost = [r for r in peers if now - last_change[r] > self.timeout_s and not self._done(r)]
            except Exception as err:  # noqa: BLE001 - the store's host is gone: so is whoever hosted it
                if self._stop.is_set():
                    return
                self._fail(f"lost contact with the rendezvous store {self.store_address} ({type(err).__name__}: "
                           f"{err}); the rank or launcher hosting it (rank 0 when not under torchrun) is gone")
                return
            if lost:
                reasons = "; ".join(f"rank {r}: {self._failure(r)}" for r in lost)
                self._fail(f"lost rank(s) {lost}: no heartbeat for more than {self.timeout_s:g} s "
                           f"(dist_timeout). Last report: {reasons}")
                return

    def _done(self, rank: int) -> bool:
        return self.store.check([f"{_PREFIX}done/{rank}"])

    def _failure(self, rank: int) -> str:
        key = f"{_PREFIX}failed/{rank}"
        if self.store.check([key]):
            return self.store.get(key).decode(errors="replace")
        return "none (killed, crashed hard, or hung)"

    def _fail(self, message: str) -> None:
        print(f"gpurl: rank {self.rank}: {message}. Exiting.", file=sys.stderr, flush=True)
        self._exit(EXIT_LOST_PEER)

    def lost_peers(self, observe_s: float | None = None) -> str:
        """After a failed collective: which peers stopped beating (watched for ``observe_s``, default a
        few heartbeat intervals) or reported a failure, as a sentence. Empty if all look alive."""
        import time as _time

        peers = [r for r in range(self.world_size) if r != self.rank]
        try:
            before = {r: self.store.add(f"{_PREFIX}beat/{r}", 0) for r in peers}
            _time.sleep(observe_s if observe_s is not None else min(3 * self.interval_s + 0.5, self.timeout_s))
            after = {r: self.store.add(f"{_PREFIX}beat/{r}", 0) for r in peers}
            silent = [r for r in peers if after[r] == before[r] and not self._done(r)]
            failed = [r for r in peers if self.store.check([f"{_PREFIX}failed/{r}"])]
        except Exception as err:  # noqa: BLE001
            return (f"lost contact with the rendezvous store {self.store_address} ({type(err).__name__}); "
                    f"the rank or launcher hosting it (rank 0 when not under torchrun) is gone")
        parts = [f"rank {r} is gone (no heartbeat): {self._failure(r)}" for r in silent]
        parts += [f"rank {r} failed: {self._failure(r)}" for r in failed if r not in silent]
        return "; ".join(parts)
