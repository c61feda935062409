"""tag_continuous as gpurl kernels: one plain-Python source for the CPU and CUDA builds.

Every phase takes ``(e, [i,] s, c, actions)``: env e, agent i, ``s`` the env's arrays (``env.state``'s
fields, the ``tagged_by`` and k-nearest scratch, the acceleration/turn tables, the ``tags`` metric and
the toolkit's outputs), ``c`` its constants (env.py), ``actions`` int [E, N, 2]. A step follows the spec:

  begin (timestep+1) | move | observe (a team phase) | runners: found tags, tag penalty, exit, end bonus
  | per env: tags, runners left, terminated/truncated | taggers: credit their tags

and a new episode: draw agents | counters | observe (a team phase). Observing is a team's work
(:mod:`gpurl.kernels.team`): on CUDA a warp finds one agent's k nearest together, then writes its row's slots,
agent after agent (the env's warps each take every W-th agent), where a thread per agent would pass over all
the others on its own.

The global state (``state_phases``, after both) is every agent's ``STATE_FEATURES`` features, normalised as the
observation normalises them, then the time.
"""
import math

import numpy as np

from ...kernels import (clamp_action, cos32, fmod32, k_nearest_team, pair_distance, per_agent, per_agent_team, per_env,
                        random_below, random_uniform, sin32, team_range, team_row)
from ...kernels.targets import device

_TWO_PI = np.float32(2.0 * math.pi)   # 6.2831855
_ZERO = np.float32(0.0)
_ONE = np.float32(1.0)
_START_DIRECTIONS = (np.float32(0.0), np.float32(math.pi / 2), np.float32(math.pi), np.float32(3 * math.pi / 2))
_STREAM_X, _STREAM_Y, _STREAM_DIR = 0, 1, 2
#: Features of each agent in the global state: x, y, speed, acceleration, direction, alive (then the time).
STATE_FEATURES = 6

# ---- shared device functions -----------------------------------------------------------------------


@device
def tag_draw_agent(e, i, s, c):
    """New-episode start of agent i: uniform position, one of four headings, at rest, in the game."""
    env_id = c.env_id_offset + e
    episode = s.episode[e]
    s.x[e, i] = random_uniform(c.seed, env_id, i, episode, _STREAM_X) * c.grid_length
    s.y[e, i] = random_uniform(c.seed, env_id, i, episode, _STREAM_Y) * c.grid_length
    heading = random_below(c.seed, env_id, i, episode, _STREAM_DIR, 4)
    s.direction[e, i] = _ZERO
    if heading == 1:
        s.direction[e, i] = _START_DIRECTIONS[1]
    elif heading == 2:
        s.direction[e, i] = _START_DIRECTIONS[2]
    elif heading == 3:
        s.direction[e, i] = _START_DIRECTIONS[3]
    s.speed[e, i] = _ZERO
    s.acceleration[e, i] = _ZERO
    s.alive[e, i] = 1


@device
def tag_write_features(e, i, j, slot, stride, s, c):
    """Observation blocks 1-7 of other agent j into ``slot`` (block b at b*stride + slot)."""
    row = s.obs[e, i]
    row[slot] = (s.x[e, j] - s.x[e, i]) / c.pos_norm
    row[stride + slot] = (s.y[e, j] - s.y[e, i]) / c.pos_norm
    row[2 * stride + slot] = (s.speed[e, j] - s.speed[e, i]) / c.speed_norm
    row[3 * stride + slot] = (s.acceleration[e, j] - s.acceleration[e, i]) / c.speed_norm
    row[4 * stride + slot] = (s.direction[e, j] - s.direction[e, i]) / c.dir_norm
    row[5 * stride + slot] = _ONE if j < c.num_taggers else _ZERO
    row[6 * stride + slot] = np.float32(s.alive[e, j])


@device
def tag_observe(e, i, s, c):
    """Write agent i's observation row (full or k-nearest) from the current state: a team's work (a team
    phase calls it; each thread writes its share of the row's slots)."""
    row = s.obs[e, i]
    n = s.x.shape[1]
    if c.full_obs != 0:
        stride = n - 1
        alive_i = s.alive[e, i] != 0
        for j in team_range(n):
            if j != i:
                slot = j if j < i else j - 1
                if alive_i:
                    tag_write_features(e, i, j, slot, stride, s, c)
                else:  # an agent out of the game still sees who is who and who is in
                    for b in range(5):
                        row[b * stride + slot] = _ZERO
                    row[5 * stride + slot] = _ONE if j < c.num_taggers else _ZERO
                    row[6 * stride + slot] = np.float32(s.alive[e, j])
        row[7 * stride] = np.float32(s.timestep[e]) / c.time_norm if alive_i else _ZERO
        return
    k = c.k
    if s.alive[e, i] == 0:
        for f in team_range(7 * k + 1):
            row[f] = _ZERO
        return
    # The hint holds ~k agents at full density; fewer agents in the game spread out: widen it.
    in_game = c.num_taggers + s.num_runners[e]
    radius = c.search_radius * np.float32(math.sqrt(np.float32(n - 1) / np.float32(max(in_game - 1, 1))))
    scratch = team_row(e)  # this team's scratch row: the env's teams find their agents' neighbours at once
    k_nearest_team(s.x, s.y, s.alive, e, i, k, radius, s.dist_row, s.cand_idx, s.cand_dist, s.nbr_idx, scratch)
    for slot in team_range(k):
        j = s.nbr_idx[scratch, slot]
        if j >= 0:
            tag_write_features(e, i, j, slot, k, s, c)
        else:
            for b in range(7):
                row[b * k + slot] = _ZERO
    row[7 * k] = np.float32(s.timestep[e]) / c.time_norm


# ---- step phases -----------------------------------------------------------------------------------


def tag_begin_step(e, s, c, actions):
    s.timestep[e] += 1


def tag_move(e, i, s, c, actions):
    """Spec step 2 for agent i; also starts its reward with the edge and per-step terms."""
    alive = np.float32(s.alive[e, i])
    is_tagger = i < c.num_taggers
    vmax = c.vmax_tagger if is_tagger else c.vmax_runner
    # clamp_action: an unvalidated out-of-range action picks the nearest table entry, never reads past it
    acceleration = s.acceleration[e, i] + s.acc_table[clamp_action(actions[e, i, 0], s.acc_table.shape[0])]
    turn = s.turn_table[clamp_action(actions[e, i, 1], s.turn_table.shape[0])]
    direction = fmod32(s.direction[e, i] + turn, _TWO_PI) * alive
    if direction < _ZERO:
        direction += _TWO_PI
    speed = min(max(s.speed[e, i] + acceleration, _ZERO), vmax) * alive
    if speed <= _ZERO or speed >= vmax:
        acceleration = _ZERO
    x = s.x[e, i]
    y = s.y[e, i]
    if speed != _ZERO:  # x + 0 * cos(d) == x bit for bit: stopped and dead agents skip the trig
        x = x + speed * cos32(direction)
        y = y + speed * sin32(direction)
    edge = _ZERO
    if x < _ZERO or x > c.grid_length or y < _ZERO or y > c.grid_length:
        x = min(max(x, _ZERO), c.grid_length)
        y = min(max(y, _ZERO), c.grid_length)
        edge = c.edge_hit_penalty
    s.x[e, i] = x
    s.y[e, i] = y
    s.speed[e, i] = speed
    s.direction[e, i] = direction
    s.acceleration[e, i] = acceleration
    reward = _ZERO
    if s.alive[e, i] != 0:
        reward = (_ZERO + edge) + (c.step_reward_tagger if is_tagger else c.step_reward_runner)
    s.reward[e, i] = reward


def tag_observe_all(e, i, s, c, actions):
    """Spec step 3: agent i's observation, before this step's tags (a team phase)."""
    tag_observe(e, i, s, c)


def tag_apply_tags(e, i, s, c, actions):
    """Spec step 4 for runner i: which tagger tags it (the nearest, if within the tag radius), its tag penalty
    and exit, then the end-of-game bonus. Runner i's tag reads positions and its own ``alive`` only, so it is
    the same whichever runners this phase has already taken out."""
    if i < c.num_taggers:
        return
    tagger = -1
    if s.alive[e, i] != 0:
        nearest = np.float32(np.inf)
        for m in range(c.num_taggers):
            d = pair_distance(s.x, s.y, e, i, m)
            if d < nearest:  # strict: ties go to the lowest index
                nearest = d
                tagger = m
        if not nearest < c.tag_radius:
            tagger = -1
    s.tagged_by[e, i] = tagger
    reward = s.reward[e, i]
    if tagger >= 0:
        reward += c.tag_penalty_for_runner
        if c.runner_exits != 0:
            s.alive[e, i] = 0
    if s.timestep[e] == c.episode_length and s.alive[e, i] != 0:
        reward += c.end_of_game_reward_for_runner
    s.reward[e, i] = reward


def tag_end_step(e, s, c, actions):
    """Per env: runners tagged this step (the ``tags`` metric), runners left, flags."""
    tagged = 0
    for j in range(c.num_taggers, s.x.shape[1]):
        tagged += s.tagged_by[e, j] >= 0
    if c.runner_exits != 0:
        s.num_runners[e] -= tagged
    s.tags[e] = np.float32(tagged)
    terminated = s.num_runners[e] == 0
    s.terminated[e] = terminated
    s.truncated[e] = (s.timestep[e] == c.episode_length) and not terminated


def tag_credit_tagger(e, i, s, c, actions):
    """Spec step 5 for tagger i: the tag reward once for each runner it tagged this step. Each credit adds the same
    constant, so counting them and then adding that many times is the spec's sequential sum in runner order, bit
    for bit, and each tagger counts on a thread of its own (a per-env loop over the runners, reading and writing
    rewards as it went, kept the env's one thread from running ahead to the next runner's load). An env without a
    tag this step (most: ``tags``, counted by tag_end_step) has nothing to credit."""
    if i >= c.num_taggers or s.tags[e] == np.float32(0.0):
        return
    tags = 0
    for j in range(c.num_taggers, s.x.shape[1]):
        tags += s.tagged_by[e, j] == i
    reward = s.reward[e, i]
    for _ in range(tags):
        reward += c.tag_reward_for_tagger
    s.reward[e, i] = reward


# ---- a new episode -----------------------------------------------------------------------------------


def tag_start_agent(e, i, s, c, actions):
    tag_draw_agent(e, i, s, c)


def tag_start_env(e, s, c, actions):
    s.timestep[e] = 0
    s.num_runners[e] = c.num_runners


def tag_start_observe(e, i, s, c, actions):
    """A new episode's first observation (a team phase)."""
    tag_observe(e, i, s, c)


# ---- the global state -----------------------------------------------------------------------------------


def tag_write_state(e, i, s, c, actions):
    """Agent i's features of the global state (docs/specs/global_state.md); agent 0 also writes the time."""
    row = s.global_state[e]
    f = i * STATE_FEATURES
    row[f] = s.x[e, i] / c.pos_norm
    row[f + 1] = s.y[e, i] / c.pos_norm
    row[f + 2] = s.speed[e, i] / c.speed_norm
    row[f + 3] = s.acceleration[e, i] / c.speed_norm
    row[f + 4] = s.direction[e, i] / c.dir_norm
    row[f + 5] = np.float32(s.alive[e, i])
    if i == 0:
        row[STATE_FEATURES * s.x.shape[1]] = np.float32(s.timestep[e]) / c.time_norm


STEP_PHASES = [per_env(tag_begin_step), per_agent(tag_move), per_agent_team(tag_observe_all),
               per_agent(tag_apply_tags), per_env(tag_end_step), per_agent(tag_credit_tagger)]
START_PHASES = [per_agent(tag_start_agent), per_env(tag_start_env), per_agent_team(tag_start_observe)]
STATE_PHASES = [per_agent(tag_write_state)]
