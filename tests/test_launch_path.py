"""An env's one launch path (gpurl/envs/launch_path.py), chosen when the env is built: which launcher each kind
of env gets on the CPU, on CUDA and in Numba's simulator, and that reset and step call that launcher and
nothing else (no branching on the target per call).

Cost (cpu tier): no kernel compiles: every launch here goes to a recorder or a fake CUDA C module. The sim
test builds two tiny envs and launches them in the simulator (a few seconds).
"""
from __future__ import annotations

import types

import numpy as np
import pytest
import torch

import gpurl
from gpurl.envs import StepOutputs, launch_path
from gpurl.envs.base import KernelEnv
from gpurl.envs.launch_path import DirectLauncher, DispatchLauncher, PreparedLauncher
from gpurl.envs.tag_gridworld import TagGridworld
from gpurl.envs.tag_gridworld import env as tag_gridworld_env
from gpurl.envs.tag_gridworld.cuda_c import KERNEL, GridCudaC

from custom_env_harness import custom_env  # noqa: F401  (registers "foraging", a kernel author's env)

KINDS = {  # one env of each kind: an MPE scenario, the two tag envs, an author's env from examples/
    "simple_spread": {},
    "tag_continuous": dict(num_taggers=2, num_runners=3),
    "tag_gridworld": dict(num_taggers=3, grid_length=4),
    "foraging": dict(num_agents=3, num_food=3, grid_size=3),
}


def make(name: str, **kwargs):
    return gpurl.make(name, num_envs=2, seed=1, **{**KINDS[name], **kwargs})


@pytest.mark.cpu
@pytest.mark.parametrize("name", KINDS)
def test_every_cpu_env_launches_directly(name):
    env = make(name)
    assert type(env.launcher) is DirectLauncher
    assert env.launch_path == "cpu: direct launch (numba parallel)"


@pytest.mark.cpu
def test_the_launcher_follows_the_target_and_the_simulator(monkeypatch):
    """A CUDA env gets prepared launches; a CUDA build in Numba's simulator gets the dispatch (decided by
    launch_path.choose_launcher alone, checked here over a CPU env's buffers)."""
    env = make("simple_spread")
    monkeypatch.setattr(env, "target", "cuda")
    monkeypatch.setattr(launch_path, "simulator_enabled", lambda: False)
    prepared = launch_path.choose_launcher(env)
    assert type(prepared) is PreparedLauncher and prepared.path == "cuda: numba-cuda, prepared launches"
    monkeypatch.setattr(launch_path, "simulator_enabled", lambda: True)
    assert type(launch_path.choose_launcher(env)) is DispatchLauncher


class Recorder:
    """A launcher that records its calls."""

    path = "recorded"

    def __init__(self):
        self.calls = []

    def reset(self, consts):
        self.calls.append(("reset", consts))

    def step(self, consts, actions, out):
        self.calls.append(("step", consts, actions, out))

    def constants_changed(self):
        self.calls.append(("constants_changed",))


def _forbid(*args, **kwargs):
    raise AssertionError("launched around the launcher")


@pytest.mark.cpu
def test_reset_and_step_call_the_launcher_and_nothing_else(monkeypatch):
    env = make("simple_spread", validate=False)
    recorder = Recorder()
    env.launcher = recorder
    monkeypatch.setattr(type(env.kernel), "launch", _forbid)
    monkeypatch.setattr(type(env.kernel), "direct_launch", _forbid)
    env.reset()
    reset_consts, step_consts = env._reset_consts, env._consts
    actions = torch.zeros(2, env.num_agents, 1, dtype=torch.int64)
    env.step(actions)
    slot = StepOutputs(obs=torch.zeros_like(env.obs), reward=torch.zeros_like(env.reward),
                       terminated=torch.zeros_like(env.terminated), truncated=torch.zeros_like(env.truncated),
                       final_obs=torch.zeros_like(env.obs))
    env.step(actions, out=slot)
    env.reset(seed=5, mask=torch.tensor([True, False]))
    assert [c[0] for c in recorder.calls] == ["reset", "step", "step", "constants_changed", "reset"]
    assert recorder.calls[0][1] is reset_consts
    assert recorder.calls[1][1] is step_consts and recorder.calls[1][2] is actions and recorder.calls[1][3] is None
    assert recorder.calls[2][3] is slot
    assert recorder.calls[4][1] is env._reset_consts and env._reset_consts.seed == 5  # the reseed's new constants
    assert env._tensors["restart"].tolist() == [1, 0]  # what the reset launch restarts
    assert env.launch_path == "recorded"


@pytest.mark.cpu
def test_no_env_class_launches_around_its_launcher():
    """The base class's reset and step are the only ones; no class keeps a launch hook of its own."""
    for cls in (KernelEnv, TagGridworld, type(make("tag_continuous")), type(make("simple_spread"))):
        for hook in ("_launch", "_launch_step", "_launch_reset", "_launch_prepared", "_prepare"):
            assert not hasattr(cls, hook), (cls.__name__, hook)
    assert "step" not in TagGridworld.__dict__ and "reset" not in TagGridworld.__dict__


class FakeModule:
    """A CUDA C module that records its launches, and the launches it prepares and what they are given."""

    def __init__(self):
        self.launches = []
        self.prepared = []  # (name, grid, block, args, varying)
        self.prepared_launches = []  # (pointers, stream)

    def launch(self, name, grid, block, args):
        self.launches.append((name, grid, block, args))

    def prepare(self, name, grid, block, args, varying):
        self.prepared.append((name, grid, block, args, varying))
        return types.SimpleNamespace(launch=lambda pointers, stream: self.prepared_launches.append((pointers, stream)))


@pytest.mark.cpu
def test_tag_gridworld_chooses_its_cuda_c_launcher_when_built(monkeypatch):
    """kernel_source="cuda_c" needs a CUDA device, so the choice is checked here on a CPU env: with
    kernel_source="cuda_c" at build, choose_launcher gives the CUDA C launcher, whose reset and step launch
    tag_gridworld.cu (here a recorder) over the env's buffers."""
    module = FakeModule()
    monkeypatch.setattr(tag_gridworld_env, "cuda_c_module", lambda: module)
    env = make("tag_gridworld", validate=False)
    assert type(env.launcher) is DirectLauncher
    env.kernel_language = "cuda_c"
    env.launcher = env.choose_launcher()
    assert type(env.launcher) is GridCudaC and env.launcher.module is module
    assert env.launch_path == "cpu: CUDA C built for the host (g++, tests), prepared launches"
    env.reset()
    actions = torch.zeros(2, env.num_agents, 1, dtype=torch.int64)
    env.step(actions)
    (reset_name, grid, _, reset_args), (_, _, _, step_args) = module.launches
    assert (reset_name, grid) == (KERNEL, 2)
    assert reset_args[-2:] == (None, 0) and step_args[-1] == 8  # reset: no actions; step: int64 actions
    # the first step prepares the next: the actions' and the outputs' pointers vary
    ((name, _, _, args, varying),) = module.prepared
    assert name == KERNEL and args is step_args and args[varying[0]] is actions
    assert [args[k] for k in varying[1:]] == [getattr(env, n) for n in launch_path.OUTPUTS]
    later = torch.ones_like(actions)
    env.step(later)
    assert len(module.launches) == 2 and module.prepared_launches == [
        ((later.data_ptr(), *(getattr(env, n).data_ptr() for n in launch_path.OUTPUTS)), 0)]


@pytest.mark.sim
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("name", ["simple_spread", "tag_gridworld"])
def test_simulated_cuda_builds_launch_through_the_dispatch(name):
    env = make(name, device="cpu", target="cuda", validate=False)
    assert type(env.launcher) is DispatchLauncher
    assert env.launch_path == "cuda: numba-cuda dispatch in Numba's simulator"
    env.reset()
    env.step(torch.zeros(2, env.num_agents, 1, dtype=torch.int64))
    assert np.isfinite(env.obs.numpy()).all()
