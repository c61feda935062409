"""bench/peers.py's MPE suite table (bench/peers_lib/mpe_suite.py): mpe2's defaults and agent counts, the
configurations each peer is built with (JaxMARL's episode length), the overrides and what a peer cannot
express. JaxMARL and VMAS are not needed (they are the optional peers extra); mpe2 is a dev dependency."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from peers_lib.envs import fmt_spaces  # noqa: E402
from peers_lib.mpe_suite import SCENARIOS, Unsupported, check_mpe2_defaults, parse_config  # noqa: E402

pytestmark = pytest.mark.cpu

SUITE = ["simple", "simple_adversary", "simple_crypto", "simple_push", "simple_reference", "simple_speaker_listener",
         "simple_spread", "simple_tag", "simple_world_comm", "simple_line", "simple_formation", "collect_treasure"]


def test_the_suite_is_mpe2s_twelve_scenarios():
    assert list(SCENARIOS) == SUITE
    assert [s.name for s in SCENARIOS.values() if s.jaxmarl is not None] == SUITE[:9]
    assert [s.name for s in SCENARIOS.values() if s.vmas is not None] == SUITE[:9]


def test_defaults_and_agent_counts_are_mpe2s():
    pytest.importorskip("mpe2")
    assert check_mpe2_defaults() == []
    for name in SUITE:
        cfg = parse_config(name)
        env = importlib.import_module(f"mpe2.{cfg.scenario.mpe2_module}").parallel_env(**cfg.mpe2_kwargs())
        assert len(env.possible_agents) == cfg.num_agents, name


def test_jaxmarl_episodes_last_max_cycles_steps():
    # JaxMARL ends an episode when step >= max_steps before counting the step: max_steps + 1 steps.
    env_id, kwargs = parse_config("simple_tag").jaxmarl()
    assert (env_id, kwargs["max_steps"]) == ("MPE_simple_tag_v3", 24)
    assert parse_config("simple_spread:max_cycles=40").jaxmarl()[1]["max_steps"] == 39
    assert parse_config("simple_world_comm").jaxmarl()[1]["action_type"] == "Discrete"  # JaxMARL's default: Box


def test_overrides_reach_every_peer():
    cfg = parse_config("simple_tag:num_adversaries=10:num_good=30:num_obstacles=5")
    assert cfg.label == "simple_tag:num_adversaries=10:num_good=30:num_obstacles=5" and cfg.num_agents == 40
    assert cfg.gpurl_kwargs() == {"num_good": 30, "num_adversaries": 10, "num_obstacles": 5, "max_cycles": 25}
    assert cfg.jaxmarl()[1] == {"num_good_agents": 30, "num_adversaries": 10, "num_obs": 5, "max_steps": 24}
    assert cfg.vmas() == ("simple_tag", {"num_good_agents": 30, "num_adversaries": 10, "num_landmarks": 5})
    assert parse_config("simple_adversary:N=3").vmas()[1] == {"n_agents": 4, "n_adversaries": 1}


def test_what_a_peer_cannot_express_is_unsupported():
    cfg = parse_config("simple_spread:curriculum=True")
    assert cfg.gpurl_kwargs()["curriculum"] is True  # an override reaches gpurl even as an off switch
    for build in (cfg.jaxmarl, cfg.vmas):
        with pytest.raises(Unsupported, match="curriculum"):
            build()
    with pytest.raises(Unsupported, match="local_ratio"):
        parse_config("simple_reference:local_ratio=0.2").vmas()
    assert parse_config("simple_reference:local_ratio=0.2").jaxmarl()[1]["local_ratio"] == 0.2
    with pytest.raises(Unsupported, match="Discrete"):
        parse_config("simple:continuous_actions=True").jaxmarl()
    with pytest.raises(Unsupported, match="JaxMARL has no simple_line"):
        parse_config("simple_line").jaxmarl()


def test_bad_names_are_errors():
    with pytest.raises(ValueError, match="unknown scenario"):
        parse_config("simple_nothing")
    with pytest.raises(ValueError, match="no mpe2 parameter"):
        parse_config("simple:N=3")
    with pytest.raises(ValueError, match="key=value"):
        parse_config("simple_spread:N")


def test_spaces_print_consecutive_agents_together():
    rows = [("a0", 5, 16), ("a1", 5, 16), ("a2", 5, 16), ("g0", 5, 14), ("s", 3, 3), ("l", 3, 3)]
    assert fmt_spaces(rows) == "a0..a2 D5/obs16, g0 D5/obs14, s,l D3/obs3"
