"""Recurrent (GRU) policies: the cell against PyTorch's, BPTT against a step-by-step unrolled reference,
the carried state zeroed exactly at episode starts (autoresets inside a rollout included), and resume."""
from __future__ import annotations

import gymnasium
import pytest
import torch
from torch import nn

from gpurl.algos.gru import gru_cell
from gpurl.algos.nets import ActorCritic
from gpurl.train import Trainer
from gpurl.train.checkpoint import load_checkpoint, save_checkpoint

from test_train_ppo import parameters, run_iterations, tiny_config

pytestmark = pytest.mark.cpu


def torch_gru_like(actor) -> nn.GRUCell:
    """PyTorch's GRUCell holding ``actor``'s GRU weights (same gate order r, z, n)."""
    H = actor.hidden_size
    cell = nn.GRUCell(H, H)
    with torch.no_grad():
        cell.weight_ih.copy_(actor.input_gates.weight)
        cell.bias_ih.copy_(actor.input_gates.bias)
        cell.weight_hh.copy_(actor.hidden_gates.weight)
        cell.bias_hh.copy_(actor.hidden_gates.bias)
    return cell


def recurrent_policy(seed=0, in_dim=9, nvec=(5, 3)):
    policy = ActorCritic(in_dim, gymnasium.spaces.MultiDiscrete(list(nvec)), (16, 12), "tanh", norm_obs=False,
                         generator=torch.Generator().manual_seed(seed), recurrent=True)
    with torch.no_grad():  # biases away from zero, so every term of the cell matters
        g = torch.Generator().manual_seed(seed + 1)
        for p in policy.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=g))
    return policy


def test_gru_cell_is_pytorchs_gru_cell():
    actor = recurrent_policy().actor
    g = torch.Generator().manual_seed(3)
    x, h = torch.randn(40, 16, generator=g) * 2, torch.randn(40, 16, generator=g)
    want = torch_gru_like(actor)(x, h)
    got = gru_cell(x, h, actor.input_gates, actor.hidden_gates)
    # The candidate's tanh is the policies' rational tanh, within 4e-7 of tanh.
    torch.testing.assert_close(got, want, rtol=0, atol=2e-6)


def test_bptt_gradients_equal_a_step_by_step_unrolled_reference():
    """evaluate_sequence (one GEMM for every step's input side, the cell in a loop) against PyTorch's
    GRUCell unrolled step by step with the episode starts applied by hand: the same log-probs, and the
    same gradients of a loss over the whole sequence for every parameter."""
    T, B = 7, 5
    policy = recurrent_policy()
    g = torch.Generator().manual_seed(4)
    obs = torch.randn(T, B, 9, generator=g)
    actions = torch.stack([torch.randint(0, n, (T, B), generator=g) for n in (5, 3)], -1)
    starts = torch.rand(T, B, generator=g) < 0.25
    h0 = torch.randn(B, 16, generator=g)
    weights = torch.randn(T, B, generator=g)

    log_prob, entropy, _ = policy.evaluate_sequence(obs, actions, h0, starts)
    (weights * log_prob + 0.1 * entropy).sum().backward()
    got = {k: p.grad.clone() for k, p in policy.named_parameters() if p.grad is not None}

    reference = recurrent_policy()
    cell = torch_gru_like(reference.actor)
    h, logps, ents = h0, [], []
    for t in range(T):
        h = torch.where(starts[t, :, None], torch.zeros_like(h), h)
        h = cell(reference.actor.embed(obs[t]), h)
        logits = reference.actor.head(h)
        dists = [torch.distributions.Categorical(logits=part) for part in logits.split([5, 3], -1)]
        logps.append(sum(d.log_prob(actions[t, :, k]) for k, d in enumerate(dists)))
        ents.append(sum(d.entropy() for d in dists))
    want_log_prob = torch.stack(logps)
    (weights * want_log_prob + 0.1 * torch.stack(ents)).sum().backward()
    torch.testing.assert_close(log_prob.detach(), want_log_prob.detach(), rtol=0, atol=2e-5)
    want = {k: p.grad for k, p in reference.named_parameters() if p.grad is not None}
    want["actor.input_gates.weight"], want["actor.input_gates.bias"] = cell.weight_ih.grad, cell.bias_ih.grad
    want["actor.hidden_gates.weight"], want["actor.hidden_gates.bias"] = cell.weight_hh.grad, cell.bias_hh.grad
    assert got.keys() == {k for k in want if not k.startswith("critic")} | {k for k in got if k.startswith("critic")}
    for key, grad in got.items():
        if key.startswith("critic"):
            continue
        torch.testing.assert_close(grad, want[key], rtol=1e-4, atol=1e-5, msg=key)


def test_state_is_zeroed_exactly_at_episode_starts_across_autoresets():
    """Two rollouts of 8 steps over 12-step episodes (autoresets inside the rollouts): at every step the
    state the actor carried out equals the cell applied to the state carried in, zeroed exactly where
    the env's own done flags of the previous step (or the first reset) say an episode starts."""
    trainer = Trainer(tiny_config(recurrent="gru", iters=2))
    s, H = trainer.storage, trainer.storage.history
    inner_starts = 0
    previous_done = torch.ones(s.starts.shape[1], dtype=torch.bool)  # the first reset starts every env
    for _ in range(2):
        trainer.rollout()
        for t in range(s.steps):
            start = previous_done if t == 0 else s.terminated[t - 1] | s.truncated[t - 1]
            assert torch.equal(s.starts[H + t], start)
            inner_starts += int(start.sum()) if t > 0 else 0
            for name, net in trainer.algo.nets.items():
                a = trainer.env.groups[name].agents
                x = net.normalize(s.policy_input(t, t + 1, a, trainer.env.groups[name].obs_dim)[0])
                carried_in = s.hidden[t, :, a] * (~start)[:, None, None]
                E, n, _ = x.shape
                want = gru_cell(net.actor.embed(x.reshape(E * n, -1)), carried_in.reshape(E * n, -1),
                                net.actor.input_gates, net.actor.hidden_gates)
                torch.testing.assert_close(s.hidden[t + 1, :, a].reshape(E * n, -1), want, rtol=0, atol=1e-6)
        previous_done = s.terminated[-1] | s.truncated[-1]
        s.roll_over()
        assert torch.equal(s.hidden[0], s.hidden[s.steps])
    assert inner_starts > 0, "no episode started inside a rollout: the test would not see a reset"


def test_recurrent_resume_is_bit_identical(tmp_path):
    """MAPPO with a GRU actor: the checkpoint carries both the recurrent state and the global state the
    next rollout starts from (PPO's recurrent path is the same code, without the global state)."""
    algo = "mappo"
    straight = Trainer(tiny_config(iters=4, recurrent="gru", algo=algo))
    run_iterations(straight, 4)
    first = Trainer(tiny_config(iters=4, recurrent="gru", algo=algo))
    run_iterations(first, 2)
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, {**first.state_dict(), "extras": {}, "run_id": "r1"})
    saved = load_checkpoint(path)
    assert saved["carried"]["hidden"].abs().sum() > 0  # the state went into the checkpoint
    second = Trainer(tiny_config(iters=4, recurrent="gru", algo=algo))
    second.load_state_dict(saved)
    run_iterations(second, 2)
    pa, pb = parameters(straight), parameters(second)
    assert all(torch.equal(pa[k], pb[k]) for k in pa), "resumed parameters differ"
    assert torch.equal(straight.storage.hidden, second.storage.hidden)
    assert torch.equal(straight.algo.optimizer.state_dict()["state"][0]["exp_avg"],
                       second.algo.optimizer.state_dict()["state"][0]["exp_avg"])


def test_recurrent_minibatches_need_enough_envs():
    with pytest.raises(ValueError, match=r"num_envs \(2\) must be >= minibatches \(4\)"):
        tiny_config(recurrent="gru", num_envs=2, minibatches=4)
    with pytest.raises(ValueError, match="recurrent must be one of"):
        tiny_config(recurrent="lstm")
