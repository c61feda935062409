"""Profiling hooks: NVTX ranges around every phase of a training run, the nsys capture window, and the
all-reduce range of data-parallel training (recorded through a stand-in for the ``nvtx`` package)."""
from __future__ import annotations

import contextlib

import pytest
import torch

import gpurl.profiling as profiling
from gpurl.multigpu.placement import LocalComm
from gpurl.multigpu.policies import DataParallel
from gpurl.profiling import ProfilerWindow
from gpurl.train.config import build_config
from gpurl.train.run import train

pytestmark = pytest.mark.cpu


class RecordingNvtx:
    """Stands in for the nvtx package: remembers every range opened (name, domain)."""

    def __init__(self):
        self.ranges: list[tuple[str, str]] = []

    def annotate(self, name, domain=None):
        self.ranges.append((name, domain))
        return contextlib.nullcontext()


@pytest.fixture
def nvtx(monkeypatch):
    recorder = RecordingNvtx()
    monkeypatch.setattr(profiling, "_nvtx", recorder)
    return recorder


def test_every_phase_of_a_run_is_an_nvtx_range(nvtx, tmp_path):
    cfg = build_config(env="tag_gridworld", env_params=dict(num_taggers=2, grid_length=6, episode_length=5),
                       num_envs=3, rollout_len=4, iters=2, eval_episodes=0, device="cpu", log_dir=str(tmp_path),
                       progress=False, policy_backend="eager", learner_backend="eager")
    train(cfg, say=lambda *a: None)
    names = [name for name, _ in nvtx.ranges]
    assert {domain for _, domain in nvtx.ranges} == {"gpurl"}
    for phase in ("reset", "iteration 0", "iteration 1", "rollout", "act", "env", "bookkeeping", "communicate",
                  "advantages", "gae", "learn"):
        assert phase in names, phase
    # one act and one env range per rollout step and iteration
    assert names.count("act") == names.count("env") == 2 * 4


def test_data_parallel_gradient_all_reduce_is_a_range(nvtx):
    layer = torch.nn.Linear(3, 2)
    layer(torch.ones(4, 3)).sum().backward()
    before = [p.grad.clone() for p in layer.parameters()]
    DataParallel(LocalComm()).reduce_gradients([p.grad for p in layer.parameters()])
    assert ("all_reduce", "gpurl") in nvtx.ranges
    for p, g in zip(layer.parameters(), before):  # world size 1: the sum is the gradient itself
        torch.testing.assert_close(p.grad, g)


def test_nsys_window_brackets_the_chosen_iterations():
    calls = []
    window = ProfilerWindow((2, 4), torch.device("cuda"), start=lambda: calls.append("start"),
                            stop=lambda: calls.append("stop"), sync=lambda: calls.append("sync"))
    for iteration in range(6):  # the run loop: before(i), iterate, after(i + 1)
        window.before(iteration)
        calls.append(f"iter {iteration}")
        window.after(iteration + 1)
    assert calls == ["iter 0", "iter 1", "sync", "start", "iter 2", "iter 3", "sync", "stop", "iter 4", "iter 5"]


def test_nsys_window_is_inactive_on_the_cpu_and_when_empty():
    boom = lambda: pytest.fail("profiler called")  # noqa: E731
    for window in (ProfilerWindow((0, 1), torch.device("cpu"), boom, boom, boom),
                   ProfilerWindow((), torch.device("cuda"), boom, boom, boom)):
        window.before(0)
        window.after(1)


@pytest.mark.parametrize("iters", [(3,), (4, 2), (2, 2), (-1, 2), (1, 2, 3)])
def test_bad_nsys_window_is_named(iters):
    with pytest.raises(ValueError, match="nsys_iters"):
        build_config(iters=10, nsys_iters=iters)
