"""CPU tier: the iteration a CUDA graph captures is the trainer's iteration.

On one CUDA device the trainer captures ``Trainer._device_iteration`` (rollout, learner, weights to the
actors) once and replays it (gpurl/fusion/graph.py). Here, without a GPU: that body, run as it is, lands
exactly where the trainer's phase-by-phase iteration does; and a capture that fails is reported and the
run goes on without the graph, where an uncaptured run is. The capture itself is the gpu tier's
(tests/test_gpu_fusion.py).
"""
from __future__ import annotations

import pytest
import torch

import gpurl.fusion.graph as graph_module
from gpurl.fusion.graph import GraphedCall
from gpurl.train import Trainer

from test_train_ppo import tiny_config

pytestmark = pytest.mark.cpu


def snapshot(trainer: Trainer) -> dict[str, torch.Tensor]:
    s = trainer.storage
    return {"params": trainer.algo.flat.param.detach().clone(), "adam": trainer.algo.optimizer.exp_avg_sq.clone(),
            "obs": s.obs.clone(), "actions": s.actions.clone(), "step": trainer.step_counter.clone(),
            "iteration": trainer.iteration_counter.clone(),
            **{f"norm:{k}": v.clone() for k, v in trainer.algo.nets.state_dict().items() if "obs_norm" in k}}


@pytest.mark.parametrize("algo", ["ppo", "mappo"])
def test_the_capturable_iteration_is_the_iteration(algo):
    phased, whole = Trainer(tiny_config(algo=algo)), Trainer(tiny_config(algo=algo))
    for _ in range(3):
        want = phased.iterate()
        got = whole._device_iteration()
        assert torch.equal(got, want)
    a, b = snapshot(phased), snapshot(whole)
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_a_failed_capture_is_reported_and_the_run_goes_on_without_the_graph(monkeypatch):
    def no_graphs(*args, **kwargs):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "CUDAGraph", lambda: object())
    monkeypatch.setattr(graph_module.torch.cuda, "graph", no_graphs)
    reference, trainer = Trainer(tiny_config()), Trainer(tiny_config())
    trainer.graphed_iteration = GraphedCall(trainer._device_iteration, name="training iteration")
    reference.iterate()
    trainer.iterate()  # the warm-up call: eager
    reference.iterate()
    with pytest.warns(UserWarning, match="capturing the training iteration as a CUDA graph failed: RuntimeError: "
                                         "operation not permitted"):
        trainer.iterate()
    assert trainer.graphed_iteration is None
    reference.iterate()
    trainer.iterate()
    assert trainer.iteration == reference.iteration == 3
    a, b = snapshot(reference), snapshot(trainer)
    for key in a:
        assert torch.equal(a[key], b[key]), key
