"""simple_tag's CPU kernel: whole steps (or resets) of envs in one per-env phase (env-major).

The device functions of the CUDA layout (:mod:`.physics`), looped over an env's agents inside one phase,
because a toolkit phase costs one call per env that pushes every field of every argument array
(~150 values); for the same reason each call handles ENVS_PER_CALL consecutive envs (the launch passes
the number of such chunks as its env count). That call cost several times the 3v1v2 step itself in the
seven-phase layout, and still a fifth of it with one env per call. The float operations are the CUDA
layout's, in the same order, so both builds compute the same numbers (up to the GPU's FMA contraction);
the forces take each agent pair once (:func:`~.physics.simple_tag_all_forces`, bit for bit the same).

One kernel serves ``reset`` and ``step`` (``c.reset``), with one call site of the draw and of the
observation: every toolkit build, and every inlined call site in it, costs compile time (tens of
seconds for this kernel).
"""
import numpy as np

from ...kernels import per_env
from ...kernels.program import EnvKernel
from ...kernels.targets import device
from .layout import FROZEN, RUNNING
from .physics import (_CATCH, _ZERO, simple_tag_adversaries, simple_tag_agents, simple_tag_all_forces,
                      simple_tag_autoresets, simple_tag_cap_speed, simple_tag_catches, simple_tag_draw,
                      simple_tag_finish, simple_tag_good_reward, simple_tag_move_agent, simple_tag_obstacles,
                      simple_tag_observe, simple_tag_start_episode)

#: Consecutive envs per call of the phase (see the module docstring); a build may fix another count as
#: the constant SIMPLE_TAG_CHUNK.
ENVS_PER_CALL = 16
SIMPLE_TAG_CHUNK = 0


def num_calls(num_envs: int, constants: tuple = ()) -> int:
    """The env count to launch :data:`simple_tag_env_major` with for ``num_envs`` envs (and ``constants``)."""
    return -(-num_envs // (dict(constants).get("SIMPLE_TAG_CHUNK") or ENVS_PER_CALL))


@device
def simple_tag_one_env(e, s, c, actions):
    """Step env e (``c.reset == 0``): forces | integrate | catches + rewards | counters, ends | observe |
    autoreset; or reset it when ``c.reset`` and ``s.reset_mask[e]``: counters | redraw | observe."""
    pos = s.pos[e]
    vel = s.vel[e]
    landmarks = s.landmark_pos[e]
    reward = s.reward[e]
    num_agents = simple_tag_agents(pos.shape[0])
    num_adversaries = simple_tag_adversaries(c)
    redraw = True
    first_pass = 1  # pass 0: observe the stepped state; pass 1: redraw the env and observe its new episode
    if c.reset != 0:
        if s.reset_mask[e] == 0:
            return
        simple_tag_start_episode(e, s)
    elif s.finished[e] != RUNNING:  # ended in an earlier step with autoreset=False: frozen until reset
        s.finished[e] = FROZEN
        s.collisions[e] = _ZERO
        for i in range(num_agents):
            reward[i] = _ZERO
        return
    else:
        force = s.force[e]
        simple_tag_all_forces(pos, landmarks, actions[e], force, c)  # all from the old positions
        too_fast = False
        for i in range(num_agents):
            too_fast = simple_tag_move_agent(pos, vel, force, i, c) or too_fast
        if too_fast:  # rare: capping inline costs every agent a sqrt and two divisions (see move_agent)
            for i in range(num_agents):
                simple_tag_cap_speed(vel, i, c)
        total = 0
        all_caught = True
        for g in range(num_adversaries, num_agents):
            count = simple_tag_catches(pos, g, c)
            total += count
            all_caught = all_caught and count > 0
            reward[g] = simple_tag_good_reward(pos, g, count)
        simple_tag_finish(e, s, c, total, all_caught)
        adversary_reward = _CATCH * np.float32(total)
        for a in range(num_adversaries):
            reward[a] = adversary_reward
        redraw = simple_tag_autoresets(e, s, c)
        first_pass = 0
    for rep in range(first_pass, 2 if redraw else 1):
        if rep == 1:
            for entity in range(num_agents + simple_tag_obstacles(landmarks.shape[0])):
                simple_tag_draw(e, entity, s, c)
        rows = s.final_obs[e] if rep == 0 and redraw else s.obs[e]  # the finished episode's last obs
        for i in range(num_agents):
            simple_tag_observe(pos, vel, landmarks, i, c, rows[i])


def simple_tag_env_chunk(chunk, s, c, actions):
    per_call = SIMPLE_TAG_CHUNK if SIMPLE_TAG_CHUNK > 0 else ENVS_PER_CALL
    start = chunk * per_call
    for e in range(start, min(start + per_call, s.pos.shape[0])):
        simple_tag_one_env(e, s, c, actions)


simple_tag_env_major = EnvKernel("simple_tag_env_major", [per_env(simple_tag_env_chunk)], nargs=3)
