"""The peer watchdog on a real TCPStore (in process): a silent peer is named, a finished one is not."""
from __future__ import annotations

import threading
from datetime import timedelta

import pytest
import torch.distributed as dist

from dist_helpers import free_port
from gpurl.multigpu.watchdog import EXIT_LOST_PEER, PeerWatchdog

pytestmark = pytest.mark.cpu


def _store():
    port = free_port()
    return dist.TCPStore("127.0.0.1", port, is_master=True, timeout=timedelta(seconds=10), wait_for_workers=False)


def test_silent_peer_is_named_and_ends_the_process(capsys):
    store = _store()
    exited = threading.Event()
    codes = []

    def fake_exit(code):
        codes.append(code)
        exited.set()

    survivor = PeerWatchdog(store, 0, 2, timeout_s=1.0, exit=fake_exit).start()
    dying = PeerWatchdog(store, 1, 2, timeout_s=1.0, exit=lambda code: None).start()
    dying.report_failure("ValueError: boom")
    dying.stop(clean=False)  # beats stop, no "done": as if killed after reporting
    assert exited.wait(10)
    survivor.stop()
    assert codes == [EXIT_LOST_PEER]
    err = capsys.readouterr().err
    assert "lost rank(s) [1]" in err and "ValueError: boom" in err


def test_finished_peer_is_not_a_loss():
    store = _store()
    codes = []
    survivor = PeerWatchdog(store, 0, 2, timeout_s=0.5, exit=codes.append).start()
    PeerWatchdog(store, 1, 2, timeout_s=0.5, exit=codes.append).start().stop(clean=True)
    threading.Event().wait(1.5)
    survivor.stop()
    assert codes == []
    assert "rank 1" not in survivor.lost_peers(observe_s=0.2)
