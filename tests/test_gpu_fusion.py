"""GPU tier (skips without CUDA): the fused actors (PPO's, and the value-based algorithms' epsilon-greedy
one) and GAE on a device against their torch definitions, the compiled acting and learning on CUDA,
graph-captured iterations (PPO's whole iteration, QMIX's rollout) against eager ones, no host sync in a
steady-state iteration of any algorithm, a captured rollout step of at most four kernels, and PPO and QMIX
iterations end to end on the device."""
from __future__ import annotations

import re

import gymnasium
import pytest
import torch

from gpurl.algos.acting import Acting
from gpurl.algos.nets import ActorCritic
from gpurl.algos.q_acting import QActor
from gpurl.algos.q_nets import QNetwork
from gpurl.fusion import gae_ref, gae_triton
from gpurl.fusion.counter_rng import seed_tensor
from gpurl.train import Trainer, build_config

pytestmark = pytest.mark.gpu

TINY = dict(num_taggers=2, num_runners=6, grid_length=5.0, episode_length=20, use_full_observation=False,
            num_other_agents_observed=3, tagging_distance=0.05)


@pytest.mark.parametrize("backend", ["triton", "compiled"])
def test_acting_backends_match_the_definition_on_device(requires_cuda, backend):
    device = requires_cuda
    policy = ActorCritic(142, gymnasium.spaces.MultiDiscrete([21, 21]), (64, 64), "tanh",
                         generator=torch.Generator().manual_seed(0)).to(device)
    policy.obs_norm.update(torch.randn(999, 142, device=device) * 3 + 1)
    x = torch.randn(1000, 110, 142, device=device)
    step = torch.tensor([77], device=device)
    outs = []
    for name in (backend, "eager"):
        actor = Acting({"g": policy}, {"g": 0}, name, seed_tensor(5, device), env_offset=0, num_agents=110)
        a = torch.zeros(1000, 110, 2, dtype=torch.int64, device=device)
        lp, v = torch.zeros(1000, 110, device=device), torch.zeros(1000, 110, device=device)
        actor({"g": x}, step, {"g": (a, lp, v)})
        outs.append((a, lp, v))
    (a1, l1, v1), (a2, l2, v2) = outs
    # FMA contraction on the GPU moves logits by ulps: a draw sitting on a CDF boundary may flip.
    assert (a1 != a2).any(-1).float().mean().item() < 1e-4
    same = (a1 == a2).all(-1)
    torch.testing.assert_close(l1[same], l2[same], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(v1, v2, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("backend", ["triton", "compiled"])
def test_q_acting_backends_match_the_definition_on_device(requires_cuda, backend):
    from types import SimpleNamespace

    device = requires_cuda
    E, N, obs_dim = 1000, 110, 142
    nets = torch.nn.ModuleDict({"g": QNetwork(obs_dim, gymnasium.spaces.Discrete(5), (64, 64), "tanh",
                                              torch.Generator().manual_seed(0))}).to(device)
    x = torch.randn(E, N, obs_dim, device=device)
    # One frame, no history: frame_views gives ((frames [1, E, n, obs_dim],), ()) as RolloutStorage does.
    storage = SimpleNamespace(frame_views=lambda t0, t1, agents, dim: ((x[None, :, agents, :dim],), ()))
    groups = {"g": SimpleNamespace(agents=slice(0, N), obs_dim=obs_dim)}
    spec = SimpleNamespace(device=device, env_offset=0, num_agents=N)
    step = torch.tensor([400], device=device)   # epsilon 0.6 of a 1.0 -> 0.0 decay over 1000 steps
    actions = []
    for name in (backend, "eager"):
        storage.actions = torch.full((1, E, N, 1), -7, dtype=torch.int64, device=device)
        QActor(groups, nets, spec, seed_tensor(5, device), 1.0, 0.0, 1000, name, "tanh").run(storage, 0, step)
        actions.append(storage.actions)
    # 3xTF32 dots against cuBLAS's fp32 move Qs by ulps: an argmax between two Qs that close may flip.
    assert (actions[0] != actions[1]).float().mean().item() < 1e-4
    assert (actions[0] >= 0).all() and (actions[0] < 5).all()


def test_fused_gae_matches_reference_on_device(requires_cuda):
    device = requires_cuda
    g = torch.Generator(device=device).manual_seed(1)
    T, E, N = 64, 300, 11
    reward = torch.randn(T, E, N, device=device, generator=g)
    value = torch.randn(T + 1, E, N, device=device, generator=g)
    final_value = torch.randn(T, E, N, device=device, generator=g)
    ends = torch.rand(T, E, device=device, generator=g)
    terminated, truncated = ends < 0.05, (ends >= 0.05) & (ends < 0.1)
    adv, ret = gae_triton(reward, value, final_value, terminated, truncated, 0.99, 0.95)
    adv_ref, ret_ref = gae_ref(reward, value, final_value, terminated, truncated, 0.99, 0.95)
    torch.testing.assert_close(adv, adv_ref, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(ret, ret_ref, atol=1e-4, rtol=1e-4)


def _trainer(device, graph: bool, learner: str = "auto", **extra) -> Trainer:
    values = dict(env="tag_continuous", env_params=TINY, num_envs=64, rollout_len=16, iters=8, frame_stack=2, seed=3,
                  device=str(device), cuda_graph=graph, eval_episodes=0, learner_backend=learner)
    cfg = build_config(**{**values, **extra})
    return Trainer(cfg)


@pytest.mark.parametrize("variant", ["ppo", "mappo", "ppo-gru"])
def test_a_graph_captured_iteration_gives_the_eager_iterations(requires_cuda, variant):
    """The whole iteration (rollout, advantages, every minibatch, Adam) captured once and replayed lands where
    the eager iterations land."""
    algo, _, recurrent = variant.partition("-")
    extra = dict(algo=algo, recurrent=recurrent or "none")
    eager, graphed = _trainer(requires_cuda, False, **extra), _trainer(requires_cuda, True, **extra)
    assert eager.graphed_iteration is None and graphed.graphed_iteration is not None
    for _ in range(4):  # iteration 1 warms up, 2 captures and replays, 3 and 4 replay
        torch.testing.assert_close(graphed.iterate(), eager.iterate(), rtol=1e-5, atol=1e-6)
    assert graphed.graphed_iteration.graph is not None
    torch.testing.assert_close(graphed.algo.flat.param, eager.algo.flat.param, rtol=1e-5, atol=1e-6)
    for name in ("obs", "actions", "reward", "terminated", "truncated", "log_prob", "value"):
        torch.testing.assert_close(getattr(graphed.storage, name), getattr(eager.storage, name), msg=name)


@pytest.mark.parametrize("algo", ["ppo", "a2c", "mappo", "ppo-gru", "iql", "vdn", "qmix"])
def test_a_steady_state_iteration_never_syncs_with_the_host(requires_cuda, algo):
    """torch.cuda.set_sync_debug_mode("error") around steady-state iterations of every algorithm."""
    name, _, recurrent = algo.partition("-")
    trainer = _q_trainer(requires_cuda, True, algo=name) if name in ("iql", "vdn", "qmix") else \
        _trainer(requires_cuda, True, algo=name, recurrent=recurrent or "none")
    for _ in range(3):
        trainer.iterate()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(2):
            stats = trainer.iterate()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.isfinite(stats).all()


def test_a_rollout_step_is_at_most_four_kernels_of_the_captured_graph(requires_cuda, tmp_path):
    """The rollout of PPO on Tag (two trained groups, one frame) captured on its own: its graph's kernel and
    memory nodes, per step, are the two groups' fused actors, the env kernel and the bookkeeping kernel. (With
    stacked frames each group's input is stacked by three more kernels a step: the fused actors do not read
    frames themselves yet.)"""
    trainer = _trainer(requires_cuda, False, frame_stack=1)
    trainer.rollout()  # warm-up: compiles
    torch.cuda.synchronize()
    try:  # torch 2.11 frees the captured graph once instantiated, unless told to keep it (debug_dump reads it)
        graph = torch.cuda.CUDAGraph(keep_graph=True)
    except TypeError:  # an older torch keeps it in debug mode
        graph = torch.cuda.CUDAGraph()
    graph.enable_debug_mode()
    with torch.cuda.graph(graph):
        trainer._rollout_steps(timed=False)
    dump = tmp_path / "rollout.dot"
    graph.debug_dump(str(dump))
    text = dump.read_text()
    nodes = len(re.findall(r"(KERNEL|MEMSET|MEMCPY)", text))
    assert nodes, text[:2000]
    assert nodes / trainer.config.rollout_len <= 4, f"{nodes} nodes over {trainer.config.rollout_len} steps"


@pytest.mark.parametrize("learner", ["compiled", "eager"])
def test_ppo_iterations_on_device_are_finite(requires_cuda, learner):
    trainer = _trainer(requires_cuda, True, learner)
    assert trainer.algo.backends() == {"acting": "triton", "learning": learner}
    for _ in range(3):
        losses = trainer.read_losses(trainer.iterate())
    assert losses["approx_kl/tagger"] > 0


Q_GRID = dict(num_taggers=2, grid_length=6, episode_length=12)


def _q_trainer(device, graph: bool, algo: str = "qmix") -> Trainer:
    cfg = build_config(algo=algo, env="tag_gridworld", env_params=Q_GRID, num_envs=64, rollout_len=16, iters=8,
                       frame_stack=2, seed=3, device=str(device), cuda_graph=graph, eval_episodes=0,
                       replay_capacity=64, q_batch=256, q_updates=2)
    return Trainer(cfg)


def test_graph_captured_q_rollout_gives_the_eager_trajectories(requires_cuda):
    eager, graphed = _q_trainer(requires_cuda, False), _q_trainer(requires_cuda, True)
    assert graphed.graphed is not None and graphed.algo.backends()["acting"] == "triton"
    for _ in range(3):
        eager.rollout()
        graphed.rollout()
        for name in ("obs", "actions", "reward", "terminated", "truncated"):
            assert torch.equal(getattr(eager.storage, name), getattr(graphed.storage, name)), name
        eager.storage.roll_over()
        graphed.storage.roll_over()


def test_qmix_iterations_on_device_are_finite_and_update(requires_cuda):
    trainer = _q_trainer(requires_cuda, True)
    updates = trainer.algo.stat_names.index("updates")
    stats = [trainer.iterate() for _ in range(3)]
    assert all(torch.isfinite(s).all() for s in stats)
    assert [s[0, updates].item() for s in stats] == [2.0, 4.0, 6.0]
