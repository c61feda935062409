"""GPU tier: env steps through prepared launches (gpurl.kernels.prepared_launch) write exactly what ordinary
numba-cuda launches write, with and without ``out=`` slots, under a CUDA graph, and with Numba's typing and
marshalling made to fail after the first launches."""
import numpy as np
import pytest
import torch

import gpurl
from gpurl.envs import StepOutputs
from gpurl.envs.launch_path import DispatchLauncher, PreparedLauncher

pytestmark = pytest.mark.gpu

STEPS = 40


def _pair(name, num_envs, device):
    """Two envs of one seed: the second never prepares (every launch the ordinary way)."""
    envs = [gpurl.make(name, num_envs=num_envs, seed=3, device=device, validate=False) for _ in range(2)]
    assert isinstance(envs[0].launcher, PreparedLauncher)
    envs[1].launcher = DispatchLauncher(envs[1])
    return envs


def _actions(env, generator):
    return torch.cat([torch.randint(0, g.action_space.n, (env.num_envs, g.agents.stop - g.agents.start, 1),
                                    generator=generator, device=env.device) for g in env.groups.values()], dim=1)


def _results(env, out=None):
    src = env if out is None else out
    return [t.clone() for t in (src.obs, src.reward, src.terminated, src.truncated, src.final_obs)]


@pytest.mark.parametrize("name, num_envs", [("simple", 1), ("simple_tag", 4096), ("simple_spread", 300)])
def test_prepared_steps_match_ordinary_launches(requires_cuda, name, num_envs):
    prepared, ordinary = _pair(name, num_envs, requires_cuda)
    generator = torch.Generator(device=requires_cuda).manual_seed(0)
    for env in (prepared, ordinary):
        env.reset()
    slots = [StepOutputs(obs=torch.empty_like(env.obs), reward=torch.empty_like(env.reward),
                         terminated=torch.empty_like(env.terminated), truncated=torch.empty_like(env.truncated),
                         final_obs=torch.zeros_like(env.obs)) for env in (prepared, ordinary)]
    for t in range(STEPS):
        actions = _actions(prepared, generator)
        # A trainer's slot now and then, the first step's too (the step launch is prepared with the slot's
        # pointers): the outputs' pointers change between calls.
        use_out = t % 3 == 0
        got = []
        for env, slot in zip((prepared, ordinary), slots):
            env.step(actions, out=slot if use_out else None)
            got.append(_results(env, slot if use_out else None))
        for name_, a, b in zip(("obs", "reward", "terminated", "truncated", "final_obs"), *got):
            torch.testing.assert_close(a, b, rtol=0, atol=0, msg=f"step {t}: {name_}")
    assert len(prepared.launcher._prepared) == 2, "a reset and a step launch should both be prepared"


def test_prepared_steps_do_no_typing_or_marshalling(requires_cuda, monkeypatch):
    from numba.cuda import dispatcher

    env = gpurl.make("simple_tag", num_envs=64, seed=0, device=requires_cuda, validate=False)
    env.reset()
    generator = torch.Generator(device=requires_cuda).manual_seed(0)
    env.step(_actions(env, generator))  # the step's first (ordinary) launch, then prepared

    def fail(*args, **kwargs):
        raise AssertionError("typed or marshalled an argument after the first launch")

    monkeypatch.setattr(dispatcher.CUDADispatcher, "typeof_pyval", fail)
    monkeypatch.setattr(dispatcher._Kernel, "_prepare_args", fail)
    for _ in range(5):
        env.step(_actions(env, generator))
    torch.cuda.synchronize()
    assert np.isfinite(env.obs.cpu().numpy()).all()


def test_prepared_steps_replay_in_a_cuda_graph(requires_cuda):
    prepared, ordinary = _pair("simple_tag", 256, requires_cuda)
    actions = torch.zeros(256, prepared.num_agents, 1, dtype=torch.int64, device=requires_cuda)
    for env in (prepared, ordinary):
        env.reset()
        env.step(actions)  # prepares (the first env)
    side = torch.cuda.Stream(requires_cuda)
    side.wait_stream(torch.cuda.current_stream(requires_cuda))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        prepared.step(actions)
    generator = torch.Generator(device=requires_cuda).manual_seed(1)
    for t in range(10):
        actions.copy_(_actions(prepared, generator))
        graph.replay()
        ordinary.step(actions)
        for a, b in zip(_results(prepared), _results(ordinary)):
            torch.testing.assert_close(a, b, rtol=0, atol=0, msg=f"replay {t}")
