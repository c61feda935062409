"""simple_tag's CUDA-layout kernels: WarpDrive's one thread per agent, phases separated by barriers.

The CUDA build launches :data:`simple_tag_step` / :data:`simple_tag_reset`; the CPU build launches the
env-major kernel of :mod:`.env_major` instead (the toolkit's CPU build calls every phase once per env
with every argument array, which made this seven-phase layout several times slower on the CPU than one
env-major phase). Both are built from the device functions of :mod:`.physics`.

Every phase takes ``(e, [i,] s, c, actions)``: env e, agent i, ``s`` = :class:`SimpleTagArrays`,
``c`` = :class:`SimpleTagConsts`, ``actions`` float32 [E, N, 1] (Discrete, as float32) or [E, N, 5] (Box).
The step follows the spec's order:

  forces (old state) | integrate | good agents: catches + reward | per env: timestep, collisions, ends
  | adversaries' reward + observe (into final_obs when autoresetting) | autoreset: redraw | observe new

``s.finished``: an env that ended with ``autoreset=False`` is ENDED_NOW for the rest of that step (its
obs and reward are written) and FROZEN from the next step on (skipped, reward 0) until ``reset``.
"""
from ...kernels import per_agent, per_env
from ...kernels.program import EnvKernel
from .layout import FROZEN, RUNNING
from .physics import (_CATCH, _ZERO, simple_tag_agent_force, simple_tag_autoresets, simple_tag_catches,
                      simple_tag_draw, simple_tag_finish, simple_tag_good_reward, simple_tag_integrate_agent,
                      simple_tag_observe, simple_tag_start_episode)

# ---- step phases ---------------------------------------------------------------------------------------


def simple_tag_forces(e, i, s, c, actions):
    if s.finished[e] == RUNNING:
        fx, fy = simple_tag_agent_force(s.pos[e], s.landmark_pos[e], actions[e], i, c)
        s.force[e, i, 0] = fx
        s.force[e, i, 1] = fy


def simple_tag_integrate(e, i, s, c, actions):
    if s.finished[e] == RUNNING:
        simple_tag_integrate_agent(s.pos[e], s.vel[e], s.force[e], i, c)


def simple_tag_catch(e, i, s, c, actions):
    """Good agent i: its catches (for the per-env total) and its own reward."""
    if s.finished[e] != RUNNING:
        return
    if i < c.num_adversaries:
        s.caught[e, i] = 0
        return
    count = simple_tag_catches(s.pos[e], i, c)
    s.caught[e, i] = count
    s.reward[e, i] = simple_tag_good_reward(s.pos[e], i, count)


def simple_tag_end_step(e, s, c, actions):
    if s.finished[e] != RUNNING:
        s.finished[e] = FROZEN  # ENDED_NOW in the previous step: frozen from this step on
        s.collisions[e] = _ZERO
        return
    total = 0
    all_caught = True
    for g in range(c.num_adversaries, s.pos.shape[1]):
        total += s.caught[e, g]
        all_caught = all_caught and s.caught[e, g] > 0
    simple_tag_finish(e, s, c, total, all_caught)


def simple_tag_reward_and_observe(e, i, s, c, actions):
    """Adversaries' shared reward; every agent's observation (the finished episode's into final_obs)."""
    if s.finished[e] == FROZEN:
        s.reward[e, i] = _ZERO
        return
    if i < c.num_adversaries:
        s.reward[e, i] = _CATCH * s.collisions[e]
    row = s.final_obs[e, i] if simple_tag_autoresets(e, s, c) else s.obs[e, i]
    simple_tag_observe(s.pos[e], s.vel[e], s.landmark_pos[e], i, c, row)


def simple_tag_autoreset_draw(e, i, s, c, actions):
    if simple_tag_autoresets(e, s, c):
        for entity in range(i, s.pos.shape[1] + s.landmark_pos.shape[1], s.pos.shape[1]):
            simple_tag_draw(e, entity, s, c)  # agent i, then obstacles i, i + N, ...


def simple_tag_autoreset_observe(e, i, s, c, actions):
    if simple_tag_autoresets(e, s, c):
        simple_tag_observe(s.pos[e], s.vel[e], s.landmark_pos[e], i, c, s.obs[e, i])


# ---- reset phases --------------------------------------------------------------------------------------


def simple_tag_reset_env(e, s, c, actions):
    if s.reset_mask[e] != 0:
        simple_tag_start_episode(e, s)


def simple_tag_reset_draw(e, i, s, c, actions):
    if s.reset_mask[e] != 0:
        for entity in range(i, s.pos.shape[1] + s.landmark_pos.shape[1], s.pos.shape[1]):
            simple_tag_draw(e, entity, s, c)


def simple_tag_reset_observe(e, i, s, c, actions):
    if s.reset_mask[e] != 0:
        simple_tag_observe(s.pos[e], s.vel[e], s.landmark_pos[e], i, c, s.obs[e, i])


simple_tag_step = EnvKernel("simple_tag_step", [
    per_agent(simple_tag_forces),
    per_agent(simple_tag_integrate),
    per_agent(simple_tag_catch),
    per_env(simple_tag_end_step),
    per_agent(simple_tag_reward_and_observe),
    per_agent(simple_tag_autoreset_draw),
    per_agent(simple_tag_autoreset_observe),
], nargs=3)

simple_tag_reset = EnvKernel("simple_tag_reset", [
    per_env(simple_tag_reset_env),
    per_agent(simple_tag_reset_draw),
    per_agent(simple_tag_reset_observe),
], nargs=3)
