"""CPU tier: epsilon-greedy acting of gpurl/algos/q_nets.py against independent computations.

- epsilon 0: the argmax of the network's Qs (computed here by a plain loop over rows);
- epsilon 1: actions uniform over the space whatever the Qs (chi-square test, false-failure rate 1e-6 per
  run), and the explore draw itself uniform (its mean);
- a row's action depends on (seed, global agent id, step) only: the same agent in another batch layout
  acts the same, another step or seed draws anew;
- the linear epsilon schedule by hand; non-Discrete spaces refused.
"""
from __future__ import annotations

import gymnasium
import pytest
import torch

from gpurl.algos.q_nets import QNetwork, linear_epsilon
from gpurl.fusion.counter_rng import seed_tensor

from stats_helpers import chi2_critical, chi_square

pytestmark = pytest.mark.cpu

A = 5  # Discrete(5): a chi-square over its actions has df 4 (even, see chi2_critical)


def network() -> QNetwork:
    return QNetwork(6, gymnasium.spaces.Discrete(A), (16,), "tanh", torch.Generator().manual_seed(0))


def test_epsilon_zero_is_the_argmax():
    net = network()
    x = torch.randn(300, 6, generator=torch.Generator().manual_seed(1))
    action, q = net.act(x, torch.arange(300), torch.tensor([3]), seed_tensor(9, "cpu"), torch.tensor([0.0]))
    expected = [max(range(A), key=lambda a, row=row: (row[a].item(), -a)) for row in net(x)]
    assert action.squeeze(-1).tolist() == expected
    assert torch.equal(q, net(x))


def test_epsilon_one_draws_uniform_actions_whatever_the_qs():
    net = network()
    with torch.no_grad():
        net.net[-1].bias[2] = 1e6  # greedy would always pick action 2
    n = 50_000
    action, _ = net.act(torch.zeros(n, 6), torch.arange(n), torch.tensor([11]), seed_tensor(5, "cpu"),
                        torch.tensor([1.0]))
    counts = torch.bincount(action.squeeze(-1), minlength=A).float()
    assert chi_square(counts) < chi2_critical(A - 1)
    half, _ = net.act(torch.zeros(n, 6), torch.arange(n), torch.tensor([11]), seed_tensor(5, "cpu"),
                      torch.tensor([0.5]))
    greedy_share = (half == 2).float().mean().item()  # 0.5 greedy + 0.5 * 1/5 random picks of action 2
    assert abs(greedy_share - 0.6) < 0.01  # 5 sigma at n = 50000


def test_actions_depend_on_agent_step_and_seed_only():
    net = network()
    x = torch.randn(8, 6, generator=torch.Generator().manual_seed(2))
    ids = torch.arange(100, 108)
    eps = torch.tensor([0.7])
    a, _ = net.act(x, ids, torch.tensor([4]), seed_tensor(1, "cpu"), eps)
    perm = torch.randperm(8, generator=torch.Generator().manual_seed(3))
    b, _ = net.act(x[perm], ids[perm], torch.tensor([4]), seed_tensor(1, "cpu"), eps)
    assert torch.equal(a[perm], b)  # another layout, the same actions
    draws = [net.act(x, ids, torch.tensor([s]), seed_tensor(k, "cpu"), eps)[0] for s, k in ((5, 1), (4, 2))]
    assert all(not torch.equal(a, d) for d in draws)


def test_linear_epsilon_schedule():
    values = [linear_epsilon(torch.tensor([s]), 1.0, 0.05, 100).item() for s in (0, 50, 100, 1000)]
    assert values == pytest.approx([1.0, 0.525, 0.05, 0.05])
    assert linear_epsilon(torch.tensor([7]), 1.0, 0.1, 0).item() == pytest.approx(0.1)


def test_box_space_is_refused():
    with pytest.raises(ValueError, match="act in Discrete spaces"):
        QNetwork(4, gymnasium.spaces.Box(-1, 1, (2,)), (8,), "tanh")
