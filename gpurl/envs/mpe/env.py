"""``ParticleEnv``: the base class of every MPE scenario (docs/specs/mpe.md).

A scenario is a small declaration on top of the particle-world core:

- ``params_type``: a frozen dataclass extending :class:`.params.ParticleParams` (``max_cycles``,
  ``continuous_actions``) with its own; fields may name ``"num_landmarks"`` and ``"dim_c"``, which the world
  supplies (:meth:`ParticleEnv.field_sizes`);
- ``world(self) -> World`` (:mod:`.world`): its kinds, agent groups (mpe2's name prefixes), landmarks, dim_c;
- ``state = particle_state(talks=..., **draws)`` (its per-episode draws: entity indices, int32, -1 for None)
  and ``scratch = particle_scratch(talks=...)``;
- ``step_phases = particle_step(*its phases)``: after the core's forces, integration and messages, its own
  phases write ``s.reward`` and end the step with :func:`.phases.particle_finish`, then observe;
- ``start_phases = particle_start(*its phases)``: it draws the episode (positions with
  :func:`.phases.particle_uniform`), the core zeroes velocities, messages and the clock, then it observes.

The core writes forces, positions, velocities and messages; the scenario writes rewards, ends and
observations. ``env.state`` names follow mpe2 (``pos``, ``vel``, ``comm``, ``landmark_pos``, ``timestep``).
"""
from __future__ import annotations

import numpy as np
import torch

from .. import base
from ..base import KernelEnv
from ...kernels import per_agent, per_env
from ...kernels.fields import field
from .phases import particle_cap_phase, particle_forces_phase, particle_move_phase, particle_start_clock
from .physics import fixed_world_constants
from .world import World, world_constants, world_groups, world_tables


#: The most landmarks a fixed-size build takes (beside at most ``base.SMALL_WORLD_AGENTS`` agents).
SMALL_WORLD_LANDMARKS = 16


def particle_build_constants(world: World, target: str, num_envs: int) -> dict:
    """The core's build constants for a ``num_envs`` batch of ``world`` on ``target``: the world fixed (its
    sizes, tables and numbers: :func:`.physics.fixed_world_constants`) where the toolkit fixes the agent count
    too (a large CPU batch of a small world, :data:`gpurl.envs.base.FIXED_AGENTS_MIN_ENVS`) and the landmarks
    are few, else none (run-time sizes). One more compile per world, which only a large batch repays; both
    builds compute the same bits."""
    if (target != "cpu" or num_envs < base.FIXED_AGENTS_MIN_ENVS or world.num_agents > base.SMALL_WORLD_AGENTS
            or world.num_landmarks > SMALL_WORLD_LANDMARKS):
        return {}
    return fixed_world_constants(world)


def particle_state(*, talks: bool, **draws) -> dict:
    """``env.state`` fields of a scenario: ``pos``/``vel`` [E, N, 2], ``comm`` [E, N, dim_c] if an agent talks,
    ``landmark_pos`` [E, L, 2], ``timestep`` [E], then ``draws`` (its per-episode draws, fields)."""
    fields = {"pos": field("float32", "agents", 2), "vel": field("float32", "agents", 2)}
    if talks:
        fields["comm"] = field("float32", "agents", "dim_c")
    fields.update(landmark_pos=field("float32", "num_landmarks", 2), timestep=field("int32"))
    fields.update(draws)
    return fields


def particle_scratch(*, talks: bool) -> dict:
    """Kernel-private arrays: the step's force on each agent (from the old state, for every agent before any
    moves), whether an agent of the env exceeds its speed cap (``too_fast``, uint8 [E]), and where no agent
    talks a zero-width ``comm`` (the core's phases name ``s.comm`` in every world, and write it where one
    talks)."""
    scratch = {"force": field("float32", "agents", 2), "too_fast": field("uint8")}
    if not talks:
        scratch["comm"] = field("float32", "agents", 0)
    return scratch


def particle_step(*scenario_phases) -> list:
    """A step: forces (old state) | move and message | speed caps (where needed) | the scenario's phases
    (rewards, ends, observe)."""
    return [per_agent(particle_forces_phase), per_agent(particle_move_phase), per_env(particle_cap_phase),
            *scenario_phases]


def particle_start(draw_phases: list, observe_phases: list) -> list:
    """An episode start: the scenario's draws | velocities, messages and clock to 0 | its observation."""
    return [*draw_phases, per_agent(particle_start_clock), *observe_phases]


class ParticleEnv(KernelEnv):
    """An mpe2 scenario on the particle-world core (see the module docstring for what a scenario declares).

    Actions: Discrete scenarios take one int per agent holding mpe2's index (``move + 5 * message`` for an
    agent that moves and talks); continuous ones float32 [E, N, A] holding mpe2's Box vector (movement then
    message), zero-padded to the widest agent. Observations: [E, N, obs_dim], each row zero-padded after
    its group's obs_dim.
    """

    def world(self) -> World:
        raise NotImplementedError(f"{type(self).__name__} must define world(self)")

    def scenario_constants(self) -> dict:
        """The scenario's own kernel constants (``c.<name>``), beside the core's."""
        return {}

    @property
    def agent_prefixes(self) -> dict[str, str]:
        """Group -> mpe2's agent name prefix (the PettingZoo adapter names agents ``{prefix}_{k}``)."""
        return {g.name: g.prefix for g in self.world().groups}

    def groups(self):
        return world_groups(self.world(), bool(self.params.continuous_actions))

    def field_sizes(self) -> dict[str, int]:
        """``"num_landmarks"`` and ``"dim_c"``, the dims of the core's fields, from the world itself."""
        world = self.world()
        return {"num_landmarks": world.num_landmarks, "dim_c": world.dim_c}

    def tables(self) -> dict[str, np.ndarray]:
        return world_tables(self.world())

    def constants(self) -> dict:
        p, world = self.params, self.world()
        if world.talks() != ("comm" in type(self).state):  # the core writes messages only where one talks
            raise ValueError(f"{self.env_name()}: state and scratch must say talks={world.talks()} as its world does")
        return {**world_constants(world, max_cycles=p.max_cycles, continuous=bool(p.continuous_actions)),
                **self.scenario_constants()}

    def build_constants(self) -> dict:
        return particle_build_constants(self.world(), self.target, self.num_envs)

    def check_actions(self, actions: torch.Tensor) -> None:
        if not self._discrete and bool(actions.isnan().any()):  # host-ok: validate=True opt-in check
            e, i, d = (int(v) for v in actions.isnan().nonzero()[0])  # host-ok: names the NaN, then raises
            raise ValueError(f"actions[{e}, {i}, {d}] is NaN: Box actions are clipped into [0, 1], "
                             "NaN cannot be (mpe2 raises on it too)")

