"""Cooperative foraging: a complete custom gpurl env, written against gpurl's public toolkit only.

N agents walk on an L x L torus of cells with F food items on it. An agent that steps onto a food's
cell eats it; the item respawns on a random cell, and every agent gets ``food_reward`` for each item
the team ate in that step (a shared reward). Episodes truncate after ``episode_length`` steps and
terminate once the team has eaten ``food_target`` items (0: never).

    python examples/custom_env.py --iters 30     # PPO on the CPU; every flag of bench/tag_ppo.py works

docs/custom_env.md builds this file step by step; examples/custom_env_reference.py is its NumPy spec.
"""

import math
import sys
from collections import OrderedDict
from dataclasses import dataclass, fields
from typing import NamedTuple

import gymnasium
import numpy as np
import torch

import gpurl
from gpurl.envs import KernelEnv
from gpurl.kernels import EnvKernel, device, per_agent, per_env, random_below


@dataclass(frozen=True)
class ForagingParams:
    num_agents: int = 3
    """Foragers: one group, "forager", sharing one policy."""
    num_food: int = 3
    """Food items on the grid at any time."""
    grid_size: int = 8
    """L: cells 0..L-1 on each axis; moves wrap around (a torus)."""
    episode_length: int = 50
    """Steps before truncation."""
    food_target: int = 0
    """The episode terminates once the team has eaten this many items (0: never)."""
    food_reward: float = 1.0
    """Every agent's reward per item the team eats."""

    def __post_init__(self):
        limits = dict(num_agents=(1, 2**20), num_food=(1, 2**20), grid_size=(2, 2**15),
                      episode_length=(1, 2**30), food_target=(0, 2**30))
        for name, (low, high) in limits.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ValueError(f"foraging parameter {name} must be an int in [{low}, {high}], got {value!r}")
        if isinstance(self.food_reward, bool) or not math.isfinite(self.food_reward):
            raise ValueError(f"foraging parameter food_reward must be a finite number, got {self.food_reward!r}")


@dataclass
class ForagingState:
    """``env.state``: struct of arrays on ``env.device``; write into it in place to inject a state."""

    x: torch.Tensor          # int32 [E, N]: agent cells
    y: torch.Tensor          # int32 [E, N]
    food_x: torch.Tensor     # int32 [E, F]: food cells
    food_y: torch.Tensor     # int32 [E, F]
    eaten: torch.Tensor      # int32 [E]: items the team ate this episode
    timestep: torch.Tensor   # int32 [E]
    episode: torch.Tensor    # int32 [E]: episodes started, the counter of every random draw


class ForagingArrays(NamedTuple):
    """What the kernel sees: the state, the env's outputs and its bookkeeping (kernel views)."""

    x: np.ndarray
    y: np.ndarray
    food_x: np.ndarray
    food_y: np.ndarray
    eaten: np.ndarray
    timestep: np.ndarray
    episode: np.ndarray
    obs: np.ndarray          # float32 [E, N, 2F + 2]
    final_obs: np.ndarray    # float32 [E, N, 2F + 2]
    reward: np.ndarray       # float32 [E, N]
    terminated: np.ndarray   # uint8 [E]
    truncated: np.ndarray    # uint8 [E]
    food: np.ndarray         # float32 [E]: items eaten in the last step (step_metrics)
    hit: np.ndarray          # uint8 [E, F]: an agent stepped onto food f in this step
    finished: np.ndarray     # uint8 [E]: ended, waiting for reset (autoreset=False)
    restart: np.ndarray      # uint8 [E]: starts a new episode in this launch


class ForagingConsts(NamedTuple):
    grid_size: np.int32
    size_f32: np.float32     # L as float32: the observation divisor
    episode_length: np.int32
    food_target: np.int32
    food_reward: np.float32
    autoreset: np.int32
    reset_only: np.int32     # 1: this launch is env.reset (only the restart phases act)
    seed: np.uint64
    env_id_offset: np.int64


_ZERO = np.float32(0.0)  # a Python 0.0 would be float64 in the kernels


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


@device
def observe(e, i, s, c, obs):
    """Agent i's row of ``obs``: offsets to every food, then to the nearest other agent, over L."""
    row = obs[e, i]
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


# ---- the step: six phases, a barrier between consecutive ones -----------------------------------


def forage_move(e, i, s, c, actions):
    """Agent i moves (0 stay, 1 x+1, 2 x-1, 3 y+1, 4 y-1) and marks the food on its new cell."""
    if c.reset_only != 0 or s.finished[e] != 0:
        return
    a = actions[e, i, 0]
    x = s.x[e, i] + (1 if a == 1 else 0) - (1 if a == 2 else 0)
    y = s.y[e, i] + (1 if a == 3 else 0) - (1 if a == 4 else 0)
    s.x[e, i] = wrap(x, c.grid_size)
    s.y[e, i] = wrap(y, c.grid_size)
    for f in range(s.food_x.shape[1]):
        if s.food_x[e, f] == s.x[e, i] and s.food_y[e, f] == s.y[e, i]:
            s.hit[e, f] = 1  # agents on the same cell all write 1: a harmless race


def forage_collect(e, s, c, actions):
    """Per env, after every agent moved: respawn the eaten food, count it, end the episode."""
    if c.reset_only != 0:
        return
    if s.finished[e] != 0:
        s.food[e] = _ZERO
        s.restart[e] = 0
        return
    s.timestep[e] += 1
    eaten_now = 0
    for f in range(s.food_x.shape[1]):
        if s.hit[e, f] != 0:
            s.hit[e, f] = 0
            eaten_now += 1
            draw_food(e, f, s, c, s.timestep[e])
    s.eaten[e] += eaten_now
    s.food[e] = np.float32(eaten_now)
    terminated = c.food_target > 0 and s.eaten[e] >= c.food_target
    truncated = s.timestep[e] >= c.episode_length and not terminated
    s.terminated[e] = terminated
    s.truncated[e] = truncated
    s.restart[e] = 1 if (terminated or truncated) and c.autoreset != 0 else 0


def forage_reward_observe(e, i, s, c, actions):
    """The shared reward, and the observation (into final_obs when the env restarts right after)."""
    if c.reset_only != 0:
        return
    if s.finished[e] != 0:
        s.reward[e, i] = _ZERO
        return
    s.reward[e, i] = s.food[e] * c.food_reward
    observe(e, i, s, c, s.final_obs if s.restart[e] != 0 else s.obs)


def forage_restart_agents(e, i, s, c, actions):
    """A restarting env (autoreset or reset) draws agent i's start cell."""
    if s.restart[e] != 0:
        env_id = c.env_id_offset + e
        s.x[e, i] = random_below(c.seed, env_id, i, s.episode[e], 0, c.grid_size)
        s.y[e, i] = random_below(c.seed, env_id, i, s.episode[e], 1, c.grid_size)


def forage_restart_env(e, s, c, actions):
    """Per env: freeze an ended env (autoreset=False), or start the new episode of a restarting one."""
    if c.reset_only == 0 and c.autoreset == 0 and (s.terminated[e] != 0 or s.truncated[e] != 0):
        s.finished[e] = 1
    if s.restart[e] == 0:
        return
    for f in range(s.food_x.shape[1]):
        draw_food(e, f, s, c, 0)
    s.timestep[e] = 0
    s.eaten[e] = 0
    s.episode[e] += 1
    s.finished[e] = 0
    if c.reset_only != 0:  # an autoreset reports how the episode ended; a reset clears it
        s.terminated[e] = 0
        s.truncated[e] = 0
        s.food[e] = _ZERO


def forage_restart_observe(e, i, s, c, actions):
    """A restarting env's agents observe their new episode (after every agent and food was drawn)."""
    if s.restart[e] != 0:
        observe(e, i, s, c, s.obs)


foraging_step = EnvKernel("foraging_step", [
    per_agent(forage_move), per_env(forage_collect), per_agent(forage_reward_observe),
    per_agent(forage_restart_agents), per_env(forage_restart_env), per_agent(forage_restart_observe),
], nargs=3)


class Foraging(KernelEnv):
    """``gpurl.make("foraging", ...)``: one group "forager", actions Discrete(5), obs float32 [2F + 2].

    Returned tensors are views of buffers that the next step rewrites in place: copy what you keep.
    """

    def __init__(self, *, num_envs=1024, device="cpu", seed=0, autoreset=True, validate=True,
                 env_id_offset=0, target=None, **env_params):
        valid = [f.name for f in fields(ForagingParams)]
        unknown = sorted(set(env_params) - set(valid))
        if unknown:
            raise TypeError(f"foraging got unknown parameter(s) {unknown}; valid parameters: {valid}")
        self.params = p = ForagingParams(**env_params)
        super().__init__(num_envs=num_envs, device=device, seed=seed, autoreset=autoreset, validate=validate,
                         env_id_offset=env_id_offset, target=target)
        group = gpurl.Group(slice(0, p.num_agents), 2 * p.num_food + 2, gymnasium.spaces.Discrete(5))
        self._setup_outputs(p.num_agents, OrderedDict(forager=group))
        E, N, F = self.num_envs, p.num_agents, p.num_food

        def zeros(*shape, dtype=torch.int32):
            return torch.zeros(shape, dtype=dtype, device=self.device)

        self.state = ForagingState(x=zeros(E, N), y=zeros(E, N), food_x=zeros(E, F), food_y=zeros(E, F),
                                   eaten=zeros(E), timestep=zeros(E), episode=zeros(E))
        self._food, self._hit = zeros(E, dtype=torch.float32), zeros(E, F, dtype=torch.uint8)
        self._finished, self._restart = zeros(E, dtype=torch.uint8), zeros(E, dtype=torch.uint8)
        v = self._view
        self._arrays = ForagingArrays(
            **{f.name: v(getattr(self.state, f.name)) for f in fields(self.state)},
            obs=v(self.obs), final_obs=v(self.final_obs), reward=v(self.reward), terminated=v(self.terminated),
            truncated=v(self.truncated), food=v(self._food), hit=v(self._hit), finished=v(self._finished),
            restart=v(self._restart))
        self._consts = ForagingConsts(
            grid_size=np.int32(p.grid_size), size_f32=np.float32(p.grid_size),
            episode_length=np.int32(p.episode_length), food_target=np.int32(p.food_target),
            food_reward=np.float32(p.food_reward), autoreset=np.int32(self.autoreset), reset_only=np.int32(0),
            seed=np.uint64(self.seed), env_id_offset=np.int64(self.env_id_offset))
        self._no_actions = v(zeros(1, 1, 1, dtype=torch.int64))  # a reset launch reads no actions

    def _rekey(self, mask):
        self._consts = self._consts._replace(seed=np.uint64(self.seed))
        self.state.episode.masked_fill_(mask, 0)  # a new seed starts counting episodes again

    def _launch_reset(self, mask):
        self._restart.copy_(mask)
        foraging_step.launch(self.target, self.num_envs, self.num_agents, self._arrays,
                             self._consts._replace(reset_only=np.int32(1)), self._no_actions, stream=self._stream())

    def _launch_step(self, actions, out):
        arrays, v = self._arrays, self._view
        if out is not None:  # a trainer's rollout slot: the kernel writes there directly
            arrays = arrays._replace(obs=v(out.obs), final_obs=v(out.final_obs), reward=v(out.reward),
                                     terminated=v(out.terminated), truncated=v(out.truncated))
        foraging_step.launch(self.target, self.num_envs, self.num_agents, arrays, self._consts, v(actions),
                             stream=self._stream())

    def step_metrics(self):
        """``food``: items eaten in the last step, float32 [num_envs] (the trainer logs food_per_episode)."""
        return {"food": self._food}


gpurl.register("foraging", Foraging)


def main(argv: list[str] | None = None) -> dict:
    """Train the foragers with gpurl's PPO (``gpurl train`` with this env's defaults); it prints the
    returns of random and trained policies and ends with the RESULT line."""
    from gpurl.train.cli import main as train

    defaults = ["--env", "foraging", "--num-envs", "64", "--rollout-len", "64", "--iters", "30", "--lr", "1e-3"]
    return train(defaults + list(sys.argv[1:] if argv is None else argv), prog="examples/custom_env.py")


if __name__ == "__main__":
    main()
