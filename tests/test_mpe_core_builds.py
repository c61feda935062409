"""The particle-world core's fixed-world CPU build (large batches of small worlds: sizes, kinds and world
numbers compiled in, gpurl/envs/mpe/physics.py) computes the same bits as the run-time build that small
batches and CUDA use, for a world that exercises every branch the fixed build folds away: an immovable agent
that talks, agents that move and talk (Discrete ``move + 5 * message`` or Box), a heavy kind (mass 2.25), a
kind without a speed cap, kinds that collide with nothing, landmarks of two kinds. simple_tag's own test
(test_simple_tag_fixed_sizes.py) covers a silent world with catches and terminations.

Cost: two compiles (run-time and fixed) per action dtype.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch

from gpurl.envs import base
from gpurl.envs.mpe.env import ParticleEnv, particle_scratch, particle_start, particle_state, particle_step
from gpurl.envs.mpe.params import ParticleParams
from gpurl.envs.mpe.phases import particle_draw_position, particle_finish
from gpurl.envs.mpe.world import AgentGroup, Kind, Landmarks, World
from gpurl.kernels import per_agent, per_env

pytestmark = pytest.mark.cpu

SPEAKER = Kind("speaker", size=0.075, movable=False, silent=False, collide=False)
RUNNER = Kind("runner", size=0.05, accel=1.5, max_speed=1.0, mass=2.25, silent=False)
BLOCKER = Kind("blocker", size=0.1)  # accel None (5.0), no speed cap, silent
ROCK = Kind("rock", size=0.2, movable=False)
GOAL = Kind("goal", size=0.05, movable=False, collide=False)
DIM_C = 3
OBS_DIM = 4 + 2 + DIM_C * 5  # v, p, the first agent's p, every agent's message
_LOW, _SPAN = np.float32(-0.5), np.float32(1.0)


@dataclass(frozen=True)
class MixedParams(ParticleParams):
    @property
    def num_landmarks(self) -> int:
        return 3


def mixed_draw(e, i, s, c, actions):
    particle_draw_position(e, i, s, c, _LOW, _SPAN)
    if i < 3:
        particle_draw_position(e, 5 + i, s, c, _LOW, _SPAN)


def mixed_reward(e, s, c, actions):
    for i in range(s.pos.shape[1]):
        s.reward[e, i] = -s.pos[e, i, 0] * s.pos[e, i, 0]
    particle_finish(e, s, c, False)


def mixed_observe(e, i, s, c, actions):
    row = s.obs[e, i]
    row[0] = s.vel[e, i, 0]
    row[1] = s.vel[e, i, 1]
    row[2] = s.pos[e, i, 0]
    row[3] = s.pos[e, i, 1]
    row[4] = s.pos[e, 0, 0]
    row[5] = s.pos[e, 0, 1]
    for j in range(s.comm.shape[1]):
        for d in range(s.comm.shape[2]):
            row[6 + DIM_C * j + d] = s.comm[e, j, d]


class Mixed(ParticleEnv):
    name = "mpe_core_mixed"
    params_type = MixedParams
    state = particle_state(talks=True)
    scratch = particle_scratch(talks=True)
    step_phases = particle_step(per_env(mixed_reward), per_agent(mixed_observe))
    start_phases = particle_start([per_agent(mixed_draw)], [per_agent(mixed_observe)])

    def world(self) -> World:
        return World(groups=(AgentGroup("speaker", 1, SPEAKER, OBS_DIM, "speaker"),
                             AgentGroup("runner", 2, RUNNER, OBS_DIM, "runner"),
                             AgentGroup("blocker", 2, BLOCKER, OBS_DIM, "blocker")),
                     landmarks=(Landmarks(2, ROCK), Landmarks(1, GOAL)), dim_c=DIM_C)


def random_actions(env, gen: torch.Generator) -> torch.Tensor:
    """Every group's space, out-of-range values included (clamped, clipped)."""
    E, N = env.num_envs, env.num_agents
    if env.action_dtype == torch.float32:
        return torch.rand((E, N, env.action_dims), generator=gen) * 1.6 - 0.3
    high = torch.tensor([int(g.action_space.n) for g in env.groups.values() for _ in range(g.agents.stop - g.agents.start)])
    return (torch.rand((E, N), generator=gen) * (high + 2)).long() - 1


@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "continuous"])
def test_fixed_world_build_is_bit_identical_to_the_run_time_build(continuous, monkeypatch):
    params = dict(num_envs=8, seed=3, validate=False, max_cycles=6, continuous_actions=continuous)
    runtime = Mixed(**params)
    monkeypatch.setattr(base, "FIXED_AGENTS_MIN_ENVS", 1)
    fixed = Mixed(**params)
    constants = dict(fixed._build_constants)
    assert runtime._build_constants == () and constants["PARTICLE_AGENTS"] == 5
    assert constants["PARTICLE_KIND_MASS"][1] == np.float32(2.25) and constants["PARTICLE_ANY_TALKS"] == 1
    for env in (runtime, fixed):
        env.reset()
    gen = torch.Generator().manual_seed(int(continuous))
    capped = 0
    for t in range(14):
        if t % 5 == 0:  # crowd and shake: contacts, speed caps
            pos = torch.rand(runtime.state.pos.shape, generator=gen) * 0.4 - 0.2
            vel = torch.rand(runtime.state.vel.shape, generator=gen) * 3 - 1.5
            for env in (runtime, fixed):
                env.state.pos.copy_(pos)
                env.state.vel.copy_(vel)
        actions = random_actions(runtime, gen)
        out_r, out_f = runtime.step(actions), fixed.step(actions)
        for name, a, b in zip(("obs", "reward", "terminated", "truncated"), out_r[:4], out_f[:4]):
            assert torch.equal(a, b), (t, name)
        for k in ("pos", "vel", "comm", "landmark_pos", "timestep", "episode"):
            assert torch.equal(getattr(runtime.state, k), getattr(fixed.state, k)), (t, k)
        speed = runtime.state.vel.norm(dim=-1)
        capped += int((speed[:, 1:3] > 0.999).sum())
    assert capped > 0 and bool((runtime.state.comm != 0).any())
    assert (runtime.state.vel[:, 0] == 0).all()  # the speaker never moves
    assert ("cpu", fixed._build_constants) in fixed.kernel._builds
