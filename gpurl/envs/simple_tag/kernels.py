"""simple_tag's phases: WarpDrive's one thread per agent on CUDA, env-major on the CPU (the toolkit's
build), from the device functions of :mod:`.physics`.

Every phase takes ``(e, [i,] s, c, actions)``: env e, agent i, ``s`` the env's arrays (``env.state``'s
fields, ``force``/``too_fast`` scratch, ``collisions`` metric and the toolkit's outputs), ``c`` its
constants, ``actions`` [E, N, 1] (Discrete) or float32 [E, N, 5] (Box). A step follows the spec's order:

  forces (old state) | integrate | per env: speed caps, catches, rewards, timestep, collisions, ends
  | observe

and a new episode: draw agents and obstacles | timestep 0 | observe.
"""
from ...kernels import per_agent, per_env
from .physics import (_CATCH, f32, simple_tag_adversaries, simple_tag_agent_force, simple_tag_agents,
                      simple_tag_catches, simple_tag_draw, simple_tag_finish, simple_tag_good_reward,
                      simple_tag_move_agent, simple_tag_cap_speed, simple_tag_observe)


def simple_tag_forces(e, i, s, c, actions):
    fx, fy = simple_tag_agent_force(s.pos[e], s.landmark_pos[e], actions[e], i, c)
    s.force[e, i, 0] = fx
    s.force[e, i, 1] = fy


def simple_tag_integrate(e, i, s, c, actions):
    """Move agent i; its speed cap waits for the per-env phase (see :func:`.physics.simple_tag_move_agent`)."""
    if simple_tag_move_agent(s.pos[e], s.vel[e], s.force[e], i, c):
        s.too_fast[e] = 1  # every too fast agent writes 1: a harmless race


def simple_tag_end_step(e, s, c, actions):
    """Per env: every good agent's catches and reward, the adversaries' shared reward, timestep and ends.

    One thread per env on CUDA: a catch is A distance tests per good agent, less than a barrier costs."""
    pos = s.pos[e]
    if s.too_fast[e] != 0:
        s.too_fast[e] = 0
        for i in range(simple_tag_agents(pos.shape[0])):
            simple_tag_cap_speed(s.vel[e], i, c)
    reward = s.reward[e]
    num_adversaries = simple_tag_adversaries(c)
    total = 0
    all_caught = True
    for g in range(num_adversaries, simple_tag_agents(pos.shape[0])):
        count = simple_tag_catches(pos, g, c)
        total += count
        all_caught = all_caught and count > 0
        reward[g] = simple_tag_good_reward(pos, g, count)
    simple_tag_finish(e, s, c, total, all_caught)
    adversary_reward = _CATCH * f32(total)
    for a in range(num_adversaries):
        reward[a] = adversary_reward


def simple_tag_observe_agent(e, i, s, c, actions):
    simple_tag_observe(s.pos[e], s.vel[e], s.landmark_pos[e], i, c, s.obs[e, i])


def simple_tag_draw_entities(e, i, s, c, actions):
    for entity in range(i, s.pos.shape[1] + s.landmark_pos.shape[1], s.pos.shape[1]):
        simple_tag_draw(e, entity, s, c)  # agent i, then obstacles i, i + N, ...


def simple_tag_start_clock(e, s, c, actions):
    s.timestep[e] = 0


STEP_PHASES = [per_agent(simple_tag_forces), per_agent(simple_tag_integrate), per_env(simple_tag_end_step),
               per_agent(simple_tag_observe_agent)]
START_PHASES = [per_agent(simple_tag_draw_entities), per_env(simple_tag_start_clock),
                per_agent(simple_tag_observe_agent)]
