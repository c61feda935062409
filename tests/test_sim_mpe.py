"""Sim tier: every MPE scenario's CUDA build (thread per agent, a barrier per phase) in Numba's simulator
against its CPU build (env-major), with the same params, seeds, actions and a crowded injected start.

Integers (clock, episode counts, draws, flags) must match exactly; floats within FLOAT_ATOL: the simulator
evaluates ``math.exp``/``math.sqrt`` of float32 values in float64 before rounding, the CPU build in float32.
Tiny: 2 envs, 3-step episodes (an autoreset inside the run), 4 steps, messages where agents talk; Box actions
only where their decoding differs (each case is one more CPU compile).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import gpurl
from gpurl.envs.mpe import SCENARIOS

from mpe2_pairing import box_pairing, random_actions

pytestmark = [
    pytest.mark.sim,
    # uint64 hashing wraps on purpose; the simulator evaluates it with NumPy scalars, which warn.
    pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning"),
]

FLOAT_ATOL = 1e-5


def make_pair(name: str, continuous: bool):
    params = dict(num_envs=2, device="cpu", seed=5, max_cycles=3, continuous_actions=continuous)
    sim = gpurl.make(name, target="cuda", **params)
    cpu = gpurl.make(name, target="cpu", **params)
    assert (sim.target, cpu.target) == ("cuda", "cpu")
    return sim, cpu


def assert_envs_match(sim, cpu, where: str) -> None:
    for name in sim.state.__dataclass_fields__:
        got, want = getattr(sim.state, name).numpy(), getattr(cpu.state, name).numpy()
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=0, atol=FLOAT_ATOL, err_msg=f"{where}: state.{name}")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"{where}: state.{name}")
    for name in ("terminated", "truncated"):
        np.testing.assert_array_equal(getattr(sim, name).numpy(), getattr(cpu, name).numpy(), err_msg=f"{where}: {name}")
    for name in ("obs", "reward", "final_obs", "global_state", "final_global_state"):
        np.testing.assert_allclose(getattr(sim, name).numpy(), getattr(cpu, name).numpy(), rtol=0, atol=FLOAT_ATOL,
                                   err_msg=f"{where}: {name}")


def crowd(envs, gen: torch.Generator) -> None:
    """The same crowded positions (contacts) and random messages into both envs."""
    pos = torch.rand(envs[0].state.pos.shape, generator=gen) * 0.4 - 0.2
    landmarks = torch.rand(envs[0].state.landmark_pos.shape, generator=gen) * 0.6 - 0.3
    comm = torch.rand(envs[0].state.comm.shape, generator=gen) if hasattr(envs[0].state, "comm") else None
    for env in envs:
        env.state.pos.copy_(pos)
        env.state.landmark_pos.copy_(landmarks)
        if comm is not None:
            env.state.comm.copy_(comm)


#: Every scenario with Discrete actions; Box actions (another CPU compile each) where their decoding differs,
#: as for the cpu tier's pairings (tests/mpe2_pairing.py box_pairing).
CASES = [(name, p.values[0]) for name in sorted(SCENARIOS) for p in box_pairing(name)]


@pytest.mark.parametrize("name, continuous", CASES, ids=[f"{n}-{'box' if c else 'discrete'}" for n, c in CASES])
def test_simulator_matches_cpu_build(name, continuous):
    sim, cpu = make_pair(name, continuous)
    sim.reset()
    cpu.reset()
    assert_envs_match(sim, cpu, "reset")
    gen = torch.Generator().manual_seed(len(name))
    crowd((sim, cpu), gen)
    for t in range(4):
        actions = random_actions(cpu, gen)
        sim.step(actions)
        cpu.step(actions)
        assert_envs_match(sim, cpu, f"{name} step {t}")
    assert (cpu.state.episode.numpy() == 2).all()  # the run crossed an autoreset
