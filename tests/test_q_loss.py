"""CPU tier: the value-based losses (gpurl/algos/q_loss.py) on hand-computed cases.

- double-Q next values: the target network's Q at the online argmax;
- IQL: per-agent TD error; VDN: the summed Qs against the team reward; a termination stops the bootstrap,
  a truncation does not;
- QMIX: with a mixer whose hypernetworks are set by hand (constant weights), the loss equals the one
  computed on paper; the mixer is monotonic (dQ_tot / dq_i >= 0) for random states and weights, also
  where the raw hypernetwork outputs are negative;
- no gradient reaches the targets.
"""
from __future__ import annotations

import pytest
import torch

from gpurl.algos.q_loss import QMixer, chosen, double_q_next, q_loss, td_target

pytestmark = pytest.mark.cpu


def test_double_q_takes_the_target_value_at_the_online_argmax():
    online = torch.tensor([[[1.0, 5.0, 2.0], [0.0, -1.0, 3.0]]])  # argmax 1, 2
    target = torch.tensor([[[10.0, 20.0, 30.0], [40.0, 50.0, 60.0]]])
    assert double_q_next(online, target).tolist() == [[20.0, 60.0]]
    assert chosen(target, torch.tensor([[[0], [1]]])).tolist() == [[10.0, 50.0]]


def test_td_target_bootstraps_unless_terminated():
    reward = torch.tensor([1.0, 1.0])
    terminated = torch.tensor([False, True])
    assert td_target(reward, terminated, torch.tensor([10.0, 10.0]), 0.9).tolist() == [10.0, 1.0]


def test_iql_and_vdn_losses_on_paper():
    q = torch.tensor([[1.0, 2.0], [0.5, -0.5]], requires_grad=True)  # B=2, n=2
    nxt = torch.tensor([[3.0, 4.0], [1.0, 1.0]])
    reward = torch.tensor([[1.0, 0.0], [2.0, 2.0]])
    terminated = torch.tensor([False, True])
    gamma = 0.5
    # IQL targets: [1 + 1.5, 0 + 2], [2, 2] (terminated) -> errors [1.5, 0], [1.5, 2.5]
    iql = q_loss("iql", q, nxt, reward, terminated, gamma)
    assert iql.item() == pytest.approx((1.5**2 + 0 + 1.5**2 + 2.5**2) / 4)
    # VDN: team reward = sum (JaxMARL's): 1, 4; Q_tot = 3, 0; targets 1 + 0.5 * 7 = 4.5, 4 -> errors 1.5, 4
    vdn = q_loss("vdn", q, nxt, reward, terminated, gamma)
    assert vdn.item() == pytest.approx((1.5**2 + 4**2) / 2)
    vdn.backward()
    # d/dq_i of mean((Q_tot - y)^2) = 2 (Q_tot - y) / B for every agent of the transition
    assert q.grad.tolist() == [[-1.5, -1.5], [-4.0, -4.0]]


def hand_set_mixer(w1: float, b1: float, w2: float, v: float, n: int = 2, embed: int = 1) -> QMixer:
    """A mixer whose hypernetworks output constants: W1 = w1, b1, w2, V = v whatever the state."""
    mixer = QMixer(n, state_dim=3, embed=embed, hyper_hidden=4)
    with torch.no_grad():
        for net, value in ((mixer.hyper_w1[-1], w1), (mixer.hyper_w2[-1], w2), (mixer.value[-1], v)):
            net.weight.zero_()
            net.bias.fill_(value)
        mixer.hyper_b1.weight.zero_()
        mixer.hyper_b1.bias.fill_(b1)
    return mixer


def test_qmix_loss_on_paper():
    # W1 = |-2| = 2 (abs), b1 = 0.5, w2 = 3, V = 1: Q_tot = 3 * elu(2 (q1 + q2) + 0.5) + 1
    mixer, target = hand_set_mixer(-2.0, 0.5, 3.0, 1.0), hand_set_mixer(1.0, 0.0, 1.0, 0.0)
    q = torch.tensor([[0.25, 0.5], [-1.0, -0.5]])
    nxt = torch.tensor([[1.0, 1.0], [2.0, 0.0]])
    reward = torch.tensor([[1.0, 1.0], [0.0, 0.0]])
    terminated = torch.tensor([False, False])
    state = torch.randn(2, 3)
    loss = q_loss("qmix", q, nxt, reward, terminated, 0.9, mixer, target, state, torch.randn(2, 3))
    elu = lambda x: x if x > 0 else torch.expm1(torch.tensor(x)).item()  # noqa: E731
    q_tot = [3 * elu(2 * 0.75 + 0.5) + 1, 3 * elu(2 * -1.5 + 0.5) + 1]
    next_tot = [elu(2.0), elu(2.0)]  # target mixer: W1 = 1, w2 = 1: elu(q1 + q2)
    y = [2 + 0.9 * next_tot[0], 0 + 0.9 * next_tot[1]]  # team reward: the agents' sum
    expected = ((q_tot[0] - y[0]) ** 2 + (q_tot[1] - y[1]) ** 2) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_qmix_mixer_is_monotonic_in_every_agent_q():
    torch.manual_seed(0)
    for _ in range(5):
        mixer = QMixer(4, state_dim=6, embed=8, hyper_hidden=16)
        with torch.no_grad():  # negative raw hypernetwork outputs too
            for p in mixer.parameters():
                p.normal_(0.0, 1.0)
        q = torch.randn(64, 4, requires_grad=True)
        total = mixer(q, torch.randn(64, 6))
        (grad,) = torch.autograd.grad(total.sum(), q)
        assert bool((grad >= 0).all())
        assert bool((grad > 0).any())


def test_targets_get_no_gradient_and_unknown_kind_is_refused():
    q = torch.zeros(2, 2, requires_grad=True)
    nxt = torch.ones(2, 2, requires_grad=True)
    loss = q_loss("iql", q, nxt, torch.zeros(2, 2), torch.tensor([False, False]), 0.9)
    loss.backward()
    assert nxt.grad is None and q.grad is not None
    mixer, target = hand_set_mixer(1.0, 0.0, 1.0, 0.0), hand_set_mixer(1.0, 0.0, 1.0, 0.0)
    loss = q_loss("qmix", q, nxt, torch.zeros(2, 2), torch.tensor([False, False]), 0.9, mixer, target,
                  torch.zeros(2, 3), torch.zeros(2, 3))
    loss.backward()
    assert all(p.grad is None for p in target.parameters())
    with pytest.raises(ValueError, match="unknown value-based algorithm 'dqn'"):
        q_loss("dqn", q, nxt, torch.zeros(2, 2), torch.tensor([False, False]), 0.9)
