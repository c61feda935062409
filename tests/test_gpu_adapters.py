"""GPU tier: the Gymnasium and PettingZoo adapters over a CUDA env fetch a step's outputs with one wait
(``_common.host_arrays``: pinned copies without blocking, one stream synchronisation). The reference is the
env's own outputs, copied to the host one by one after the step.
"""
import numpy as np
import pytest
import torch

import gpurl
from gpurl.envs.adapters import GymVectorEnv, ParallelEnv
from gpurl.envs.adapters._common import host_arrays

pytestmark = pytest.mark.gpu


def test_host_arrays_are_fresh_host_copies(requires_cuda):
    values = [torch.arange(6, dtype=torch.float32, device=requires_cuda).view(2, 3)[:, 1:],  # a strided view
              torch.tensor([True, False], device=requires_cuda), torch.arange(4, device=requires_cuda)]
    fetched = host_arrays(*values)
    expected = [np.array(v.cpu().numpy()) for v in values]
    for value in values:
        value.zero_()  # the device buffers change after the fetch: the host arrays keep what was fetched
    for got, want in zip(fetched, expected):
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype and np.array_equal(got, want)


def test_gym_vector_env_on_cuda_returns_the_step_outputs(requires_cuda):
    env = gpurl.make("simple_tag", num_envs=8, device=requires_cuda, seed=0, autoreset=True, max_cycles=4)
    adapter = GymVectorEnv(env, group="adversary", other_actions="noop")
    adapter.reset(seed=0)
    for t in range(6):  # past an episode's end: the final observations come back too
        actions = np.full(adapter.num_envs, t % 5, dtype=np.int64)
        obs, rewards, terminations, truncations, infos = adapter.step(actions)
        assert np.array_equal(obs, env.obs[:, 0:3, :].reshape(24, -1).cpu().numpy())
        assert np.array_equal(rewards, env.reward[:, 0:3].reshape(24).double().cpu().numpy())
        assert np.array_equal(terminations, np.repeat(env.terminated.cpu().numpy(), 3))
        assert np.array_equal(truncations, np.repeat(env.truncated.cpu().numpy(), 3))
        assert bool(truncations.any()) == (t % 4 == 3) and bool(truncations.any()) == ("final_obs" in infos)


def test_parallel_env_on_cuda_returns_the_step_outputs(requires_cuda):
    env = gpurl.make("simple_tag", num_envs=1, device=requires_cuda, seed=0, autoreset=False, max_cycles=4)
    adapter = ParallelEnv(env)
    adapter.reset(seed=0)
    for t in range(4):
        obs, rewards, terminations, truncations, _ = adapter.step({a: t % 5 for a in adapter.agents})
        rows = env.obs[0].cpu().numpy()
        for a, (i, width) in adapter._rows.items():
            assert np.array_equal(obs[a], rows[i, :width]) and rewards[a] == float(env.reward[0, i])
        assert set(truncations.values()) == {t == 3} and set(terminations.values()) == {False}
    assert adapter.agents == []
