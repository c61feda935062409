"""tag_gridworld as gpurl kernels: one plain-Python source for the CPU and CUDA builds.

Every phase takes ``(e, [i,] s, c, actions)``: env e, agent i, ``s`` the env's arrays (``env.state``'s
fields, the ``hit_wall`` scratch, the ``reward_table``, the ``tags`` metric and the toolkit's outputs),
``c`` its constants (env.py), ``actions`` int32/int64 [E, N, 1]. A step, in the spec's order:

  move + clip | per env: timestep + 1, tagged, terminated/truncated | rewards + observe

and a new episode: draw agents | timestep 0 | observe. The global state (``state_phases``, after both) is
every agent's ``STATE_FEATURES`` features, then the time. ``tag_gridworld.cu`` is the same kernel in CUDA C,
with the toolkit's episode phases (gpurl.envs.lifecycle) written out.
"""
import numpy as np

from ...kernels import clamp_action, per_agent, per_env, random_below
from ...kernels.targets import device

_ZERO = np.float32(0.0)
_ONE = np.float32(1.0)
_STREAM_X, _STREAM_Y = 0, 1
NUM_MOVES = 5  # stay, +x, -x, +y, -y
#: Features of each agent in the global state: x, y (normalised as in the obs), is the runner (then the time).
STATE_FEATURES = 3

# ---- shared device functions -----------------------------------------------------------------------


@device
def grid_draw_agent(e, i, s, c):
    """New-episode start of agent i: a uniform cell (random_start) or the original's fixed start."""
    if c.random_start != 0:
        env_id = c.env_id_offset + e
        episode = s.episode[e]
        cells = c.grid_length + 1
        s.x[e, i] = random_below(c.seed, env_id, i, episode, _STREAM_X, cells)
        s.y[e, i] = random_below(c.seed, env_id, i, episode, _STREAM_Y, cells)
    elif i < c.num_taggers:
        s.x[e, i] = c.center
        s.y[e, i] = c.center
    else:
        s.x[e, i] = 0
        s.y[e, i] = 0


@device
def grid_observe(e, i, s, c, obs):
    """Write agent i's observation row (full or partial) of the current state into ``obs`` [E, N, D]."""
    row = obs[e, i]
    n = s.x.shape[1]
    runner = c.num_taggers
    time = np.float32(s.timestep[e]) / c.time_norm
    if c.full_obs != 0:
        for j in range(n):
            row[j] = np.float32(s.x[e, j]) / c.length_f32
            row[n + j] = np.float32(s.y[e, j]) / c.length_f32
            row[2 * n + j] = _ONE if j == runner else _ZERO
            row[3 * n + j] = _ONE if j == i else _ZERO
        row[4 * n] = time
        return
    target = runner
    if i == runner:  # nearest tagger by Manhattan distance; strict < keeps the lowest index on ties
        rx = s.x[e, runner]
        ry = s.y[e, runner]
        nearest = abs(s.x[e, 0] - rx) + abs(s.y[e, 0] - ry)
        target = 0
        for m in range(1, c.num_taggers):
            d = abs(s.x[e, m] - rx) + abs(s.y[e, m] - ry)
            if d < nearest:
                nearest = d
                target = m
    row[0] = np.float32(s.x[e, i]) / c.length_f32
    row[1] = np.float32(s.y[e, i]) / c.length_f32
    row[2] = np.float32(s.x[e, target]) / c.length_f32
    row[3] = np.float32(s.y[e, target]) / c.length_f32
    row[4] = _ONE if i == runner else _ZERO
    row[5] = time


# ---- step phases -----------------------------------------------------------------------------------


def grid_move(e, i, s, c, actions):
    """Spec step 1 for agent i: move by its action, clip each coordinate to [0, L], note a wall hit."""
    # An out-of-range action (only reachable with validate=False) is clamped into 0..4 (docs/specs/API.md).
    a = clamp_action(actions[e, i, 0], NUM_MOVES)
    x = s.x[e, i]
    y = s.y[e, i]
    if a == 1:
        x += 1
    elif a == 2:
        x -= 1
    elif a == 3:
        y += 1
    elif a == 4:
        y -= 1
    cx = min(max(x, 0), c.grid_length)
    cy = min(max(y, 0), c.grid_length)
    s.x[e, i] = cx
    s.y[e, i] = cy
    s.hit_wall[e, i] = 1 if (cx != x or cy != y) else 0


def grid_clock_and_tag(e, s, c, actions):
    """Per env: spec steps 1 (timestep + 1), 2 (tagged) and 4 (terminated/truncated).

    One thread scans the taggers: O(N), the same order as the runner's nearest-tagger observation.
    """
    s.timestep[e] += 1
    runner = c.num_taggers
    rx = s.x[e, runner]
    ry = s.y[e, runner]
    tagged = False
    for m in range(c.num_taggers):
        if s.x[e, m] == rx and s.y[e, m] == ry:
            tagged = True
            break
    s.tags[e] = _ONE if tagged else _ZERO
    s.terminated[e] = tagged
    s.truncated[e] = (s.timestep[e] == c.episode_length) and not tagged


def grid_reward_and_observe(e, i, s, c, actions):
    """Spec step 3 (reward from the table) and the observation of the moved state."""
    is_runner = 1 if i == c.num_taggers else 0
    tagged = 1 if s.tags[e] != _ZERO else 0
    s.reward[e, i] = s.reward_table[is_runner, tagged, s.hit_wall[e, i]]
    grid_observe(e, i, s, c, s.obs)


# ---- a new episode --------------------------------------------------------------------------------------


def grid_start_agent(e, i, s, c, actions):
    grid_draw_agent(e, i, s, c)


def grid_start_env(e, s, c, actions):
    s.timestep[e] = 0


def grid_start_observe(e, i, s, c, actions):
    grid_observe(e, i, s, c, s.obs)


# ---- the global state -----------------------------------------------------------------------------------


def grid_write_state(e, i, s, c, actions):
    """Agent i's features of the global state (docs/specs/global_state.md); agent 0 also writes the time."""
    row = s.global_state[e]
    f = i * STATE_FEATURES
    row[f] = np.float32(s.x[e, i]) / c.length_f32
    row[f + 1] = np.float32(s.y[e, i]) / c.length_f32
    row[f + 2] = _ONE if i == c.num_taggers else _ZERO
    if i == 0:
        row[STATE_FEATURES * s.x.shape[1]] = np.float32(s.timestep[e]) / c.time_norm


STEP_PHASES = [per_agent(grid_move), per_env(grid_clock_and_tag), per_agent(grid_reward_and_observe)]
START_PHASES = [per_agent(grid_start_agent), per_env(grid_start_env), per_agent(grid_start_observe)]
STATE_PHASES = [per_agent(grid_write_state)]
