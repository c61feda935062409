"""tag_gridworld as gpurl kernels: one plain-Python source for the CPU and CUDA builds.

Every phase takes ``(e, [i,] s, c, actions)``: env e, agent i, ``s`` = :class:`GridArrays`,
``c`` = :class:`GridConsts`, ``actions`` int32/int64 [E, N, 1]. One kernel, ``gridworld_step``, in the
spec's order:

  move + clip | per env: timestep + 1, tagged, terminated/truncated, who restarts
  | rewards + observe (into final_obs for envs that restart) | restarting agents: draw a new start
  | per env: freeze or start the new episode | restarting agents: observe the new episode

``env.reset`` launches the same kernel with ``c.reset_only`` set: the first three phases then do nothing
and the envs whose ``s.restart`` the host set from the reset mask restart (one kernel to compile, not
two). An env that finished with ``autoreset=False`` is frozen (``s.finished``): every phase skips it, so
its state and obs stay as they were and its reward is 0.
"""
import numpy as np

from ...kernels import per_agent, per_env, random_below
from ...kernels.program import EnvKernel
from ...kernels.targets import device

_ZERO = np.float32(0.0)
_ONE = np.float32(1.0)
_STREAM_X, _STREAM_Y = 0, 1

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
    if c.reset_only != 0:
        return
    if s.finished[e] != 0:
        s.reward[e, i] = _ZERO
        return
    a = actions[e, i, 0]
    x = s.x[e, i]
    y = s.y[e, i]
    # Unknown actions (only reachable with validate=False) stay put rather than index anything.
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
    """Per env: spec steps 1 (timestep + 1), 2 (tagged) and 4 (terminated/truncated), and who restarts.

    One thread scans the taggers: O(N), the same order as the runner's nearest-tagger observation.
    """
    if c.reset_only != 0:
        return
    if s.finished[e] != 0:
        s.tags[e] = _ZERO  # a frozen env tags nobody (step_metrics reads this)
        s.restart[e] = 0
        return
    s.timestep[e] += 1
    runner = c.num_taggers
    rx = s.x[e, runner]
    ry = s.y[e, runner]
    tagged = False
    for m in range(c.num_taggers):
        if s.x[e, m] == rx and s.y[e, m] == ry:
            tagged = True
            break
    truncated = (s.timestep[e] == c.episode_length) and not tagged
    s.tags[e] = _ONE if tagged else _ZERO
    s.terminated[e] = tagged
    s.truncated[e] = truncated
    s.restart[e] = 1 if ((tagged or truncated) and c.autoreset != 0) else 0


def grid_reward_and_observe(e, i, s, c, actions):
    """Spec step 3 (reward from the table) and the observation of the moved state."""
    if c.reset_only != 0 or s.finished[e] != 0:
        return
    is_runner = 1 if i == c.num_taggers else 0
    tagged = 1 if s.tags[e] != _ZERO else 0
    s.reward[e, i] = s.reward_table[is_runner, tagged, s.hit_wall[e, i]]
    # An env that restarts in this step shows its new episode in obs (last phase); this is its last obs.
    grid_observe(e, i, s, c, s.final_obs if s.restart[e] != 0 else s.obs)


# ---- restarts: same-step autoreset, or reset ----------------------------------------------------------


def grid_restart_agents(e, i, s, c, actions):
    """A restarting env draws agent i's new start."""
    if s.restart[e] != 0:
        grid_draw_agent(e, i, s, c)


def grid_end_or_restart_env(e, s, c, actions):
    """Per env: freeze an ended env (autoreset=False, after its last reward and obs are written), or
    start the new episode of a restarting one."""
    if c.reset_only == 0 and c.autoreset == 0 and (s.terminated[e] != 0 or s.truncated[e] != 0):
        s.finished[e] = 1
    if s.restart[e] == 0:
        return
    s.timestep[e] = 0
    s.episode[e] += 1
    s.finished[e] = 0
    if c.reset_only != 0:  # an autoreset reports how the episode ended; a reset clears it
        s.terminated[e] = 0
        s.truncated[e] = 0
        s.tags[e] = _ZERO


def grid_restart_observe(e, i, s, c, actions):
    if s.restart[e] != 0:
        grid_observe(e, i, s, c, s.obs)


gridworld_step = EnvKernel("gridworld_step", [
    per_agent(grid_move),
    per_env(grid_clock_and_tag),
    per_agent(grid_reward_and_observe),
    per_agent(grid_restart_agents),
    per_env(grid_end_or_restart_env),
    per_agent(grid_restart_observe),
], nargs=3)
