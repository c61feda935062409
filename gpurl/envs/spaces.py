"""Groups of agents and their action spaces (the env API's ``env.groups``)."""
from __future__ import annotations

from dataclasses import dataclass

import gymnasium
import numpy as np


@dataclass(frozen=True)
class Group:
    """Agents ``agents`` (a slice of the agent axis) share an obs layout and an action space."""

    agents: slice
    obs_dim: int
    action_space: gymnasium.Space


def action_bounds(space: gymnasium.Space) -> tuple[int, np.ndarray | None]:
    """(action dims, exclusive upper bounds int64 [dims] or None for Box) of a discrete-ish space."""
    if isinstance(space, gymnasium.spaces.Discrete):
        if space.start != 0:
            raise ValueError("gpurl envs use Discrete spaces starting at 0")
        return 1, np.array([space.n], dtype=np.int64)
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        if space.nvec.ndim != 1:
            raise ValueError("gpurl envs use 1-d MultiDiscrete spaces")
        return len(space.nvec), space.nvec.astype(np.int64)
    if isinstance(space, gymnasium.spaces.Box):
        return int(np.prod(space.shape)), None
    raise TypeError(f"unsupported action space {space!r}")


def check_groups(groups: dict[str, Group], env_name: str) -> int:
    """The agent count of ``groups``, after checking that their slices tile 0..N-1 in order: every agent
    in exactly one group (an overlap or a gap is an error naming the groups)."""
    if not groups:
        raise ValueError(f"{env_name}.groups() is empty: an env needs at least one group of agents")
    expected_start = 0
    previous = None
    for name, group in groups.items():
        if not isinstance(group, Group):
            raise TypeError(f"{env_name}.groups()[{name!r}] must be a gpurl.Group, got {type(group).__name__}")
        agents = group.agents
        if not isinstance(agents, slice) or agents.step not in (None, 1) or agents.start is None or agents.stop is None:
            raise ValueError(f"{env_name} group {name!r}: agents must be a slice(start, stop) with step 1, "
                             f"got {agents!r}")
        if agents.stop <= agents.start:
            raise ValueError(f"{env_name} group {name!r} is empty: agents {agents.start}..{agents.stop - 1}")
        if agents.start < expected_start:
            raise ValueError(f"{env_name} groups {previous!r} and {name!r} overlap: agents "
                             f"{agents.start}..{expected_start - 1} are in both")
        if agents.start > expected_start:
            where = f"between groups {previous!r} and {name!r}" if previous else f"before group {name!r}"
            raise ValueError(f"{env_name}: agents {expected_start}..{agents.start - 1} are in no group ({where}); "
                             "groups must cover agents 0..N-1 in order")
        expected_start, previous = agents.stop, name
    return expected_start


def action_layout(groups: dict[str, Group], env_name: str) -> tuple[int, bool]:
    """(action_dims D, discrete) of an env's ``[E, N, D]`` actions.

    Discrete and MultiDiscrete groups must agree on D. Box groups may differ in width (mpe2's speaker and
    listener): D is the widest, and a narrower group's actions are zero-padded after its own width (the
    kernels never read the padding). Integer and Box groups cannot be mixed: one tensor has one dtype."""
    bounds = {name: action_bounds(g.action_space) for name, g in groups.items()}
    integer = {name for name, (_, high) in bounds.items() if high is not None}
    if integer and len(integer) != len(bounds):
        box = sorted(set(bounds) - integer)
        raise ValueError(f"{env_name}: groups {sorted(integer)} have integer actions and {box} Box actions; "
                         "an env's actions are one tensor of one dtype")
    dims = {name: d for name, (d, _) in bounds.items()}
    if integer and len(set(dims.values())) != 1:
        raise ValueError(f"{env_name}: integer action groups must have the same number of action dims, got {dims}")
    return max(dims.values()), bool(integer)
