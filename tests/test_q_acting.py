"""CPU tier: the value-based algorithms' acting backends (gpurl/algos/q_acting.py).

- ``compiled`` (``torch.compile`` of ``QNetwork.act``) writes the eager definition's actions, for two groups
  with their own inputs, at epsilon 1 (all random), partway through the decay and greedy (an evaluation);
- ``auto`` is ``compiled`` on the CPU; ``triton`` outside Triton's interpreter and an unknown name are refused
  with errors that say why. (The fused kernel itself: tests/test_sim_fusion_q_actor.py.)
"""
from __future__ import annotations

import gymnasium
import pytest
import torch

from gpurl.algos.acting import resolve_kernel_backend
from gpurl.algos.q_acting import QActor
from gpurl.algos.q_nets import QNetwork
from gpurl.fusion.counter_rng import seed_tensor
from q_acting_harness import q_actor_setup

pytestmark = pytest.mark.cpu


def test_compiled_acting_writes_the_definitions_actions():
    E, N, obs_dim = 33, 4, 11
    obs = torch.randn(E, N, obs_dim, generator=torch.Generator().manual_seed(0))
    groups, spec, storage = q_actor_setup({"a": (slice(0, 1), obs_dim), "b": (slice(1, 4), 7)}, obs, env_offset=2)
    nets = torch.nn.ModuleDict({name: QNetwork(g.obs_dim, gymnasium.spaces.Discrete(6), (16, 16), "relu",
                                               torch.Generator().manual_seed(i))
                                for i, (name, g) in enumerate(groups.items())})
    actors = {b: QActor(groups, nets, spec, seed_tensor(4, "cpu"), 1.0, 0.0, 10, b, "relu")
              for b in ("compiled", "eager")}
    for step, seed in ((0, None), (6, None), (6, seed_tensor(9, "cpu"))):   # epsilon 1, 0.4, greedy
        actions = []
        for backend in ("compiled", "eager"):
            storage.fresh_actions()
            actors[backend].run(storage, 0, torch.tensor([step]), seed)
            actions.append(storage.actions.clone())
        assert torch.equal(actions[0], actions[1])
        assert (actions[0][0] >= 0).all() and (actions[0][1] < 0).all()   # slot 0 written, slot 1 not


def test_backend_choice_and_refusals(monkeypatch):
    cpu = torch.device("cpu")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert resolve_kernel_backend("auto", cpu) == "compiled"
    assert resolve_kernel_backend("auto", torch.device("cuda")) == "triton"
    assert resolve_kernel_backend("compiled", cpu) == "compiled"
    with pytest.raises(ValueError, match="runs on CUDA, or on the CPU only under TRITON_INTERPRET=1"):
        resolve_kernel_backend("triton", cpu)
    with pytest.raises(ValueError, match="policy_backend must be one of"):
        resolve_kernel_backend("fused", cpu)
