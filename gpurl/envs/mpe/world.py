"""A particle world as a scenario declares it: kinds of entity, groups of agents, landmarks, channels.

mpe2 1.1.1 (``_mpe_utils/core.py``) gives every entity a size, a mass and flags, and every agent an
acceleration, a speed cap and a "silent" flag. In every scenario these properties are shared by all entities
of one kind (an adversary, a food landmark, ...), so a scenario names its kinds once (:class:`Kind`), lists
its agents as groups of one kind each (:class:`AgentGroup`, mpe2's name prefixes) and its landmarks as runs
of one kind (:class:`Landmarks`), and the core turns that into the small device tables its kernels read
(:func:`world_tables`): an entity's kind, and per kind (or pair of kinds) the numbers the physics needs.

Entity indices count agents first, then landmarks, in mpe2's world order (docs/specs/mpe.md).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import gymnasium
import numpy as np

from ..spaces import Group

#: mpe2's movement block: Discrete(5) (no-op, -x, +x, -y, +y) or Box(0, 1, (5,)) read as u = (a2 - a1, a4 - a3).
NUM_MOVES = 5
#: mpe2's action gain when an agent declares no ``accel`` (``sensitivity = 5.0`` in simple_env._set_action).
DEFAULT_ACCEL = 5.0
#: softplus(z) < e^-40 where z = (d_min - d) / k < -40: such a contact adds < 1e-18 to a force and is skipped.
CONTACT_REACH_MARGINS = 40


@dataclass(frozen=True)
class Kind:
    """Physical properties shared by every entity of one kind (mpe2's Entity/Agent attributes)."""

    name: str
    size: float
    accel: float | None = None       # None: mpe2's default gain 5.0
    max_speed: float | None = None   # None: no cap
    mass: float = 1.0
    movable: bool = True
    collide: bool = True
    silent: bool = True              # agents only: False means it sends a dim_c message each step


@dataclass(frozen=True)
class AgentGroup:
    """``count`` consecutive agents of one kind: a gpurl group, named ``{prefix}_{k}`` in PettingZoo."""

    name: str
    count: int
    kind: Kind
    obs_dim: int
    prefix: str


@dataclass(frozen=True)
class Landmarks:
    """``count`` consecutive landmarks of one kind (never movable in any mpe2 scenario)."""

    count: int
    kind: Kind


@dataclass(frozen=True)
class World:
    """A scenario's world: its agent groups and landmark runs in mpe2's order, and the channel width."""

    groups: tuple[AgentGroup, ...]
    landmarks: tuple[Landmarks, ...] = ()
    dim_c: int = 0
    dt: float = 0.1
    damping: float = 0.25
    contact_force: float = 100.0
    contact_margin: float = 0.001

    @property
    def num_agents(self) -> int:
        return sum(g.count for g in self.groups)

    @property
    def num_landmarks(self) -> int:
        return sum(run.count for run in self.landmarks)

    def kinds(self) -> list[Kind]:
        """Distinct kinds, agents' first, in order of first appearance (a kind's table index)."""
        seen: list[Kind] = []
        for kind in [g.kind for g in self.groups] + [run.kind for run in self.landmarks]:
            if kind not in seen:
                seen.append(kind)
        return seen

    def entity_kinds(self) -> list[Kind]:
        """The kind of every entity: agents, then landmarks."""
        agents = [g.kind for g in self.groups for _ in range(g.count)]
        return agents + [run.kind for run in self.landmarks for _ in range(run.count)]

    def talks(self) -> bool:
        """Some agent sends messages (the scenario has an ``env.state.comm``)."""
        return self.dim_c > 0 and any(not g.kind.silent for g in self.groups)


def discrete_actions(kind: Kind, dim_c: int) -> int:
    """mpe2's Discrete(n) of an agent: 5 moves if movable, times dim_c messages if it talks (an immovable
    silent agent has the one no-op)."""
    moves = NUM_MOVES if kind.movable else 1
    return moves * dim_c if not kind.silent else moves


def box_width(kind: Kind, dim_c: int) -> int:
    """mpe2's Box(0, 1, (w,)) of an agent: 5 movement components if movable, then dim_c message components."""
    return (NUM_MOVES if kind.movable else 0) + (0 if kind.silent else dim_c)


def action_space(kind: Kind, dim_c: int, continuous: bool) -> gymnasium.Space:
    if continuous:
        return gymnasium.spaces.Box(0.0, 1.0, (box_width(kind, dim_c),), dtype=np.float32)
    return gymnasium.spaces.Discrete(discrete_actions(kind, dim_c))


def world_groups(world: World, continuous: bool) -> dict[str, Group]:
    """gpurl groups of ``world``: consecutive agent slices with their obs_dim and mpe2's action space."""
    groups, start = {}, 0
    for g in world.groups:
        groups[g.name] = Group(slice(start, start + g.count), g.obs_dim, action_space(g.kind, world.dim_c, continuous))
        start += g.count
    return groups


def _f32(value: float) -> np.float32:
    return np.float32(value)


def world_tables(world: World) -> dict[str, np.ndarray]:
    """The device tables of ``world`` (``s.<name>`` in the kernels; K kinds, N agents, L landmarks):

    - ``entity_kind`` int32 [N + L]: each entity's kind;
    - ``kind_accel`` float32 [K]: the action gain (5.0 where mpe2's accel is None);
    - ``kind_max_speed`` float32 [K] (inf: no cap) and ``kind_max_speed2`` its square;
    - ``kind_mass`` float32 [K];
    - ``kind_moves`` int32 [K]: 1 if the kind moves (its actions start with mpe2's movement block), else 0;
    - ``kind_talks`` int32 [K]: 1 if it sends messages;
    - ``kind_actions`` int32 [K]: its Discrete n (out-of-range actions are clamped into it);
    - ``pair_dmin`` float32 [K, K]: size_a + size_b, summed in float64 as mpe2 does and rounded once;
    - ``pair_reach2`` float32 [K, K]: the squared distance beyond which a contact is negligible
      (``CONTACT_REACH_MARGINS`` margins past d_min), or -1 when either kind does not collide;
    - ``kind_agent_reach2`` / ``kind_landmark_reach2`` float32 [K]: a kind's largest ``pair_reach2`` with
      the kinds of the world's agents / landmarks (-1: it collides with none of them), the cut-off a
      far pair is tested against before its own reach is looked up.
    """
    kinds = world.kinds()
    index = {kind: k for k, kind in enumerate(kinds)}
    K = len(kinds)
    dmin = np.zeros((K, K), np.float32)
    reach2 = np.full((K, K), -1.0, np.float32)
    for a, ka in enumerate(kinds):
        for b, kb in enumerate(kinds):
            d = ka.size + kb.size
            dmin[a, b] = _f32(d)
            if ka.collide and kb.collide:
                reach2[a, b] = _f32((d + CONTACT_REACH_MARGINS * world.contact_margin) ** 2)
    max_speed = [math.inf if k.max_speed is None else k.max_speed for k in kinds]
    agent_kinds = sorted({index[g.kind] for g in world.groups if g.count > 0})
    landmark_kinds = sorted({index[run.kind] for run in world.landmarks if run.count > 0})
    return {
        "entity_kind": np.array([index[k] for k in world.entity_kinds()], np.int32),
        "kind_accel": np.array([DEFAULT_ACCEL if k.accel is None else k.accel for k in kinds], np.float32),
        "kind_max_speed": np.array(max_speed, np.float32),
        "kind_max_speed2": np.array([s * s for s in max_speed], np.float32),
        "kind_mass": np.array([k.mass for k in kinds], np.float32),
        "kind_moves": np.array([int(k.movable) for k in kinds], np.int32),
        "kind_talks": np.array([int(not k.silent and world.dim_c > 0) for k in kinds], np.int32),
        "kind_actions": np.array([discrete_actions(k, world.dim_c) for k in kinds], np.int32),
        "pair_dmin": dmin,
        "pair_reach2": reach2,
        "kind_agent_reach2": _largest_reach2(reach2, agent_kinds),
        "kind_landmark_reach2": _largest_reach2(reach2, landmark_kinds),
    }


def _largest_reach2(reach2: np.ndarray, others: list[int]) -> np.ndarray:
    """float32 [K]: each kind's largest reach2 with the kinds ``others`` (-1 where there are none)."""
    if not others:
        return np.full(reach2.shape[0], -1.0, np.float32)
    return reach2[:, others].max(axis=1).astype(np.float32)


def world_constants(world: World, *, max_cycles: int, continuous: bool) -> dict:
    """The core's kernel constants (``c.<name>``): the world's physics numbers and the episode's rules."""
    return dict(dt=_f32(world.dt), keep=_f32(1.0 - world.damping),
                inv_margin=_f32(1.0 / world.contact_margin),
                contact_scale=_f32(world.contact_force * world.contact_margin),
                dim_c=np.int32(world.dim_c), max_cycles=np.int32(max_cycles),
                continuous=np.int32(bool(continuous)), any_talks=np.int32(world.talks()),
                any_contacts=np.int32(any(k.collide and k.movable for k in world.kinds())
                                      and sum(1 for k in world.entity_kinds() if k.collide) > 1))
