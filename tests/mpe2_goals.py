"""``goal_b`` draws between gpurl's ``env.state`` and mpe2's world (simple_reference, simple_speaker_listener):
an entity index (agents first, then landmarks) in gpurl, a Landmark object or None on mpe2's agent."""
from __future__ import annotations

import numpy as np


def set_goal_b(world, state: dict, e: int) -> None:
    """Write gpurl's ``goal_b`` row into mpe2's agents (-1: None)."""
    n = len(world.agents)
    for k, agent in enumerate(world.agents):
        goal = int(state["goal_b"][k])
        agent.goal_b = world.landmarks[goal - n] if goal >= 0 else None


def get_goal_b(world) -> dict:
    """mpe2's agents' goal_b as gpurl's ``goal_b`` row."""
    n = len(world.agents)
    return {"goal_b": np.array([-1 if a._goal_b is None else n + world.landmarks.index(a._goal_b)
                                for a in world.agents], np.int32)}
