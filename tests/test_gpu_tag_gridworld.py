"""GPU tier: tag_gridworld on a real CUDA device vs the NumPy reference, bit for bit (skips without CUDA).

Integers and float32 divisions are exact on the GPU too (no FMA can contract a lone division), so the
comparison is exact, as in the cpu tier.
"""
import pytest
import torch

import gpurl

from gridworld_harness import make_small, random_actions, run_against_reference

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("full", [True, False], ids=["full_obs", "partial_obs"])
def test_cuda_env_equals_reference_across_autoresets(requires_cuda, full):
    env = make_small(device=requires_cuda, use_full_observation=full)
    terminated, truncated = run_against_reference(env, steps=30)
    assert terminated >= 1 and truncated >= 1


def test_more_agents_than_a_block_and_validate_false(requires_cuda):
    # 300 agents > 256 threads per block: threads stride over agents across every barrier.
    env = make_small(device=requires_cuda, num_envs=3, num_taggers=299, grid_length=20, episode_length=4)
    run_against_reference(env, steps=6, seed=1)
    fast = gpurl.make("tag_gridworld", num_envs=64, device=requires_cuda, validate=False, num_taggers=4)
    fast.reset()
    gen = torch.Generator().manual_seed(2)
    for _ in range(5):
        fast.step(random_actions(fast, gen).to(requires_cuda))
    assert int(fast.state.timestep.max()) <= fast.params.episode_length
