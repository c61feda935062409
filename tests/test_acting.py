"""Acting (gpurl/algos/acting.py, the one definition ``ActorCritic.act``) on the CPU: its log-probs
and values are the learner's (``evaluate``), its samples follow softmax (and the normal law for Box
heads), the counter RNG behind it, and the compiled backend against the eager one, writing into
strided slots of rollout buffers as the trainer does. The Triton kernel is held to the same
definition in the sim tier (tests/test_sim_fusion_actor.py) and compiled for sm_90 in the compile
tier (tests/test_compile_fusion_actor.py).
"""
from __future__ import annotations

import pytest
import torch
from gymnasium.spaces import Box, Discrete, MultiDiscrete

from gpurl.algos.acting import Acting, global_agent_ids
from gpurl.algos.nets import ActorCritic
from gpurl.fusion.counter_rng import MASK32, mix32_ref, seed_tensor, split_seed, uniform_ref

pytestmark = pytest.mark.cpu


def make_policy(in_dim=23, space=MultiDiscrete([21, 21]), widths=(64, 64), activation="tanh", norm_obs=True,
                seed=0):
    policy = ActorCritic(in_dim, space, widths, activation, norm_obs, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        policy.actor[-1].bias.normal_(0.0, 1.5, generator=torch.Generator().manual_seed(seed + 1))  # far from uniform
    if norm_obs:
        policy.obs_norm.update(torch.randn(300, in_dim, generator=torch.Generator().manual_seed(seed)) * 3 + 1)
    return policy


def observations(E, n, D, seed=0):
    return torch.randn(E, n, D, generator=torch.Generator().manual_seed(seed)) * 4.0


def act(policy, x, step=9, seed=1234, offset=0, num_agents=None, start=0):
    E, n, D = x.shape
    ids = global_agent_ids(E, n, offset, num_agents or n, start, x.device)
    with torch.no_grad():
        return policy.act(x.reshape(E * n, D), ids, torch.tensor([step]), seed_tensor(seed, x.device))[:3]


# ---- the definition against the learner's evaluate() and against the laws it samples ---------------------

@pytest.mark.parametrize("space", [MultiDiscrete([21, 21]), MultiDiscrete([3, 5, 2]), Discrete(7), Box(-1, 1, (3,))],
                         ids=["21x21", "3-5-2", "discrete7", "box3"])
@pytest.mark.parametrize("norm_obs", [True, False], ids=["norm", "nonorm"])
def test_act_log_prob_and_value_equal_evaluate(space, norm_obs):
    policy = make_policy(in_dim=31, space=space, norm_obs=norm_obs, seed=2)
    x = observations(40, 3, 31, seed=5)
    x[..., 0] *= 50.0                                  # clipped by the normaliser when it is on
    action, log_prob, value = act(policy, x)
    with torch.no_grad():
        want_logp, _, want_value = policy.evaluate(x.reshape(120, 31), action)
    torch.testing.assert_close(log_prob, want_logp, rtol=0, atol=1e-5)
    torch.testing.assert_close(value, want_value, rtol=0, atol=1e-5)


def test_sampled_frequencies_match_softmax():
    nvec = [4, 6]
    policy = make_policy(in_dim=12, space=MultiDiscrete(nvec), seed=3)
    rows = 20000
    x = observations(1, 1, 12, seed=1).expand(rows // 10, 10, 12)   # identical rows: identical logits
    action, _, _ = act(policy, x, step=0, seed=5)
    with torch.no_grad():
        logits = policy.actor(policy.obs_norm(x[0, :1]))[0]
    probs = [torch.softmax(part, -1) for part in logits.split(nvec)]
    for h, n in enumerate(nvec):
        freq = torch.bincount(action[:, h], minlength=n).float() / rows
        assert (freq - probs[h]).abs().max() < 0.02, (freq, probs[h])   # ~3.5 standard errors
    # The two heads draw independent uniforms: the joint frequencies factorise.
    joint = torch.bincount(action[:, 0] * nvec[1] + action[:, 1], minlength=nvec[0] * nvec[1]).float() / rows
    assert (joint - torch.outer(probs[0], probs[1]).reshape(-1)).abs().max() < 0.02
    assert probs[0].max() - probs[0].min() > 0.1           # the test is not about a uniform head


def test_box_samples_are_normal_around_the_mean():
    policy = make_policy(in_dim=6, space=Box(-1, 1, (2,)), seed=4)
    with torch.no_grad():
        policy.log_std.copy_(torch.tensor([0.0, -1.0]))
    rows = 20000
    x = observations(1, 1, 6, seed=2).expand(rows // 10, 10, 6)
    action, _, _ = act(policy, x, seed=8)
    with torch.no_grad():
        mean = policy.actor(policy.obs_norm(x[0, :1]))[0]
    std = torch.tensor([1.0, torch.e ** -1])
    z = (action - mean) / std
    assert z.mean(0).abs().max() < 0.03 and (z.std(0) - 1).abs().max() < 0.03   # ~4 standard errors
    assert abs(torch.corrcoef(z.T)[0, 1].item()) < 0.03


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


def test_uniform_ref_is_uniform_on_the_unit_interval():
    ids = torch.arange(100_000, dtype=torch.int64)
    u = uniform_ref(2**33 + 12345, ids, torch.tensor([7]), 0)
    assert u.dtype == torch.float32 and u.shape == ids.shape
    assert (u >= 0).all() and (u < 1).all()
    assert torch.equal(u * 2**24, (u * 2**24).floor())     # 24-bit grid
    assert abs(u.double().mean().item() - 0.5) < 0.005
    assert abs(u.double().var().item() - 1 / 12) < 0.002
    assert torch.equal(u, uniform_ref(2**33 + 12345, ids, torch.tensor([7]), 0))
    # A seed held on the device (what acting passes) gives the same bits as the int.
    assert torch.equal(u, uniform_ref(seed_tensor(2**33 + 12345, "cpu"), ids, torch.tensor([7]), 0))
    assert split_seed(2**33 + 12345) == (12345, 2)
    for other in (uniform_ref(2**33 + 12345, ids, torch.tensor([7]), 1),
                  uniform_ref(2**33 + 12345, ids, torch.tensor([8]), 0),
                  uniform_ref(12345, ids, torch.tensor([7]), 0)):
        assert abs(torch.corrcoef(torch.stack([u, other]).double())[0, 1].item()) < 0.02
        assert (u != other).float().mean() > 0.99


def test_actions_depend_on_global_agent_ids_not_on_the_batch():
    """Envs 3..6 acted as a batch of their own (env_offset=3) give the rows 3..6 of the whole batch."""
    policy = make_policy(in_dim=9, space=MultiDiscrete([5, 5]), seed=5)
    x = observations(10, 4, 9, seed=3)
    whole = act(policy, x, offset=0)
    part = act(policy, x[3:7], offset=3)
    for w, p in zip(whole, part):
        torch.testing.assert_close(p, w[12:28], rtol=0, atol=1e-6)


# ---- Acting: backends, strided writes, errors ---------------------------------------------------------

@pytest.mark.parametrize("space", [Discrete(5), MultiDiscrete([21, 21]), Box(-1, 1, (2,))], ids=str)
def test_compiled_backend_samples_the_eager_actions_into_strided_slots(space):
    """The compiled backend against the eager one over 6 steps, writing into slices of rollout-shaped
    buffers as the trainer does: the same actions (Box: within 1e-5), log-probs and values within 1e-5,
    nothing else written."""
    policy = make_policy(in_dim=11, space=space, seed=3)
    heads = 2 if isinstance(space, Box) else len(getattr(space, "nvec", [0]))
    T, E, N, agents, offset = 3, 37, 6, slice(1, 5), 100
    n = agents.stop - agents.start
    seed = seed_tensor(2**35 + 5, "cpu")
    actors = {b: Acting({"g": policy}, {"g": agents.start}, b, seed, offset, N) for b in ("eager", "compiled")}
    dtype = torch.float32 if isinstance(space, Box) else torch.int64
    buffers = {b: (torch.full((T, E, N, heads), -7, dtype=dtype), torch.full((T, E, N), 5.0), torch.full((T, E, N), 5.0))
               for b in actors}
    for step in range(6):
        x = observations(E, N, 11, seed=step)[:, agents]
        t = step % T
        for b, actor in actors.items():
            action, log_prob, value = buffers[b]
            actor({"g": x}, torch.tensor([step]), {"g": (action[t, :, agents], log_prob[t, :, agents], value[t, :, agents])})
        (ea, el, ev), (ca, cl, cv) = buffers["eager"], buffers["compiled"]
        if dtype == torch.int64:
            assert torch.equal(ca[t], ea[t]), step
        else:
            torch.testing.assert_close(ca[t], ea[t], rtol=0, atol=1e-5)
        torch.testing.assert_close(cl[t], el[t], rtol=0, atol=1e-5)
        torch.testing.assert_close(cv[t], ev[t], rtol=0, atol=1e-5)
    others = torch.ones(N, dtype=torch.bool)
    others[agents] = False
    action, log_prob, value = buffers["compiled"]
    assert (action[:, :, others] == -7).all() and (log_prob[:, :, others] == 5).all() and (value[:, :, others] == 5).all()
    assert len(torch.unique(action[..., 0])) > 1  # real sampling, not one action everywhere


def test_backend_errors_name_the_problem(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    seed = seed_tensor(0, "cpu")
    one = lambda policy, backend: Acting({"g": policy}, {"g": 0}, backend, seed, 0, 1)  # noqa: E731
    with pytest.raises(ValueError, match="TRITON_INTERPRET"):
        one(make_policy(), "triton")
    with pytest.raises(ValueError, match="policy_backend must be one of"):
        one(make_policy(), "cuda")
    with pytest.raises(ValueError, match="categorical"):
        one(ActorCritic(8, Box(-1.0, 1.0, (2,))), "triton")
    assert one(make_policy(), "auto").backends == {"g": "compiled"}   # on the CPU


def test_several_groups_act_in_one_call_as_each_would_alone():
    """Two groups of different shapes acted together (one compiled call) give what each gives alone."""
    seed = seed_tensor(9, "cpu")
    policies = {"a": make_policy(in_dim=7, space=Discrete(5), seed=1), "b": make_policy(in_dim=4, space=MultiDiscrete([3, 3]), seed=2)}
    starts = {"a": 0, "b": 3}
    x = {"a": observations(6, 3, 7, seed=1), "b": observations(6, 2, 4, seed=2)}

    def outputs(name, heads):
        return (torch.zeros(6, x[name].shape[1], heads, dtype=torch.int64), torch.zeros(6, x[name].shape[1]),
                torch.zeros(6, x[name].shape[1]))

    together = {"a": outputs("a", 1), "b": outputs("b", 2)}
    Acting(policies, starts, "compiled", seed, 0, 5)(x, torch.tensor([4]), together)
    for name, heads in (("a", 1), ("b", 2)):
        alone = {name: outputs(name, heads)}
        Acting({name: policies[name]}, {name: starts[name]}, "eager", seed, 0, 5)({name: x[name]}, torch.tensor([4]), alone)
        assert torch.equal(together[name][0], alone[name][0])
        torch.testing.assert_close(together[name][1], alone[name][1], rtol=0, atol=1e-5)
        torch.testing.assert_close(together[name][2], alone[name][2], rtol=0, atol=1e-5)


def test_compiled_backend_of_a_recurrent_group_carries_the_eager_states():
    """A recurrent group without a critic (MAPPO's actor) acted by the compiled backend against the eager
    one over 3 steps, each side carrying its own state through [T + 1, E, N, H] storage slots with
    episode starts: the same actions, log-probs and states within 1e-5, no value. (One small policy: a
    new graph costs about a minute of inductor compile on CI's two vCPUs. The fused GRU kernel is held to
    the same definition in tests/test_sim_fusion_gru_actor.py, with a critic too.)"""
    gen = torch.Generator().manual_seed(4)
    policy = ActorCritic(9, Discrete(6), (24,), "tanh", True, gen, recurrent=True, critic=False)
    policy.obs_norm.update(torch.randn(100, 9, generator=gen) * 2 + 1)
    agents, T, E, N = slice(1, 4), 3, 11, 5
    seed = seed_tensor(21, "cpu")
    actors = {b: Acting({"g": policy}, {"g": agents.start}, b, seed, 4, N) for b in ("eager", "compiled")}
    starts = torch.rand(T + 1, E, generator=gen) < 0.3
    sides = {}
    for backend, actor in actors.items():
        hidden = torch.zeros(T + 1, E, N, policy.hidden_size)
        out = (torch.full((T, E, N, 1), -7), torch.zeros(T, E, N))
        for t in range(T):
            x = observations(E, N, 9, seed=t)[:, agents]
            state = (hidden[t, :, agents], starts[t], hidden[t + 1, :, agents])
            actor({"g": x}, torch.tensor([t]), {"g": (out[0][t, :, agents], out[1][t, :, agents], None)},
                  hidden={"g": state})
        sides[backend] = out + (hidden,)
    (ea, el, eh), (ca, cl, ch) = sides["eager"], sides["compiled"]
    assert torch.equal(ca, ea) and len(torch.unique(ca[:, :, agents, 0])) > 1
    for got, want in ((cl, el), (ch, eh)):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    assert (ch[1:, :, agents] != 0).any(-1).all() and (ch[:, :, [0, 4]] == 0).all()
