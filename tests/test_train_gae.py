"""gae_ref (gpurl/fusion/gae.py) against hand arithmetic, a scalar double loop and the lam = gamma = 1 identity."""
from __future__ import annotations

import pytest
import torch

from gpurl.fusion.gae import gae_ref

pytestmark = pytest.mark.cpu


def column(values, dtype=torch.float32) -> torch.Tensor:
    """A [T, 1, 1] tensor (one env, one agent) from a list."""
    return torch.tensor(values, dtype=dtype).view(-1, 1, 1)


def test_hand_computed_termination_truncation_and_normal_step():
    gamma, lam = 0.9, 0.8
    reward = column([1.0, 2.0, 3.0])
    value = column([0.5, 1.0, 1.5, 1000.0])        # value[3] is never read: step 2 terminates
    # final_value[0] and [2] are traps: only a truncated step may read its final value.
    final_value = column([555.0, 20.0, 777.0])
    terminated = torch.tensor([[False], [False], [True]])
    truncated = torch.tensor([[False], [True], [False]])

    adv, ret = gae_ref(reward, value, final_value, terminated, truncated, gamma, lam)

    a2 = 3.0 - 1.5                                  # terminated: no bootstrap at all
    a1 = 2.0 + 0.9 * 20.0 - 1.0                     # truncated: final_value[1], not value[2]; A2 not carried
    a0 = (1.0 + 0.9 * 1.0 - 0.5) + 0.9 * 0.8 * a1   # normal: value[1], then carries A1
    torch.testing.assert_close(adv.flatten(), torch.tensor([a0, a1, a2]), rtol=0, atol=1e-5)
    torch.testing.assert_close(ret.flatten(), torch.tensor([a0 + 0.5, a1 + 1.0, a2 + 1.5]), rtol=0, atol=1e-5)
    assert adv.dtype == ret.dtype == torch.float32 and adv.shape == (3, 1, 1)


def gae_loop(reward, value, final_value, terminated, truncated, gamma, lam):
    """One scalar recursion per (env, agent), straight from the GAE definition."""
    T, E, N = reward.shape
    r, v, fv = reward.tolist(), value.tolist(), final_value.tolist()
    term, trunc = terminated.tolist(), truncated.tolist()
    adv = [[[0.0] * N for _ in range(E)] for _ in range(T)]
    for e in range(E):
        for n in range(N):
            running = 0.0
            for t in reversed(range(T)):
                if term[t][e]:
                    delta, running = r[t][e][n] - v[t][e][n], 0.0
                elif trunc[t][e]:
                    delta, running = r[t][e][n] + gamma * fv[t][e][n] - v[t][e][n], 0.0
                else:
                    delta = r[t][e][n] + gamma * v[t + 1][e][n] - v[t][e][n]
                running = delta + gamma * lam * running
                adv[t][e][n] = running
    adv = torch.tensor(adv)
    return adv, adv + value[:T]


def test_matches_scalar_loop_on_irregular_shapes():
    T, E, N = 9, 7, 5
    g = torch.Generator().manual_seed(11)
    reward = torch.randn(T, E, N, generator=g) * 3
    value = torch.randn(T + 1, E, N, generator=g)
    final_value = torch.randn(T, E, N, generator=g)
    ended = torch.rand(T, E, generator=g) < 0.35
    truncated = ended & (torch.rand(T, E, generator=g) < 0.5)
    terminated = ended & ~truncated                 # never both true in one row
    assert terminated.any() and truncated.any() and (~ended).any()

    got = gae_ref(reward, value, final_value, terminated, truncated, 0.97, 0.9)
    want = gae_loop(reward, value, final_value, terminated, truncated, 0.97, 0.9)
    for g_, w in zip(got, want):
        torch.testing.assert_close(g_, w, rtol=0, atol=1e-5)


def test_lambda_one_gamma_one_without_ends_is_reward_to_go_plus_last_value():
    T, E, N = 6, 3, 2
    g = torch.Generator().manual_seed(2)
    reward = torch.randn(T, E, N, generator=g)
    value = torch.randn(T + 1, E, N, generator=g)
    no = torch.zeros(T, E, dtype=torch.bool)

    adv, ret = gae_ref(reward, value, torch.full((T, E, N), 99.0), no, no, 1.0, 1.0)

    reward_to_go = reward.flip(0).cumsum(0).flip(0)
    torch.testing.assert_close(ret, reward_to_go + value[T], rtol=0, atol=1e-5)
    torch.testing.assert_close(adv, ret - value[:T], rtol=0, atol=1e-5)
