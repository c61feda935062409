"""``simple`` against mpe2's ``simple_v3``: whole episodes side by side (tests/mpe2_pairing.py)."""
from __future__ import annotations

import pytest

pytest.importorskip("mpe2")
from mpe2 import simple_v3  # noqa: E402

from mpe2_pairing import Pairing, check_pettingzoo, check_whole_episodes  # noqa: E402

pytestmark = pytest.mark.cpu


@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "continuous"])
@pytest.mark.parametrize("crowded", [False, True], ids=["spread", "crowded"])
def test_whole_episodes_match_mpe2(continuous, crowded):
    stats = check_whole_episodes(Pairing("simple", simple_v3, dict(max_cycles=25, continuous_actions=continuous)),
                                 crowded)
    assert stats["steps"] == 25 and stats["truncated"] == 3 and stats["terminated"] == 0
    assert stats["replays"] == 0


def test_pettingzoo_adapter_passes_the_api_test_with_mpe2s_names_and_spaces():
    check_pettingzoo("simple", simple_v3)
