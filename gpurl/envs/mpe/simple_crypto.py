"""``simple_crypto`` (mpe2 ``simple_crypto_v3``): alice tells bob the goal landmark's colour over a public
channel that eve overhears; alice and bob share a key. Nobody moves; everyone talks (docs/specs/mpe.md)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...kernels import per_agent, per_env
from ...kernels.fields import field
from ...kernels.targets import device
from .env import ParticleEnv, particle_scratch, particle_start, particle_state, particle_step
from .goals import GOAL_SLOT, draw_goal_and_positions, draw_landmark, zero_fill
from .params import ParticleParams
from .phases import particle_finish
from .world import AgentGroup, Kind, Landmarks, World

f32 = np.float32
_ZERO, _ONE = f32(0.0), f32(1.0)
#: mpe2's fixed world: eve (the adversary), bob (the listener), alice (the speaker), in this order.
EVE, BOB, ALICE = 0, 1, 2
NUM_AGENTS = 3
NUM_LANDMARKS = 2
DIM_C = 4
KEY_SLOT = GOAL_SLOT + 1
NO_KEY = -1
#: mpe2's Agent and Landmark defaults but immovable and non-colliding; agents talk (Agent.silent is False).
AGENT = Kind("agent", size=0.05, movable=False, collide=False, silent=False)
LANDMARK = Kind("landmark", size=0.05, movable=False, collide=False)


@dataclass(frozen=True)
class SimpleCryptoParams(ParticleParams):
    """Only the shared parameters (ParticleParams)."""



def simple_crypto_draw(e, s, c, actions):
    """The goal (every agent's ``goal_a``) and positions, then alice's key landmark (``key``; -1, mpe2's
    None, for eve and bob). Positions are drawn as mpe2 draws them, though nothing reads them."""
    draw_goal_and_positions(e, s, c)
    key = draw_landmark(e, KEY_SLOT, s, c)
    for i in range(NUM_AGENTS):
        s.key[e, i] = key if i == ALICE else NO_KEY


@device
def colour(entity, d):
    """Channel d of entity's colour: landmark l is the one-hot e_l of width dim_c (mpe2's
    ``color_list``); 0 everywhere for -1 (no entity)."""
    return _ONE if entity - NUM_AGENTS == d else _ZERO


@device
def write_colour(row, col, entity):
    for d in range(DIM_C):
        row[col + d] = colour(entity, d)


@device
def message_error(e, s, k, goal):
    """Σ_d (c_k[d] - colour(goal)[d])^2 of agent k's message, or 0 where k's message is all zeros (mpe2
    skips a silent channel)."""
    talked = False
    error = _ZERO
    for d in range(DIM_C):
        m = s.comm[e, k, d]
        talked = talked or m != _ZERO
        diff = m - colour(goal, d)
        error += diff * diff
    return error if talked else _ZERO


def simple_crypto_reward(e, s, c, actions):
    """eve: -(her error); bob and alice: eve's error - bob's, each error against the rewarded agent's own
    goal colour."""
    s.reward[e, EVE] = -message_error(e, s, EVE, s.goal_a[e, EVE])
    for a in range(BOB, NUM_AGENTS):
        goal = s.goal_a[e, a]
        s.reward[e, a] = message_error(e, s, EVE, goal) - message_error(e, s, BOB, goal)
    particle_finish(e, s, c, False)


def simple_crypto_observe(e, i, s, c, actions):
    """alice: [goal colour, key] (8); bob: [key, alice's message] (8); eve: [alice's message] (4). The key
    is the colour of alice's key landmark (bob reads alice's)."""
    row = s.obs[e, i]
    key = s.key[e, ALICE]
    col = 0
    if i == ALICE:
        write_colour(row, 0, s.goal_a[e, i])
        write_colour(row, DIM_C, key)
        col = 2 * DIM_C
    else:
        if i == BOB:
            write_colour(row, 0, key)
            col = DIM_C
        for d in range(DIM_C):
            row[col + d] = s.comm[e, ALICE, d]
        col += DIM_C
    zero_fill(row, col)


class SimpleCrypto(ParticleEnv):
    """mpe2's ``simple_crypto_v3``: groups ``eve`` (``eve_0``), ``bob`` (``bob_0``) and ``alice`` (``alice_0``),
    immovable and talking (dim_c = 4: Discrete(4) or Box(0, 1, (4,)) messages), two landmarks.

    State: the core's ``pos``, ``vel`` (0), ``comm``, ``landmark_pos``, ``timestep``; ``goal_a`` int32 [E, 3],
    the goal landmark's entity index (3 + l), the same for all at reset; ``key`` int32 [E, 3], alice's key
    landmark (3 + l), -1 for eve and bob. Colours are derived from them. Reproduces mpe2's rewards and
    observations, and its reset distribution.
    """

    name = "simple_crypto"
    params_type = SimpleCryptoParams
    state = particle_state(talks=True, goal_a=field("int32", "agents"), key=field("int32", "agents"))
    scratch = particle_scratch(talks=True)
    step_phases = particle_step(per_env(simple_crypto_reward), per_agent(simple_crypto_observe))
    start_phases = particle_start([per_env(simple_crypto_draw)], [per_agent(simple_crypto_observe)])

    def world(self) -> World:
        return World(groups=(AgentGroup("eve", 1, AGENT, obs_dim=DIM_C, prefix="eve"),
                             AgentGroup("bob", 1, AGENT, obs_dim=2 * DIM_C, prefix="bob"),
                             AgentGroup("alice", 1, AGENT, obs_dim=2 * DIM_C, prefix="alice")),
                     landmarks=(Landmarks(NUM_LANDMARKS, LANDMARK),), dim_c=DIM_C)
