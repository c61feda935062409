"""The MPE suite as ``bench/peers.py`` runs it: per scenario, mpe2 1.1.1's defaults, how each peer is built
from them (JaxMARL's env id and kwargs, VMAS's scenario and kwargs, mpe2's module) and the semantic
differences between each peer's port and mpe2 (read from JaxMARL 0.2.0, VMAS 1.5.2 and mpe2 1.1.1).
(Part of a library: bench/peers.py prints the RESULT line.) Imports neither JAX nor VMAS.

A run configuration is a scenario's name, optionally with overrides of its mpe2 parameters:
``simple_tag`` or ``simple_tag:num_adversaries=10:num_good=30:num_obstacles=5``.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Callable

#: Parameters every mpe2 scenario takes (``dynamic_rescaling`` and ``render_mode`` are rendering only).
COMMON = {"max_cycles": 25, "continuous_actions": False}


class Unsupported(Exception):
    """A peer cannot express this configuration (it is named and skipped)."""


@dataclass(frozen=True)
class Scenario:
    name: str  # gpurl's and mpe2's name
    mpe2_module: str  # mpe2.<module>.parallel_env
    defaults: dict  # mpe2 1.1.1's defaults of the scenario's own parameters
    agents: Callable[[dict], int]  # number of agents from the parameters
    jaxmarl: "PeerBuild | None" = None  # JaxMARL's env id and kwargs (max_steps added by RunConfig)
    vmas: "PeerBuild | None" = None  # VMAS's scenario and kwargs
    notes: dict = field(default_factory=dict)  # peer -> what differs from mpe2


_PO = {"num_agent_neighbors": None, "num_landmark_neighbors": None}  # mpe2 1.1.1's partial observability
_VMAS_ACT = ("VMAS Discrete(9) moves (3 per axis, diagonals included, x its dim_c for a speaker, immovable "
             "agents too)")


@dataclass(frozen=True)
class PeerBuild:
    """How a peer builds a scenario: its name for it, the mpe2 parameters it can express (``known``; any
    other must keep mpe2's default) and its kwargs (a callable value is computed from the parameters)."""

    peer: str
    env_name: str
    known: tuple = ()
    fixed: dict = field(default_factory=dict)

    def __call__(self, params: dict, defaults: dict) -> tuple[str, dict]:
        odd = {k: v for k, v in params.items() if k not in self.known and k not in COMMON and v != defaults.get(k)}
        if odd:
            raise Unsupported(f"{self.peer} has no equivalent of {odd}")
        return self.env_name, {k: (v(params) if callable(v) else v) for k, v in self.fixed.items()}


def _jm(env_id: str, known: tuple = (), **fixed) -> PeerBuild:
    return PeerBuild("JaxMARL", env_id, known, fixed)


def _vm(name: str, known: tuple = (), **fixed) -> PeerBuild:
    return PeerBuild("VMAS", name, known, fixed)


_S = [
    Scenario("simple", "simple_v3", {}, lambda p: 1,
             _jm("MPE_simple_v3"), _vm("simple"),
             {"jaxmarl": "same task (JaxMARL also integrates the immovable landmark, a no-op).",
              "vmas": f"{_VMAS_ACT}; force = action x u_multiplier 1.0 (mpe2: x accel 5.0): VMAS agents "
                      "accelerate 5x slower; VMAS integrates position with the new velocity (mpe2: the old)."}),
    Scenario("simple_adversary", "simple_adversary_v3", {"N": 2, **_PO}, lambda p: p["N"] + 1,
             _jm("MPE_simple_adversary_v3", ("N",), num_good_agents=lambda p: p["N"], num_adversaries=1,
                 num_obs=lambda p: p["N"]),
             _vm("simple_adversary", ("N",), n_agents=lambda p: p["N"] + 1, n_adversaries=1),
             {"jaxmarl": "same task; no partial observability (num_*_neighbors must stay None).",
              "vmas": f"{_VMAS_ACT}, force x 1.0 (mpe2 5.0); the goal landmark is drawn once per reset for "
                      "all envs together (mpe2: per env)."}),
    Scenario("simple_crypto", "simple_crypto_v3", {}, lambda p: 3,
             _jm("MPE_simple_crypto_v3"), _vm("simple_crypto"),
             {"jaxmarl": "agent order eve_0, alice_0, bob_0 (mpe2: eve_0, bob_0, alice_0); the colours "
                         "(goal, key) are one-hot x 255 (mpe2: one-hot), so observations and the squared "
                         "message-to-goal rewards are on another scale; the 'has spoken' check is over all "
                         "agents together (mpe2: per agent; every agent speaks each step, so no effect).",
              "vmas": "Discrete(36) = 9 moves x 4 messages although the agents are immovable; the key and "
                      "the secret are random 0/1 vectors of length 4 (mpe2: the one-hot colour of one of two "
                      "landmarks)."}),
    Scenario("simple_push", "simple_push_v3", {}, lambda p: 2,
             _jm("MPE_simple_push_v3"), _vm("simple_push"),
             {"jaxmarl": "same task (landmark radius 0.2 vs mpe2's 0.05: landmarks do not collide, so "
                         "rendering only).",
              "vmas": f"{_VMAS_ACT}, force x 1.0 (mpe2 5.0), its own collision model; the goal landmark is "
                      "drawn once per reset for all envs together."}),
    Scenario("simple_reference", "simple_reference_v3", {"local_ratio": 0.5}, lambda p: 2,
             _jm("MPE_simple_reference_v3", ("local_ratio",), local_ratio=lambda p: p["local_ratio"]),
             _vm("simple_reference"),
             {"jaxmarl": "same task with the goal indices relabelled (JaxMARL's goal[i] is the landmark "
                         "agent i must reach, mpe2's the one the other agent must reach): same distribution.",
              "vmas": "Discrete(90) = 9 moves x 10 messages; force x 1.0 (mpe2 5.0); reward: the sum of both "
                      "agents' distances (no local_ratio); goals drawn once per reset for all envs."}),
    Scenario("simple_speaker_listener", "simple_speaker_listener_v4", {}, lambda p: 2,
             _jm("MPE_simple_speaker_listener_v4"), _vm("simple_speaker_listener"),
             {"jaxmarl": "same task.",
              "vmas": "speaker Discrete(27) = 9 x 3 (immovable), listener Discrete(9); force x 1.0 (mpe2 5.0); "
                      "reward -distance counted twice (mpe2: -squared distance once); goal drawn once per "
                      "reset for all envs."}),
    Scenario("simple_spread", "simple_spread_v3",
             {"N": 3, "local_ratio": 0.5, "curriculum": False, "terminate_on_success": False, **_PO},
             lambda p: p["N"],
             _jm("MPE_simple_spread_v3", ("N", "local_ratio"), num_agents=lambda p: p["N"],
                 num_landmarks=lambda p: p["N"], local_ratio=lambda p: p["local_ratio"]),
             _vm("simple_spread", ("N",), n_agents=lambda p: p["N"]),
             {"jaxmarl": "same task; no curriculum, terminate_on_success or partial observability.",
              "vmas": f"{_VMAS_ACT}, force x 1.0 (mpe2 5.0), its own collision model; observations without "
                      "the (all-zero) comm block (14 vs 18); one shared reward that counts the landmark term N "
                      "times and every collision (no local_ratio)."}),
    Scenario("simple_tag", "simple_tag_v3",
             {"num_good": 1, "num_adversaries": 3, "num_obstacles": 2, "curriculum": False,
              "terminate_on_success": False, **_PO},
             lambda p: p["num_good"] + p["num_adversaries"],
             _jm("MPE_simple_tag_v3", ("num_good", "num_adversaries", "num_obstacles"),
                 num_good_agents=lambda p: p["num_good"], num_adversaries=lambda p: p["num_adversaries"],
                 num_obs=lambda p: p["num_obstacles"]),
             _vm("simple_tag", ("num_good", "num_adversaries", "num_obstacles"),
                 num_good_agents=lambda p: p["num_good"], num_adversaries=lambda p: p["num_adversaries"],
                 num_landmarks=lambda p: p["num_obstacles"]),
             {"jaxmarl": "same step dynamics; obstacles reset in U(-1,1)^2 (mpe2: U(-0.9,0.9)^2); for "
                         "num_good = 1 the same observations and rewards; for num_good > 1 JaxMARL's adversary "
                         "observation keeps only one other agent's velocity and its good-agent reward reads the "
                         "wrong row (comparable in work, not in semantics).",
              "vmas": f"{_VMAS_ACT}; 10 physics substeps per step, its collision model, a bounded world, "
                      "other observations: each VMAS step does more work."}),
    Scenario("simple_world_comm", "simple_world_comm_v3",
             {"num_good": 2, "num_adversaries": 4, "num_obstacles": 1, "num_food": 2, "num_forests": 2},
             lambda p: p["num_good"] + p["num_adversaries"],
             _jm("MPE_simple_world_comm_v3", ("num_good", "num_adversaries", "num_obstacles", "num_food",
                                              "num_forests"),
                 num_good_agents=lambda p: p["num_good"], num_adversaries=lambda p: p["num_adversaries"],
                 num_obs=lambda p: p["num_obstacles"], num_food=lambda p: p["num_food"],
                 num_forests=lambda p: p["num_forests"], action_type="Discrete"),
             _vm("simple_world_comm", ("num_good", "num_adversaries", "num_obstacles", "num_food",
                                       "num_forests"),
                 num_good_agents=lambda p: p["num_good"], num_adversaries=lambda p: p["num_adversaries"],
                 num_landmarks=lambda p: p["num_obstacles"], num_food=lambda p: p["num_food"],
                 num_forests=lambda p: p["num_forests"]),
             {"jaxmarl": "built with action_type='Discrete' (its default is Continuous); leader Discrete(20) "
                         "= move + 5 x message as in mpe2; obstacles, food and forests reset in U(-1,1)^2 "
                         "(mpe2: U(-0.9,0.9)^2); the observations keep the last 1 (good) / 2 (adversaries) "
                         "other agents' velocities, right only for num_good = 2 (the default).",
              "vmas": f"{_VMAS_ACT} (leader Discrete(36)), a bounded world, its collision model, other "
                      "observations (60/56 wide vs 34/28)."}),
    Scenario("simple_line", "simple_line_v1", {"N": 4, "terminate_on_success": False}, lambda p: p["N"]),
    Scenario("simple_formation", "simple_formation_v1", {"N": 4, "terminate_on_success": False},
             lambda p: p["N"]),
    Scenario("collect_treasure", "collect_treasure_v1",
             {"num_collectors": 6, "num_deposits": 2, "num_treasures": 6},
             lambda p: p["num_collectors"] + p["num_deposits"]),
]
SCENARIOS = {s.name: s for s in _S}

#: Differences every scenario shares, per peer.
COMMON_NOTES = {
    "jaxmarl": "JaxMARL ends an episode when step >= max_steps before counting the step (max_steps + 1 steps): "
               "built with max_steps = max_cycles - 1 so its episodes last max_cycles steps like gpurl's and "
               "mpe2's. Its step always computes a reset too and selects it at the episode's end (autoreset), "
               "returning the reset observation in place of the final one. "
               "No parameter for mpe2 1.1.1's curriculum, terminate_on_success, partial observability: such a "
               "configuration skips JaxMARL.",
    "vmas": "VMAS's MPE ports are its own: no episode limit (reset here every max_cycles steps, all envs "
            "together), its own physics (semi-implicit integration, its collision model), its own action "
            "spaces; its ratios compare libraries, not identical envs.",
    "mpe2": "the semantic reference (float64): one Python env per env, stepped in a loop, reset when its "
            "episode is over.",
    "gpurl": "mpe2 1.1.1's scenario in float32 (docs/specs/mpe.md); validate=False, global_state=False (no peer "
             "computes one); autoresets, writing each step's observations, rewards, dones and the final "
             "observations of envs that ended into its buffers.",
}


@dataclass(frozen=True)
class RunConfig:
    """One scenario with its full mpe2 parameters (defaults + overrides)."""

    label: str
    scenario: Scenario
    params: dict
    overrides: dict

    @property
    def name(self) -> str:
        return self.scenario.name

    @property
    def num_agents(self) -> int:
        return self.scenario.agents(self.params)

    @property
    def max_cycles(self) -> int:
        return self.params["max_cycles"]

    def gpurl_kwargs(self) -> dict:
        """What ``gpurl.make`` gets: every parameter that is not an off switch (None/False), and every
        override, so gpurl runs mpe2's defaults even where its own defaults would differ."""
        return {k: v for k, v in self.params.items() if (v is not None and v is not False) or k in self.overrides}

    def jaxmarl(self) -> tuple[str, dict]:
        if self.scenario.jaxmarl is None:
            raise Unsupported(f"JaxMARL has no {self.name}")
        self._discrete("JaxMARL")
        env_id, kwargs = self.scenario.jaxmarl(self.params, self.scenario.defaults)
        return env_id, {**kwargs, "max_steps": self.max_cycles - 1}

    def vmas(self) -> tuple[str, dict]:
        if self.scenario.vmas is None:
            raise Unsupported(f"VMAS has no {self.name}")
        self._discrete("VMAS")
        return self.scenario.vmas(self.params, self.scenario.defaults)

    def mpe2_kwargs(self) -> dict:
        return dict(self.params)

    def _discrete(self, peer: str) -> None:
        if self.params["continuous_actions"]:
            raise Unsupported(f"this benchmark drives {peer} with Discrete actions only")


def _value(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def run_config(name: str, label: str | None = None, **overrides) -> RunConfig:
    """Scenario ``name`` with mpe2's defaults, ``overrides`` replacing some (mpe2 parameter names)."""
    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}; choose from {list(SCENARIOS)}")
    scn = SCENARIOS[name]
    bad = sorted(set(overrides) - set(scn.defaults) - set(COMMON))
    if bad:
        raise ValueError(f"{name} has no mpe2 parameter(s) {bad}; its parameters: {sorted({**COMMON, **scn.defaults})}")
    label = label or ":".join([name] + [f"{k}={v}" for k, v in overrides.items()])
    return RunConfig(label, scn, {**scn.defaults, **COMMON, **overrides}, dict(overrides))


def parse_config(entry: str) -> RunConfig:
    """``name`` or ``name:key=value:key=value`` (mpe2 parameter names)."""
    name, *pairs = entry.strip().split(":")
    overrides = {}
    for pair in pairs:
        key, sep, val = pair.partition("=")
        if not sep:
            raise ValueError(f"{entry!r}: {pair!r} is not key=value")
        overrides[key] = _value(val)
    return run_config(name, entry.strip(), **overrides)


def make_jaxmarl(cfg: RunConfig):
    """JaxMARL's port of ``cfg`` with max_cycles-step episodes (raises :class:`Unsupported`)."""
    import jaxmarl

    env_id, kwargs = cfg.jaxmarl()
    return jaxmarl.make(env_id, **kwargs)


def check_mpe2_defaults() -> list[str]:
    """Where this table's defaults differ from the installed mpe2's signatures (empty when they agree)."""
    import importlib
    import inspect

    out = []
    for scn in SCENARIOS.values():
        sig = inspect.signature(importlib.import_module(f"mpe2.{scn.mpe2_module}").raw_env.__init__)
        real = {k: p.default for k, p in sig.parameters.items()
                if k not in ("self", "render_mode", "benchmark_data", "dynamic_rescaling")}
        mine = {**scn.defaults, **COMMON}
        if real != mine:
            out.append(f"{scn.name}: table {mine} vs mpe2 {real}")
    return out
