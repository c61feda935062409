"""RolloutStorage (gpurl/storage/rollout.py): frame-stacked policy inputs against a per-(t, e) Python
reference of the documented rule, roll-over across iterations, and the env's write slots."""
from __future__ import annotations

import pytest
import torch

from gpurl.storage import Field, RolloutStorage

pytestmark = pytest.mark.cpu

E, N, D = 3, 4, 3
AGENTS, OBS_DIM = slice(1, 3), 2     # a group of agents 1..2 that reads the first 2 of 3 obs columns


def make_storage(T: int, H: int) -> RolloutStorage:
    return RolloutStorage(T, E, N, D, action_dims=2, action_dtype=torch.int64, history=H,
                          device=torch.device("cpu"))


def fill(s: RolloutStorage, seed: int) -> None:
    """Every obs value names its (slot, env, agent, column), and never 0 (0 means 'zeroed frame').
    Starts: a random pattern (seeded) with an extra start at slot H + 1 of env 0."""
    S = s.obs.shape[0]
    slot = torch.arange(S).view(S, 1, 1, 1)
    env = torch.arange(E).view(1, E, 1, 1)
    agent = torch.arange(N).view(1, 1, N, 1)
    col = torch.arange(D).view(1, 1, 1, D)
    s.obs.copy_(1 + slot + 100 * env + 1000 * agent + 0.25 * col)
    s.final_obs.copy_(-(1 + 100 * torch.arange(s.steps).view(-1, 1, 1, 1) + 10 * env + agent + 0.25 * col))
    s.starts.copy_(torch.rand(S, E, generator=torch.Generator().manual_seed(seed)) < 0.3)
    s.starts[s.history + 1, 0] = True


def started_in(s: RolloutStorage, e: int, lo: int, hi: int) -> bool:
    """An episode start at a slot in [lo, hi] of env e."""
    return any(bool(s.starts[k, e]) for k in range(lo, hi + 1))


def reference_input(s: RolloutStorage, t: int, e: int) -> torch.Tensor:
    """[n, obs_dim * (H + 1)] at step t: frame h is slot c - h (c = H + t), zeroed if a start lies in
    (c - h, c]."""
    H, c = s.history, s.history + t
    frames = []
    for h in range(H + 1):
        frame = s.obs[c - h, e, AGENTS, :OBS_DIM].clone()
        if started_in(s, e, c - h + 1, c):
            frame.zero_()
        frames.append(frame)
    return torch.cat(frames, -1)


def reference_final_input(s: RolloutStorage, t: int, e: int) -> torch.Tensor:
    """The final observation stands at slot c + 1 (c = H + t) of its own episode, so the start marked at
    c + 1 (the next episode's) does not count: frame h >= 1 is slot c + 1 - h, zeroed if a start lies in
    (c + 1 - h, c]."""
    H, c = s.history, s.history + t
    frames = [s.final_obs[t, e, AGENTS, :OBS_DIM]]
    for h in range(1, H + 1):
        frame = s.obs[c + 1 - h, e, AGENTS, :OBS_DIM].clone()
        if started_in(s, e, c + 2 - h, c):
            frame.zero_()
        frames.append(frame)
    return torch.cat(frames, -1)


@pytest.mark.parametrize("H", [0, 2])
@pytest.mark.parametrize("t0, t1", [(0, 6), (2, 5), (6, 7)], ids=["all", "middle", "bootstrap_slot"])
def test_policy_input_matches_reference(H, t0, t1):
    s = make_storage(6, H)
    fill(s, seed=10 + H)
    got = s.policy_input(t0, t1, AGENTS, OBS_DIM)
    assert got.shape == (t1 - t0, E, 2, OBS_DIM * (H + 1))
    zeroed = 0
    for t in range(t0, t1):
        for e in range(E):
            want = reference_input(s, t, e)
            assert torch.equal(got[t - t0, e], want), f"H={H} t={t} e={e}"
            zeroed += int((want == 0).all(0).sum())
    if H and (t0, t1) == (0, 6):
        assert zeroed > 0  # the pattern does cut histories: the zeroing rule is exercised


@pytest.mark.parametrize("H", [0, 2])
def test_final_input_matches_reference(H):
    T = 6
    s = make_storage(T, H)
    fill(s, seed=20 + H)
    t, e = torch.meshgrid(torch.arange(T), torch.arange(E), indexing="ij")
    t, e = t.flatten(), e.flatten()
    got = s.final_input(t, e, AGENTS, OBS_DIM)
    assert got.shape == (T * E, 2, OBS_DIM * (H + 1))
    for i in range(len(t)):
        want = reference_final_input(s, int(t[i]), int(e[i]))
        assert torch.equal(got[i], want), f"H={H} t={int(t[i])} e={int(e[i])}"


@pytest.mark.parametrize("T, H", [(1, 2), (2, 2), (5, 2), (3, 0)], ids=["T1H2", "T2H2", "T5H2", "T3H0"])
def test_roll_over_moves_last_slots_to_front(T, H):
    s = make_storage(T, H)
    fill(s, seed=30)
    obs, starts = s.obs.clone(), s.starts.clone()
    s.roll_over()
    assert torch.equal(s.obs[:H + 1], obs[T:T + H + 1])
    assert torch.equal(s.starts[:H + 1], starts[T:T + H + 1])
    # With T < H + 1 the moved slots overlap the ones they come from; a plain in-place copy would smear.
    assert torch.equal(s.obs[H + 1:], obs[H + 1:])


@pytest.mark.parametrize("H", [0, 2])
def test_start_writes_first_obs_and_marks_history_as_starts(H):
    s = make_storage(4, H)
    fill(s, seed=40)
    first = torch.full((E, N, D), 7.0)
    s.start(first)
    assert torch.equal(s.obs[H], first)
    assert not s.obs[:H].any()
    assert s.starts[:H + 1].all()
    # So step 0's input is the first obs with every history frame zeroed.
    assert torch.equal(s.policy_input(0, 1, AGENTS, OBS_DIM)[0, :, :, :OBS_DIM], first[:, AGENTS, :OBS_DIM])
    assert not s.policy_input(0, 1, AGENTS, OBS_DIM)[0, :, :, OBS_DIM:].any()


@pytest.mark.parametrize("H", [0, 2])
def test_step_outputs_are_views_of_the_right_slots(H):
    T, t = 4, 2
    s = make_storage(T, H)
    out = s.step_outputs(t)
    assert out.global_state is None and out.final_global_state is None  # no state_dim: the env's own
    assert all(x.is_contiguous() for x in out[:5])  # the env's validate=True demands it
    out.obs.fill_(1.0)
    out.reward.fill_(2.0)
    out.terminated.fill_(True)
    out.truncated[1] = True
    out.final_obs.fill_(3.0)
    only = lambda buf, k: [i for i in range(buf.shape[0]) if buf[i].any()] == [k]  # noqa: E731
    assert only(s.obs, H + t + 1) and (s.obs[H + t + 1] == 1.0).all()
    assert only(s.reward, t) and (s.reward[t] == 2.0).all()
    assert only(s.terminated, t) and s.terminated[t].all()
    assert only(s.truncated, t) and s.truncated[t].tolist() == [False, True, False]
    assert only(s.final_obs, t) and (s.final_obs[t] == 3.0).all()

    s.mark_starts(t)  # the next observation starts an episode where step t ended one
    assert only(s.starts, H + t + 1) and s.starts[H + t + 1].all()


def test_global_state_and_carried_fields_take_their_slots_and_roll_over():
    """With state_dim S: step t writes the state into slot t + 1 and the final state into slot t; the
    state after the last step, and a carried field's slot T, start the next rollout (slot 0)."""
    T, S = 3, 5
    s = RolloutStorage(T, E, N, D, 1, torch.int64, 0, torch.device("cpu"),
                       {"hidden": Field(shape=(4,), extra_steps=1, carried=True)}, state_dim=S)
    s.start(torch.zeros(E, N, D), torch.full((E, S), 9.0))
    assert (s.global_state[0] == 9.0).all() and not s.global_state[1:].any()
    for t in range(T):
        out = s.step_outputs(t)
        assert out.global_state.data_ptr() == s.global_state[t + 1].data_ptr() and out.global_state.is_contiguous()
        assert out.final_global_state.data_ptr() == s.final_global_state[t].data_ptr()
        out.global_state.fill_(t + 1.0)
        s.hidden[t + 1].fill_(10.0 + t)
    assert set(s.buffers()) >= {"global_state", "final_global_state", "hidden"}
    s.roll_over()
    assert (s.global_state[0] == T).all() and (s.hidden[0] == 10.0 + T - 1).all()
    with pytest.raises(ValueError, match="carried: it needs extra_steps >= 1"):
        RolloutStorage(T, E, N, D, 1, torch.int64, 0, torch.device("cpu"), {"h": Field(carried=True)})
