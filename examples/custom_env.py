"""Cooperative foraging: a complete custom gpurl env, written against gpurl's public toolkit only.

N agents walk on an L x L torus of cells with F food items on it. An agent that steps onto a food's
cell eats it; the item respawns on a random cell, and every agent gets ``food_reward`` for each item
the team ate in that step (a shared reward). Episodes truncate after ``episode_length`` steps and
terminate once the team has eaten ``food_target`` items (0: never).

    python examples/custom_env.py --iters 30     # PPO on the CPU; every flag of bench/tag_ppo.py works

docs/custom_env.md builds this file step by step; examples/custom_env_reference.py is its NumPy spec.
"""

import sys
from dataclasses import dataclass

import gymnasium
import numpy as np

import gpurl
from gpurl.envs import KernelEnv, field
from gpurl.envs.params import ranged
from gpurl.kernels import device, per_agent, per_env, random_below


@dataclass(frozen=True)
class ForagingParams:
    num_agents: int = ranged(3, ge=1, le=2**20)
    """Foragers: one group, "forager", sharing one policy."""
    num_food: int = ranged(3, ge=1, le=2**20)
    """Food items on the grid at any time."""
    grid_size: int = ranged(8, ge=2, le=2**15)
    """L: cells 0..L-1 on each axis; moves wrap around (a torus)."""
    episode_length: int = ranged(50, ge=1, le=2**30)
    """Steps before truncation."""
    food_target: int = ranged(0, ge=0, le=2**30)
    """The episode terminates once the team has eaten this many items (0: never)."""
    food_reward: float = ranged(1.0)
    """Every agent's reward per item the team eats (any finite number)."""


@device
def wrap(v, size):
    """A coordinate that stepped off the torus [0, size) by one cell, put back on it."""
    if v < 0:
        return v + size
    if v >= size:
        return v - size
    return v


@device
def offset(a, b, size):
    """Shortest signed torus offset from cell ``a`` to cell ``b``, in [-size / 2, size / 2)."""
    d = b - a
    if d < 0:
        d += size
    if 2 * d >= size:
        d -= size
    return d


@device
def draw_food(e, f, s, c, t):
    """Food f's cell when it spawns at step t of the episode (t = 0: the episode's start)."""
    env_id = c.env_id_offset + e
    s.food_x[e, f] = random_below(c.seed, env_id, f, s.episode[e], 2 + 2 * t, c.grid_size)
    s.food_y[e, f] = random_below(c.seed, env_id, f, s.episode[e], 3 + 2 * t, c.grid_size)


@device  # a phase (of start_phases) and a helper (of reward_and_observe)
def observe(e, i, s, c, actions):
    """Agent i's row of ``s.obs``: offsets to every food, then to the nearest other agent, over L."""
    row = s.obs[e, i]
    x = s.x[e, i]
    y = s.y[e, i]
    num_food = s.food_x.shape[1]
    for f in range(num_food):
        row[2 * f] = np.float32(offset(x, s.food_x[e, f], c.grid_size)) / c.size_f32
        row[2 * f + 1] = np.float32(offset(y, s.food_y[e, f], c.grid_size)) / c.size_f32
    nearest, best_dx, best_dy = -1, 0, 0  # torus Manhattan distance; ties go to the lower index
    for j in range(s.x.shape[1]):
        dx = offset(x, s.x[e, j], c.grid_size)
        dy = offset(y, s.y[e, j], c.grid_size)
        if j != i and (nearest < 0 or abs(dx) + abs(dy) < abs(best_dx) + abs(best_dy)):
            nearest, best_dx, best_dy = j, dx, dy
    row[2 * num_food] = np.float32(best_dx) / c.size_f32
    row[2 * num_food + 1] = np.float32(best_dy) / c.size_f32


# ---- a step: three phases, a barrier between consecutive ones -----------------------------------


def move(e, i, s, c, actions):
    """Agent i moves (0 stay, 1 x+1, 2 x-1, 3 y+1, 4 y-1) and marks the food on its new cell."""
    a = actions[e, i, 0]
    s.x[e, i] = wrap(s.x[e, i] + (1 if a == 1 else 0) - (1 if a == 2 else 0), c.grid_size)
    s.y[e, i] = wrap(s.y[e, i] + (1 if a == 3 else 0) - (1 if a == 4 else 0), c.grid_size)
    for f in range(s.food_x.shape[1]):
        if s.food_x[e, f] == s.x[e, i] and s.food_y[e, f] == s.y[e, i]:
            s.hit[e, f] = 1  # agents on the same cell all write 1: a harmless race


def collect(e, s, c, actions):
    """Per env, after every agent moved: respawn the eaten food, count it, end the episode."""
    s.timestep[e] += 1
    eaten_now = 0
    for f in range(s.food_x.shape[1]):
        if s.hit[e, f] != 0:
            s.hit[e, f] = 0
            eaten_now += 1
            draw_food(e, f, s, c, s.timestep[e])
    s.eaten[e] += eaten_now
    s.food[e] = np.float32(eaten_now)
    s.terminated[e] = c.food_target > 0 and s.eaten[e] >= c.food_target
    s.truncated[e] = s.timestep[e] >= c.episode_length and not s.terminated[e]


def reward_and_observe(e, i, s, c, actions):
    s.reward[e, i] = s.food[e] * c.food_reward
    observe(e, i, s, c, actions)


# ---- a new episode (reset, or autoreset right after the step that ended one) --------------------


def start_agent(e, i, s, c, actions):
    env_id = c.env_id_offset + e
    s.x[e, i] = random_below(c.seed, env_id, i, s.episode[e], 0, c.grid_size)
    s.y[e, i] = random_below(c.seed, env_id, i, s.episode[e], 1, c.grid_size)


def start_env(e, s, c, actions):
    for f in range(s.food_x.shape[1]):
        draw_food(e, f, s, c, 0)
    s.timestep[e] = 0
    s.eaten[e] = 0


class Foraging(KernelEnv):
    """``gpurl.make("foraging", ...)``: one group "forager", actions Discrete(5), obs float32 [2F + 2]."""

    name = "foraging"
    params_type = ForagingParams
    state = {"x": field("int32", "agents"), "y": field("int32", "agents"),   # agent cells
             "food_x": field("int32", "num_food"), "food_y": field("int32", "num_food"),
             "eaten": field("int32"),        # items the team ate this episode
             "timestep": field("int32")}
    scratch = {"hit": field("uint8", "num_food")}  # an agent stepped onto food f in this step
    metrics = ("food",)                              # items eaten in the last step
    step_phases = [per_agent(move), per_env(collect), per_agent(reward_and_observe)]
    start_phases = [per_agent(start_agent), per_env(start_env), per_agent(observe)]

    def groups(self):
        p = self.params
        return {"forager": gpurl.Group(slice(0, p.num_agents), 2 * p.num_food + 2, gymnasium.spaces.Discrete(5))}

    def constants(self):
        p = self.params
        return dict(grid_size=np.int32(p.grid_size), size_f32=np.float32(p.grid_size),
                    episode_length=np.int32(p.episode_length), food_target=np.int32(p.food_target),
                    food_reward=np.float32(p.food_reward))


gpurl.register("foraging", Foraging)


def main(argv: list[str] | None = None) -> dict:
    """Train the foragers with gpurl's PPO (``gpurl train`` with this env's defaults); it prints the
    returns of random and trained policies and ends with the RESULT line."""
    from gpurl.train.cli import main as train

    defaults = ["--env", "foraging", "--num-envs", "64", "--rollout-len", "64", "--iters", "30", "--lr", "1e-3"]
    return train(defaults + list(sys.argv[1:] if argv is None else argv), prog="examples/custom_env.py")


if __name__ == "__main__":
    main()
