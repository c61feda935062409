"""The fused actor on the CPU: the ``gpurl::actor_step`` op, its torch reference, the counter RNG and
``FusedActor``'s errors and weight sync.

``actor_step_ref`` is held to ``ActorCritic.evaluate`` (the learner's log-probs and values must be the
ones the rollout recorded) and to softmax (its counter-RNG inverse-CDF sampling has the right law).
The Triton kernel itself is checked in the sim tier (tests/test_sim_fusion_actor.py, interpreter vs
reference) and the compile tier (tests/test_compile_fusion_actor.py, sm_90 AOT).
"""
from __future__ import annotations

import re

import pytest
import torch
from gymnasium.spaces import Box, Discrete, MultiDiscrete

from gpurl.fusion.actor import actor_step_ref
from gpurl.fusion.actor_op import FusedActor
from gpurl.fusion.counter_rng import MASK32, mix32_ref, split_seed, uniform_ref
from gpurl.fusion.packing import PackedPolicy
from gpurl.train.policy import ActorCritic

pytestmark = pytest.mark.cpu


def make_policy(in_dim=23, space=MultiDiscrete([21, 21]), widths=(64, 64), activation="tanh", norm_obs=True,
                seed=0):
    torch.manual_seed(seed)
    policy = ActorCritic(in_dim, space, widths, activation, norm_obs)
    with torch.no_grad():
        policy.actor[-1].bias.normal_(0.0, 1.5)      # heads far from uniform
    if norm_obs:
        policy.obs_norm.update(torch.randn(300, in_dim, generator=torch.Generator().manual_seed(seed)) * 3 + 1)
    return policy


def outputs(E, n, heads):
    return torch.empty(E, n, heads, dtype=torch.int64), torch.empty(E, n), torch.empty(E, n)


def observations(E, n, D, seed=0):
    return torch.randn(E, n, D, generator=torch.Generator().manual_seed(seed)) * 4.0


# ---- the op ---------------------------------------------------------------------------------------------

def test_op_is_registered_and_mutates_its_outputs():
    op = torch.ops.gpurl.actor_step.default
    schema = str(op._schema)
    for name in ("action", "log_prob", "value"):
        assert re.search(rf"Tensor\(\w+!\) {name}\b", schema), schema
    assert schema.endswith("-> ()")


def test_op_without_fusion_equals_the_reference_exactly():
    policy = make_policy()
    packed = PackedPolicy(policy, "tanh")
    T, E, N, t, agents = 2, 5, 9, 1, slice(2, 8)
    x = observations(E, N, 23)[:, agents]
    step = torch.tensor([41])
    seed = 2**40 + 77
    want = outputs(E, agents.stop - agents.start, 2)
    actor_step_ref(x, packed, step, seed, 3, N, agents.start, *want)
    action = torch.full((T, E, N, 2), -1, dtype=torch.int64)
    log_prob, value = torch.zeros(T, E, N), torch.zeros(T, E, N)
    torch.ops.gpurl.actor_step(x, *packed.tensors(), step, action[t, :, agents], log_prob[t, :, agents],
                               value[t, :, agents], *split_seed(seed), 3, N, agents.start, "tanh",
                               float(packed.norm_clip), packed.nvec, False)
    assert torch.equal(action[t, :, agents], want[0])
    assert torch.equal(log_prob[t, :, agents], want[1]) and torch.equal(value[t, :, agents], want[2])
    assert (action[0] == -1).all() and (log_prob[0] == 0).all()
    # FusedActor's torch backend is the same call.
    actor = FusedActor(policy, "tanh", "torch", seed, 3, N, agents.start)
    got = outputs(E, agents.stop - agents.start, 2)
    actor(x, step, *got)
    for g, w in zip(got, want):
        assert torch.equal(g, w)


# ---- the reference against the learner's evaluate() and against softmax --------------------------------

@pytest.mark.parametrize("space", [MultiDiscrete([21, 21]), MultiDiscrete([3, 5, 2]), Discrete(7)],
                         ids=["21x21", "3-5-2", "discrete7"])
@pytest.mark.parametrize("norm_obs", [True, False], ids=["norm", "nonorm"])
def test_reference_log_prob_and_value_equal_evaluate(space, norm_obs):
    policy = make_policy(in_dim=31, space=space, norm_obs=norm_obs, seed=2)
    packed = PackedPolicy(policy, "tanh")
    E, n = 40, 3
    x = observations(E, n, 31, seed=5)
    x[..., 0] *= 50.0                                  # clipped by the normaliser when it is on
    action, log_prob, value = outputs(E, n, packed.heads)
    actor_step_ref(x, packed, torch.tensor([9]), 1234, 0, n, 0, action, log_prob, value)
    with torch.no_grad():
        want_logp, _, want_value = policy.evaluate(x.reshape(E * n, 31), action.reshape(E * n, -1))
    torch.testing.assert_close(log_prob.reshape(-1), want_logp, rtol=0, atol=1e-5)
    torch.testing.assert_close(value.reshape(-1), want_value, rtol=0, atol=1e-5)


def test_sampled_frequencies_match_softmax():
    nvec = [4, 6]
    policy = make_policy(in_dim=12, space=MultiDiscrete(nvec), seed=3)
    packed = PackedPolicy(policy, "tanh")
    rows = 20000
    x = observations(1, 1, 12, seed=1).expand(rows // 10, 10, 12)   # identical rows: identical logits
    action, log_prob, _ = outputs(rows // 10, 10, 2)
    actor_step_ref(x, packed, torch.tensor([0]), 5, 0, 10, 0, action, log_prob, torch.empty(rows // 10, 10))
    with torch.no_grad():
        logits = policy.actor(policy.obs_norm(x[0, :1]))[0]
    probs = [torch.softmax(part, -1) for part in logits.split(nvec)]
    a = action.reshape(rows, 2)
    for h, n in enumerate(nvec):
        freq = torch.bincount(a[:, h], minlength=n).float() / rows
        assert len(freq) == n
        assert (freq - probs[h]).abs().max() < 0.02, (freq, probs[h])
    # The two heads draw independent uniforms: the joint frequencies factorise.
    joint = torch.bincount(a[:, 0] * nvec[1] + a[:, 1], minlength=nvec[0] * nvec[1]).float() / rows
    assert (joint - torch.outer(probs[0], probs[1]).reshape(-1)).abs().max() < 0.02
    assert probs[0].max() - probs[0].min() > 0.1           # the test is not about a uniform head


# ---- the counter RNG -----------------------------------------------------------------------------------

def lowbias32(x: int) -> int:
    """Wellons' lowbias32 in plain Python integers (the spec mix32_ref implements on int64 tensors)."""
    x ^= x >> 16
    x = (x * 0x7FEB352D) & MASK32
    x ^= x >> 15
    x = (x * 0x846CA68B) & MASK32
    return x ^ (x >> 16)


def test_mix32_matches_lowbias32_over_the_whole_32_bit_range():
    values = [0, 1, 2, 0x7FFFFFFF, 0x80000000, 0xDEADBEEF, 0xFFFFFFFE, MASK32]
    got = mix32_ref(torch.tensor(values, dtype=torch.int64)).tolist()
    assert got == [lowbias32(v) for v in values]
    assert all(0 <= g <= MASK32 for g in got)


def test_uniform_ref_is_uniform_on_the_unit_interval():
    ids = torch.arange(100_000, dtype=torch.int64)
    u = uniform_ref(2**33 + 12345, ids, torch.tensor([7]), 0)
    assert u.dtype == torch.float32 and u.shape == ids.shape
    assert (u >= 0).all() and (u < 1).all()
    assert torch.equal(u * 2**24, (u * 2**24).floor())     # 24-bit grid
    assert abs(u.double().mean().item() - 0.5) < 0.005
    assert abs(u.double().var().item() - 1 / 12) < 0.002
    # Another head, step or seed gives other (uncorrelated) draws; the same key the same ones.
    assert torch.equal(u, uniform_ref(2**33 + 12345, ids, torch.tensor([7]), 0))
    for other in (uniform_ref(2**33 + 12345, ids, torch.tensor([7]), 1),
                  uniform_ref(2**33 + 12345, ids, torch.tensor([8]), 0),
                  uniform_ref(12345, ids, torch.tensor([7]), 0)):
        assert abs(torch.corrcoef(torch.stack([u, other]).double())[0, 1].item()) < 0.02
        assert (u != other).float().mean() > 0.99


# ---- FusedActor and PackedPolicy: errors and sync --------------------------------------------------------

def test_fused_backend_on_cpu_needs_the_triton_interpreter(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        FusedActor(make_policy(), "tanh", "fused", 0, 0, 1, 0)


def test_unknown_backend_is_rejected():
    with pytest.raises(ValueError, match="backend"):
        FusedActor(make_policy(), "tanh", "cuda", 0, 0, 1, 0)


def test_box_policies_are_not_packed():
    policy = ActorCritic(8, Box(-1.0, 1.0, (2,)))
    with pytest.raises(TypeError, match="categorical"):
        PackedPolicy(policy, "tanh")
    with pytest.raises(TypeError, match="categorical"):
        FusedActor(policy, "tanh", "torch", 0, 0, 1, 0)


def test_sync_makes_the_reference_follow_the_policy():
    policy = make_policy(in_dim=23, space=MultiDiscrete([21, 21]), seed=6)
    actor = FusedActor(policy, "tanh", "torch", seed=3, env_offset=0, num_agents=4, group_start=0)
    E, n = 25, 4
    x = observations(E, n, 23, seed=9)
    step = torch.tensor([2])

    def act():
        out = outputs(E, n, 2)
        actor(x, step, *out)
        return out

    before = act()
    with torch.no_grad():
        policy.critic[-1].bias.add_(5.0)
        policy.actor[-1].bias[21 + 13].add_(60.0)      # head 1 almost surely picks action 13
        policy.obs_norm.update(torch.randn(100, 23) * 10)
    stale = act()
    for s, b in zip(stale, before):                    # the packed buffers still hold the old weights
        assert torch.equal(s, b)
    actor.sync()
    after = act()
    assert (after[0][..., 1] == 13).all()
    assert not torch.equal(after[2], before[2])
    with torch.no_grad():
        want_logp, _, want_value = policy.evaluate(x.reshape(E * n, 23), after[0].reshape(E * n, 2))
    torch.testing.assert_close(after[1].reshape(-1), want_logp, rtol=0, atol=1e-5)
    torch.testing.assert_close(after[2].reshape(-1), want_value, rtol=0, atol=1e-5)


# ---- the CPU path: torch's GEMMs, the sampling in one Numba call (actor_cpu) -----------------------------

def test_numba_uniform_is_uniform_ref_bit_for_bit():
    import numpy as np

    from gpurl.fusion.counter_rng import uniform

    agents = torch.tensor([0, 1, 77, 4095, 2**31 + 3, 2**32 - 1, 2**32 + 9, 2**45 + 1])
    for seed in (0, 12345, 2**33 + 7, 2**64 - 1):
        lo, hi = split_seed(seed)
        for step in (0, 1, 99, 2**32 - 1, 2**32 + 5):
            for head in (0, 1, 3):
                want = uniform_ref(seed, agents, torch.tensor([step]), head)
                got = [uniform(np.uint64(lo), np.uint64(hi), np.uint64(a), np.uint64(step), np.uint64(head))
                       for a in agents.tolist()]
                assert torch.equal(torch.tensor(got, dtype=torch.float32), want), (seed, step, head)


@pytest.mark.parametrize("space", [Discrete(5), MultiDiscrete([21, 21]), MultiDiscrete([3, 5, 2])], ids=str)
@pytest.mark.parametrize("norm_obs", [True, False])
def test_cpu_path_samples_the_references_actions_into_strided_slots(space, norm_obs):
    """FusedActor's "auto" backend on the CPU (actor_step_cpu) against the reference over 12 steps, writing
    into slices of rollout-shaped buffers as the trainer does: the same actions, the same values, log-probs
    within 1e-5 (sums of exponentials may round differently in the last bit), nothing else written."""
    policy = make_policy(in_dim=11, space=space, norm_obs=norm_obs, seed=3)
    heads = len(space.nvec) if hasattr(space, "nvec") else 1
    T, E, N, agents, seed, offset = 3, 37, 6, slice(1, 5), 2**35 + 5, 100
    n = agents.stop - agents.start
    fast = FusedActor(policy, "tanh", "auto", seed, offset, N, agents.start)
    ref = FusedActor(policy, "tanh", "torch", seed, offset, N, agents.start)
    action = torch.full((T, E, N, heads), -7, dtype=torch.int64)
    log_prob, value = torch.full((T, E, N), 5.0), torch.full((T, E, N), 5.0)
    for step in range(12):
        x = observations(E, n, 11, seed=step)
        t = step % T
        fast(x, torch.tensor([step]), action[t, :, agents], log_prob[t, :, agents], value[t, :, agents])
        want = outputs(E, n, heads)
        ref(x, torch.tensor([step]), *want)
        assert torch.equal(action[t, :, agents], want[0]), step
        assert torch.equal(value[t, :, agents], want[2]), step
        torch.testing.assert_close(log_prob[t, :, agents], want[1], rtol=0, atol=1e-5)
    others = torch.ones(N, dtype=torch.bool)
    others[agents] = False
    assert (action[:, :, others] == -7).all() and (log_prob[:, :, others] == 5).all()
    assert (value[:, :, others] == 5).all()
    assert len(torch.unique(action[..., 0])) > 1  # real sampling, not one action everywhere
