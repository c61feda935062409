"""GPU tier: the example env (examples/custom_env.py) on a real CUDA device vs its NumPy reference, bit for
bit (skips without CUDA).

Its floats are lone float32 divisions (obs) and one float32 product (reward): nothing an FMA could
contract, so the comparison is exact, as in the cpu tier.
"""
import pytest
import torch

from custom_env_harness import make_small, random_actions, run_against_reference

pytestmark = pytest.mark.gpu


def test_cuda_env_equals_reference_across_autoresets(requires_cuda):
    env = make_small(device=requires_cuda)
    terminated, truncated = run_against_reference(env, steps=30)
    assert terminated >= 1 and truncated >= 1


def test_more_agents_than_a_block_and_validate_false(requires_cuda):
    # 300 agents > 256 threads per block: threads stride over agents across every barrier.
    env = make_small(device=requires_cuda, num_envs=3, num_agents=300, grid_size=20, episode_length=4)
    run_against_reference(env, steps=6, seed=1)
    fast = make_small(device=requires_cuda, num_envs=64, validate=False)
    fast.reset()
    gen = torch.Generator().manual_seed(2)
    for _ in range(5):
        fast.step(random_actions(fast, gen).to(requires_cuda))
    assert int(fast.state.timestep.max()) <= fast.params.episode_length
