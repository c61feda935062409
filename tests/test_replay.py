"""CPU tier: the device replay buffer (gpurl/storage/replay.py) and its draws (LearnerBatches.replay_rows,
gpurl/multigpu/minibatches.py) against hand-made rollouts.

- transitions at episode boundaries: the next input of a step that ended its episode is built from the
  final observation (and the final global state), never the next episode's first; a truncation keeps
  ``terminated`` False (the target bootstraps), a termination sets it; with a frame history the final
  input's older frames come from the same episode;
- the ring: wraparound keeps the newest ``capacity`` steps in write order, an insert longer than the ring
  keeps its tail; sampling never returns an unfilled slot;
- uniform sampling: a chi-square test over every stored transition, before and after the ring wraps, at a
  false-failure rate of 1e-6 per test (the critical values below);
- memory: bytes per transition as allocated; a bad or unaffordable capacity is refused before allocating;
- checkpoints: state_dict round trips with and without contents; a corrupt one is refused whole.
"""
from __future__ import annotations

import pytest
import torch

from gpurl.envs import memory
from gpurl.fusion.counter_rng import seed_tensor
from gpurl.multigpu import EnvShard, LearnerBatches
from gpurl.storage import ReplayBuffer, RolloutStorage, gather_rows, rollout_transitions, transition_bytes

from stats_helpers import chi2_critical, chi_square

pytestmark = pytest.mark.cpu

T, E, N, D, S = 4, 2, 2, 3, 5


def one_device(buf: ReplayBuffer) -> LearnerBatches:
    return LearnerBatches(EnvShard(0, buf.num_envs, buf.num_envs))


def draw_sample(buf: ReplayBuffer, batch: int, seed: torch.Tensor, draw: torch.Tensor) -> dict[str, torch.Tensor]:
    """One draw of ``batch`` transitions, as a learner's update gathers it."""
    return gather_rows(buf.buffers(), *(r[0] for r in one_device(buf).replay_rows(buf, seed, draw, 1, batch)))


def storage_with_episodes(history: int = 0) -> RolloutStorage:
    """T=4 steps of 2 envs: env 0 terminates at step 1, env 1 is truncated at step 2. Observation values
    encode (slot, env, agent, feature) so every copy can be traced; final ones are negative."""
    st = RolloutStorage(T, E, N, D, 1, torch.int64, history, torch.device("cpu"), state_dim=S)
    H = history
    for slot in range(H + T + 1):
        for e in range(E):
            st.obs[slot, e] = torch.arange(N * D, dtype=torch.float32).view(N, D) + 100 * slot + 1000 * e
    st.final_obs.copy_(-st.obs[H + 1:H + T + 1])  # "final observation of the episode that ended at t"
    st.terminated[1, 0] = True
    st.truncated[2, 1] = True
    for t in range(T):
        st.mark_starts(t)
    st.reward.copy_(torch.arange(T * E * N, dtype=torch.float32).view(T, E, N))
    st.actions.copy_(torch.arange(T * E * N).view(T, E, N, 1) % 5)
    st.global_state.copy_(torch.arange((T + 1) * E * S, dtype=torch.float32).view(T + 1, E, S))
    st.final_global_state.copy_(-st.global_state[1:])
    return st


def test_next_inputs_use_the_final_observation_where_an_episode_ended():
    st = storage_with_episodes()
    tr = rollout_transitions(st, D)
    for t in range(T):
        for e in range(E):
            ended = (t, e) in ((1, 0), (2, 1))
            expected = st.final_obs[t, e] if ended else st.obs[t + 1, e]
            assert torch.equal(tr["next_inputs"][t, e], expected), (t, e)
            assert torch.equal(tr["inputs"][t, e], st.obs[t, e]), (t, e)
            expected_state = st.final_global_state[t, e] if ended else st.global_state[t + 1, e]
            assert torch.equal(tr["next_state"][t, e], expected_state), (t, e)
    # a termination stops the bootstrap, a truncation does not
    assert tr["terminated"].tolist() == [[False, False], [True, False], [False, False], [False, False]]


def test_final_input_frames_stay_in_their_episode_with_a_frame_history():
    st = storage_with_episodes(history=1)
    tr = rollout_transitions(st, D)
    H = 1
    # env 0 terminated at step 1: its next input is (final obs, obs of step 1's input), both of that episode
    assert torch.equal(tr["next_inputs"][1, 0], torch.cat([st.final_obs[1, 0], st.obs[H + 1, 0]], -1))
    # step 2 of env 0 starts a new episode: the older frame of its input is zeroed
    assert torch.equal(tr["inputs"][2, 0], torch.cat([st.obs[H + 2, 0], torch.zeros(N, D)], -1))
    # env 1 runs on through step 1: ordinary next input with the frame before it
    assert torch.equal(tr["next_inputs"][1, 1], torch.cat([st.obs[H + 2, 1], st.obs[H + 1, 1]], -1))


def make_buffer(capacity: int, num_envs: int = E, state_dim: int = S) -> ReplayBuffer:
    return ReplayBuffer(capacity, num_envs, N, D, 1, torch.int64, torch.device("cpu"), state_dim=state_dim)


def steps_tagged(first: int, count: int, num_envs: int = E) -> dict[str, torch.Tensor]:
    """``count`` steps whose every value is the step's number (first, first + 1, ...)."""
    tag = torch.arange(first, first + count, dtype=torch.float32)
    return dict(inputs=tag.view(-1, 1, 1, 1).expand(count, num_envs, N, D).clone(),
                actions=tag.long().view(-1, 1, 1, 1).expand(count, num_envs, N, 1).clone(),
                reward=tag.view(-1, 1, 1).expand(count, num_envs, N).clone(),
                next_inputs=(tag + 0.5).view(-1, 1, 1, 1).expand(count, num_envs, N, D).clone(),
                terminated=torch.zeros(count, num_envs, dtype=torch.bool),
                state=tag.view(-1, 1, 1).expand(count, num_envs, S).clone(),
                next_state=(tag + 0.5).view(-1, 1, 1).expand(count, num_envs, S).clone())


def test_ring_wraps_in_write_order_and_keeps_the_tail_of_a_long_insert():
    buf = make_buffer(5)
    buf.insert(**steps_tagged(0, 3))
    assert (buf.position, buf.size) == (3, 3)
    buf.insert(**steps_tagged(3, 4))  # steps 3, 4 fill slots 3, 4; steps 5, 6 wrap into slots 0, 1
    assert (buf.position, buf.size) == (2, 5)
    assert buf.reward[:, 0, 0].tolist() == [5, 6, 2, 3, 4]
    assert buf.next_state[:, 1, 0].tolist() == [5.5, 6.5, 2.5, 3.5, 4.5]
    buf.insert(**steps_tagged(10, 7))  # longer than the ring: steps 12..16 stay, 16 written last
    assert buf.size == 5
    assert sorted(buf.reward[:, 0, 0].tolist()) == [12, 13, 14, 15, 16]
    assert buf.reward[(buf.position - 1) % 5, 0, 0] == 16


@pytest.mark.parametrize("filled", [3, 11], ids=["before_wrap", "after_wrap"])
def test_sampling_is_uniform_over_the_stored_transitions(filled):
    buf = make_buffer(5, num_envs=3)
    buf.insert(**steps_tagged(0, filled, num_envs=3))
    stored = min(filled, 5) * 3  # 9 or 15 transitions; df 8 or 14
    draws = 60_000
    sample = draw_sample(buf, draws, seed_tensor(7, "cpu"), torch.tensor([0]))
    step = sample["reward"][:, 0].long()
    assert int(step.min()) >= max(0, filled - 5) and int(step.max()) < filled  # never an unfilled slot
    assert torch.equal(sample["next_inputs"][:, 0, 0], sample["inputs"][:, 0, 0] + 0.5)  # rows stay whole
    # which env: every field of a draw comes from one (slot, env); recover env from a per-env offset
    buf.reward += torch.arange(3, dtype=torch.float32).view(1, 3, 1) * 1000
    sample = draw_sample(buf, draws, seed_tensor(7, "cpu"), torch.tensor([0]))
    cell = (sample["reward"][:, 0] // 1000).long() * 100 + (sample["reward"][:, 0] % 1000).long()
    counts = torch.bincount(torch.unique(cell, return_inverse=True)[1]).float()
    assert counts.numel() == stored
    assert chi_square(counts) < chi2_critical(stored - 1)


def test_the_uniformity_check_has_teeth():
    # A draw that favours one transition twice as much fails the same check.
    counts = torch.full((9,), 6000.0)
    counts[0] = 12000
    assert chi_square(counts) > chi2_critical(8)


def test_a_draw_is_its_seed_and_number_and_the_updates_of_an_iteration_draw_at_once():
    buf = make_buffer(5)
    buf.insert(**steps_tagged(0, 7))
    a = draw_sample(buf, 64, seed_tensor(3, "cpu"), torch.tensor([4]))
    b = draw_sample(buf, 64, seed_tensor(3, "cpu"), torch.tensor([4]))
    assert all(torch.equal(a[k], b[k]) for k in a)
    c = draw_sample(buf, 64, seed_tensor(3, "cpu"), torch.tensor([5]))
    assert not torch.equal(a["reward"], c["reward"])
    # Three updates' draws at once: update u is the single draw numbered 4 + u.
    slots, envs, weights = one_device(buf).replay_rows(buf, seed_tensor(3, "cpu"), torch.tensor([4]), 3, 64)
    for u in range(3):
        one = draw_sample(buf, 64, seed_tensor(3, "cpu"), torch.tensor([4 + u]))
        assert torch.equal(buf.reward[slots[u], envs[u]], one["reward"]) and torch.equal(weights[u], one["weight"])


def test_memory_per_transition_is_what_is_allocated():
    buf = make_buffer(7, num_envs=3)
    assert buf.nbytes == 7 * 3 * transition_bytes(N, D, 1, torch.int64, S)
    assert transition_bytes(N, D, 1, torch.int64, S) == 2 * N * D * 4 + N * 8 + N * 4 + 1 + 2 * S * 4


@pytest.mark.parametrize("capacity", [0, -3, 2.5, True, "10"])
def test_bad_capacity_is_refused(capacity):
    with pytest.raises(ValueError, match="replay capacity must be a positive int"):
        make_buffer(capacity)


def test_capacity_beyond_the_device_is_refused_before_allocating(monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda device: 10_000)
    allocated = []
    monkeypatch.setattr(torch, "zeros", lambda *a, **k: allocated.append(a))
    with pytest.raises(memory.InsufficientMemory, match=r"replay buffer of capacity=1000 .*--replay-capacity"):
        make_buffer(1000)
    assert allocated == []


def test_state_dict_round_trips_with_and_without_contents():
    buf = make_buffer(5)
    buf.insert(**steps_tagged(0, 7))
    whole, light = buf.state_dict(), buf.state_dict(contents=False)
    again = make_buffer(5)
    again.load_state_dict(whole)
    assert (again.position, again.size) == (buf.position, buf.size)
    assert all(torch.equal(getattr(again, k), getattr(buf, k)) for k in whole["buffers"])
    empty = make_buffer(5)
    empty.load_state_dict(light)
    assert (empty.position, empty.size) == (buf.position, 0)  # refilled before it is sampled again
    assert one_device(empty).replay_transitions(empty) == 0  # the learner acts only until it holds a batch
    empty.insert(**steps_tagged(40, 2))  # refilled from the saved position: slots 2 and 3 of the ring
    refilled = draw_sample(empty, 256, seed_tensor(1, "cpu"), torch.tensor([0]))
    assert set(refilled["reward"][:, 0].tolist()) == {40.0, 41.0}


@pytest.mark.parametrize("corrupt, message", [
    (lambda s: s.update(capacity=6), "capacity 6"),
    (lambda s: s.update(position=5), "position 5"),
    (lambda s: s.update(size=-1), "size -1"),
    (lambda s: s["buffers"].update(reward=torch.zeros(5, E, N + 1)), "buffer 'reward'"),
    (lambda s: s["buffers"].pop("terminated"), "buffer 'terminated' is None"),
])
def test_corrupt_state_dict_is_refused_before_anything_changes(corrupt, message):
    source = make_buffer(5)
    source.insert(**steps_tagged(0, 3))
    state = source.state_dict()
    state["buffers"] = dict(state["buffers"])
    corrupt(state)
    target = make_buffer(5)
    target.insert(**steps_tagged(20, 2))
    before = {k: getattr(target, k).clone() for k in source.state_dict()["buffers"]}
    with pytest.raises(ValueError, match=message):
        target.load_state_dict(state)
    assert (target.position, target.size) == (2, 2)
    assert all(torch.equal(getattr(target, k), v) for k, v in before.items())
