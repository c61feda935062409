"""Kernels and an env whose declared sizes are too small for what their phases write (issue 40, "author
mistakes cannot write out of bounds"), for tests/test_kernel_bounds.py and tests/test_sim_kernel_bounds.py.

Each writing line ends in a ``# WRITES: <name>`` comment; :func:`line_of` finds it, and the tests assert that
an error names this file, that line, the function, the index and the declared size.

- raw kernels over :class:`Arrays`: an obs row written ``OBS_WRITTEN`` wide, two more than declared
  (:func:`declared_arrays`); an agent writing its right neighbour (``i + 1``: past ``num_agents`` for the last
  agent); a per-env count written at index ``size``;
- :class:`Boxes`, a complete env whose every declared size is ``what its phases write - <param>_short``:
  ``mark`` [E, N - mark_short] (a start phase, per agent), ``stock`` [E, items - stock_short] (a start phase,
  per env), the obs [E, N, width - obs_short] (start and step phases, per agent) and ``trail`` [E, items -
  trail_short] (a step phase only). A positive ``*_short`` is a mistake; zero or negative is not.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import gymnasium
import numpy as np

import gpurl
from gpurl.envs import KernelEnv, field
from gpurl.envs.params import ranged
from gpurl.kernels import device, per_agent, per_env

PATH = Path(__file__).resolve()
OBS_WRITTEN = 4  # features the raw observe phase writes


def line_of(name: str) -> int:
    """Line number of the line marked ``# WRITES: name`` in this file."""
    marker = f"# WRITES: {name}"
    return next(n for n, line in enumerate(PATH.read_text().splitlines(), 1) if line.rstrip().endswith(marker))


# ---- raw kernels ----------------------------------------------------------------------------------------


class Arrays(NamedTuple):
    obs: np.ndarray     # float32 [E, N, D]
    x: np.ndarray       # int32 [E, N]
    counts: np.ndarray  # int32 [E, K]


def declared_arrays(num_envs=2, num_agents=3, obs_dim=OBS_WRITTEN - 2, counts=4) -> Arrays:
    """Arrays as declared: by default the obs two features narrower than ``observe`` writes."""
    return Arrays(obs=np.zeros((num_envs, num_agents, obs_dim), np.float32),
                  x=np.arange(num_envs * num_agents, dtype=np.int32).reshape(num_envs, num_agents),
                  counts=np.zeros((num_envs, counts), np.int32))


def observe(e, i, s):
    for f in range(OBS_WRITTEN):
        s.obs[e, i, f] = np.float32(f)  # WRITES: obs-row


def observe_row(e, i, s):
    row = s.obs[e, i]  # the row as a view: NumPy's message names the view's axis, gpurl the array's
    for f in range(OBS_WRITTEN):
        row[f] = np.float32(f)  # WRITES: obs-view


def pass_right(e, i, s):
    s.x[e, i + 1] = s.x[e, i]  # WRITES: next-agent


def count_at_size(e, s):
    s.counts[e, s.counts.shape[1]] = 1  # WRITES: at-size


def within(e, i, s):
    for f in range(s.obs.shape[2]):
        s.obs[e, i, f] = np.float32(f)
    s.x[e, i] += 1


def gather(e, i, s):
    s.x[e, i] = s.counts[e, s.x[e, i]]  # WRITES: data-index


# ---- an env --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BoxesParams:
    num_agents: int = ranged(2, ge=1, le=64)
    """Agents of the one group."""
    width: int = ranged(3, ge=1, le=64)
    """Obs features every agent writes."""
    items: int = ranged(2, ge=1, le=64)
    """Entries of ``stock`` (at a start) and ``trail`` (each step) every env writes."""
    episode_length: int = ranged(5, ge=1, le=1000)
    """Steps before truncation."""
    obs_short: int = ranged(0, ge=-4, le=63)
    """The declared obs size is ``width - obs_short``."""
    mark_short: int = ranged(0, ge=-4, le=64)
    """``mark`` is declared [E, num_agents - mark_short]."""
    stock_short: int = ranged(0, ge=-4, le=64)
    """``stock`` is declared [E, items - stock_short]."""
    trail_short: int = ranged(0, ge=-4, le=64)
    """``trail`` is declared [E, items - trail_short]."""


def place(e, i, s, c, actions):
    s.mark[e, i] = i + 1  # WRITES: mark


def fill_stock(e, s, c, actions):
    s.t[e] = 0
    for k in range(c.items):
        s.stock[e, k] = k + 1  # WRITES: stock


@device  # a start phase, and a helper of reward
def observe_boxes(e, i, s, c, actions):
    for f in range(c.width):
        s.obs[e, i, f] = np.float32(f + s.t[e])  # WRITES: obs


def tick(e, s, c, actions):
    s.t[e] += 1
    s.truncated[e] = s.t[e] >= c.episode_length
    for k in range(c.items):
        s.trail[e, k] = s.t[e]  # WRITES: trail


def reward(e, i, s, c, actions):
    s.reward[e, i] = np.float32(actions[e, i, 0])
    observe_boxes(e, i, s, c, actions)


class Boxes(KernelEnv):
    """Writes ``width`` obs features per agent and ``items`` entries of two per-env arrays; declares them
    ``*_short`` smaller (see the module docstring)."""

    name = "bounds_boxes"
    params_type = BoxesParams
    state = {"mark": field("int32", "mark_size"), "stock": field("int32", "stock_size"),
             "trail": field("int32", "trail_size"), "t": field("int32")}
    step_phases = [per_env(tick), per_agent(reward)]
    start_phases = [per_agent(place), per_env(fill_stock), per_agent(observe_boxes)]

    def groups(self):
        p = self.params
        return {"box": gpurl.Group(slice(0, p.num_agents), p.width - p.obs_short, gymnasium.spaces.Discrete(2))}

    def field_sizes(self):
        p = self.params
        return {"mark_size": p.num_agents - p.mark_short, "stock_size": p.items - p.stock_short,
                "trail_size": p.items - p.trail_short}

    def constants(self):
        p = self.params
        return dict(width=np.int32(p.width), items=np.int32(p.items), episode_length=np.int32(p.episode_length))


#: param -> (the line it makes write out of bounds, its function, "per agent"/"per env", the first launch
#: that runs it)
BOXES_MISTAKES = {
    "mark_short": ("mark", "place", "per agent", "reset"),
    "stock_short": ("stock", "fill_stock", "per env", "reset"),
    "obs_short": ("obs", "observe_boxes", "per agent", "reset"),
    "trail_short": ("trail", "tick", "per env", "step"),
}


def first_mistake(params: dict) -> str | None:
    """The ``*_short`` param whose mistake the env meets first (start phases in order, then the step)."""
    return next((name for name in BOXES_MISTAKES if params.get(name, 0) > 0), None)


def declared_size(params: dict, name: str) -> int:
    p = BoxesParams(**params)
    whole = {"mark_short": p.num_agents, "stock_short": p.items, "obs_short": p.width, "trail_short": p.items}[name]
    return whole - getattr(p, name)
