"""Sim tier: the CUDA builds clamp out-of-range discrete actions (validate=False) as the CPU builds do.

docs/specs/API.md, "Errors": each action value is clamped into 0..n-1 of its dimension by
``gpurl.kernels.clamp_action``, which both builds compile from one source. Here each built-in env's CUDA
build runs in Numba's simulator twice, once with out-of-range actions and once with the same actions
clamped on the host: every state field and output must match bit for bit (one build, so no ulp
differences). Box actions (simple_tag) are clipped into [0, 1] with NaN acting as 0 alike. The metadata
checks (wrong shape) raise for the CUDA target too.

Cost: 2 envs x 4-6 agents x 3 steps per env in the simulator (~1e3 agent-steps/s): a few seconds each; no
CPU build is compiled.
"""
from __future__ import annotations

import pytest
import torch

import gpurl

pytestmark = [
    pytest.mark.sim,
    # uint64 hashing wraps on purpose; the simulator evaluates it with NumPy scalars, which warn.
    pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning"),
]

E = 2
PARAMS = {
    "tag_continuous": dict(num_taggers=2, num_runners=4, grid_length=3.0, episode_length=2, tagging_distance=0.3),
    "simple_tag": dict(num_adversaries=2, num_good=2, num_obstacles=1, max_cycles=2),
    "tag_gridworld": dict(num_taggers=3, grid_length=2, episode_length=2),
}
OUTPUTS = ("obs", "final_obs", "reward", "terminated", "truncated")


def make(name):
    return gpurl.make(name, num_envs=E, device="cpu", target="cuda", seed=7, validate=False, **PARAMS[name])


def snapshot(env) -> dict:
    snap = {f"state.{k}": v.clone() for k, v in vars(env.state).items()}
    snap.update({k: getattr(env, k).clone() for k in OUTPUTS})
    return snap


@pytest.mark.parametrize("name", list(PARAMS))
def test_cuda_build_clamps_out_of_range_actions(name):
    raw_env, twin = make(name), make(name)
    assert raw_env.target == "cuda"
    raw_env.reset()
    twin.reset()
    high = raw_env._action_high  # [N, D]
    N, D = raw_env.num_agents, raw_env.action_dims
    values = torch.tensor([-(2**63), -(2**40), -1, 0, 1, 2, 3, 4, 5, 10**6, 2**40, 2**63 - 1])
    gen = torch.Generator().manual_seed(1)
    for t in range(3):  # episodes of 2 steps: an autoreset on the way
        actions = values[torch.randint(len(values), (E, N, D), generator=gen)]
        actions[t % E] = 2**40  # every bound passed in one env
        raw_env.step(actions)
        twin.step(torch.minimum(actions.clamp_min(0), high - 1))
        a, b = snapshot(raw_env), snapshot(twin)
        for k in a:
            assert torch.equal(a[k], b[k]), f"step {t}: {k}"
    with pytest.raises(ValueError, match=r"actions must have shape .*got \(2, 3, "):
        raw_env.step(torch.zeros((E, 3, D), dtype=torch.int64))


def test_cuda_build_clips_box_actions_nan_as_zero():
    """simple_tag Box actions: NaN, infinities and huge values step like the host-clipped actions."""
    raw_env, twin = (gpurl.make("simple_tag", num_envs=E, device="cpu", target="cuda", seed=7, validate=False,
                                continuous_actions=True, **PARAMS["simple_tag"]) for _ in range(2))
    raw_env.reset()
    twin.reset()
    special = torch.tensor([float("nan"), float("inf"), -float("inf"), 1e30, -1e30, -0.5, 1.5, 0.25])
    gen = torch.Generator().manual_seed(2)
    for t in range(3):
        actions = special[torch.randint(len(special), (E, raw_env.num_agents, 5), generator=gen)]
        raw_env.step(actions)
        twin.step(torch.nan_to_num(actions, nan=0.0).clamp(0.0, 1.0))
        a, b = snapshot(raw_env), snapshot(twin)
        for k in a:
            assert torch.equal(a[k], b[k]), f"step {t}: {k}"
