"""Sim tier: the fused actor kernel (``actor_fused_kernel`` under TRITON_INTERPRET=1) against the one
definition of acting, ``ActorCritic.act`` (run through ``act_ref`` below on the same rows).

Actions must be identical (same counter-RNG bits, same inverse-CDF comparison), log-probs and values
within 1e-4. Covered: the issue's acceptance shape (1823 agents, obs_dim 71, 64x64 tanh, 21 x 21 heads,
normalisation on, some inputs clipped), irregular policies (relu, one hidden layer of 48, three
heads of unequal sizes, three hidden layers, 142 inputs, no normalisation), the trainer's strided
views (a group's agents sliced out of ``[E, N, ...]`` observation and rollout buffers: only the slice
is written), step / seed sensitivity, and ``Acting``'s triton vs eager backends. The interpreter
costs per program, so the row counts stay small except in the acceptance test (about 2 s each).
"""
from __future__ import annotations

import pytest
import torch
from gymnasium.spaces import Discrete, MultiDiscrete

from gpurl.algos.acting import Acting, global_agent_ids
from gpurl.algos.nets import ActorCritic
from gpurl.fusion.actor import actor_step_triton, block_rows
from gpurl.fusion.counter_rng import seed_tensor
from gpurl.fusion.packing import PackedPolicy

pytestmark = pytest.mark.sim

triton = pytest.importorskip("triton")

ACTION_FILL, FLOAT_FILL = -7, 1234.5


def make_policy(in_dim, space, widths=(64, 64), activation="tanh", norm_obs=True, seed=0):
    """An ActorCritic whose heads are far from uniform (random output biases) and whose running
    normalisation has seen data of non-zero mean and non-unit scale."""
    policy = ActorCritic(in_dim, space, widths, activation, norm_obs, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        policy.actor[-1].bias.normal_(0.0, 1.5, generator=torch.Generator().manual_seed(seed + 7))
        policy.critic[-1].bias.fill_(0.25)
    if norm_obs:
        g = torch.Generator().manual_seed(seed + 1)
        policy.obs_norm.update(torch.randn(256, in_dim, generator=g) * 2.0 + 0.5)
    return policy


def observations(E, n, D, seed, clip_some=True):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(E, n, D, generator=g) * 3.0
    if clip_some:
        x[..., :3] *= 40.0  # beyond the normaliser's clip of 10 standard deviations
    return x


def outputs(E, n, heads):
    return (torch.full((E, n, heads), ACTION_FILL, dtype=torch.int64), torch.full((E, n), FLOAT_FILL),
            torch.full((E, n), FLOAT_FILL))


def assert_same(got, want):
    (ga, gl, gv), (wa, wl, wv) = got, want
    assert ga.dtype == torch.int64 and gl.dtype == gv.dtype == torch.float32
    assert torch.equal(ga, wa), f"{(ga != wa).any(-1).sum().item()} rows sample different actions"
    # The definition's GEMMs (torch, unpadded weights) and the kernel's tl.dot sum in other orders; the
    # inputs here reach the normaliser's clip, so logits carry a few 1e-6 of relative rounding each.
    torch.testing.assert_close(gl, wl, rtol=0, atol=1e-4)
    torch.testing.assert_close(gv, wv, rtol=0, atol=1e-4)


def step_tensor(step):
    return torch.tensor([step], dtype=torch.int64)


def triton_seed(seed):
    return seed_tensor(seed, "cpu")


def act_ref(x, packed, step, seed, env_offset, num_agents, group_start, action, log_prob, value):
    """The definition, ``packed.policy.act``, on the rows of ``x`` [E, n, D], written like the kernel."""
    E, n, D = x.shape
    ids = global_agent_ids(E, n, env_offset, num_agents, group_start, x.device)
    with torch.no_grad():
        a, lp, v, _ = packed.policy.act(x.reshape(E * n, D), ids, step, seed)
    action.copy_(a.view(E, n, -1))
    log_prob.copy_(lp.view(E, n))
    value.copy_(v.view(E, n))


# ---- (a) the acceptance shape ---------------------------------------------------------------------------

@pytest.mark.parametrize("E,n,env_offset,num_agents,group_start", [
    (1823, 1, 0, 1, 0),     # 1823 single-agent envs
    (263, 7, 5, 12, 3),     # a group of 7 of 12 agents starting at agent 3; envs 5.. of a larger run
], ids=["1823x1", "263x7-in-12"])
def test_acceptance_shape_matches_reference(E, n, env_offset, num_agents, group_start):
    policy = make_policy(71, MultiDiscrete([21, 21]))
    packed = PackedPolicy(policy, "tanh")
    assert (packed.IP, packed.HP, packed.NP, packed.heads, packed.layers) == (128, 64, 32, 2, 2)
    assert packed.norm_clip == 10.0 and (packed.norm_rstd[:71] != 1).all()
    # The group's agents as the trainer sees them: a slice of the [E, N, D] observations.
    obs = observations(E, num_agents, 71, seed=E)
    x = obs[:, group_start:group_start + n]
    step = step_tensor(17)
    args = (x, packed, step, triton_seed(20261122), env_offset, num_agents, group_start)
    got, want = outputs(E, n, 2), outputs(E, n, 2)
    actor_step_triton(*args, *got)
    act_ref(*args, *want)
    assert_same(got, want)
    assert ((got[0] >= 0) & (got[0] < 21)).all()
    assert (got[1] < 0).all()
    assert len(torch.unique(got[0][..., 0])) > 10     # a real distribution over the 21 actions


# ---- (b) irregular policies, strided views, only the slice written --------------------------------------

VARIANTS = {
    # in_dim, space, widths, activation, norm_obs
    "relu-48-heads352-in142": (142, MultiDiscrete([3, 5, 2]), (48,), "relu", True),
    "tanh-3layers-discrete7-nonorm": (30, Discrete(7), (32, 48, 40), "tanh", False),
    "relu-100x37-heads21x4-in44": (44, MultiDiscrete([21, 4]), (100, 37), "relu", True),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_irregular_policies_write_only_their_slice_of_the_rollout_buffers(variant):
    in_dim, space, widths, activation, norm_obs = VARIANTS[variant]
    policy = make_policy(in_dim, space, widths, activation, norm_obs, seed=len(variant))
    packed = PackedPolicy(policy, activation)
    heads = packed.heads
    T, E, N, t, agents = 3, 11, 13, 1, slice(4, 11)          # 77 rows: several programs, masked tail
    n = agents.stop - agents.start
    assert E * n > block_rows(packed) and E * n % block_rows(packed) != 0
    # [T + 1, E, N, D_max] observations with a wider D than this group reads (trainer's storage).
    obs = torch.randn(T + 1, E, N, in_dim + 9, generator=torch.Generator().manual_seed(3)) * 4.0
    x = obs[t, :, agents, :in_dim]
    assert not x.is_contiguous() and x.stride(2) == 1
    buffers = [(torch.full((T, E, N, heads), ACTION_FILL, dtype=torch.int64),
                torch.full((T, E, N), FLOAT_FILL), torch.full((T, E, N), FLOAT_FILL)) for _ in range(2)]
    args = (x, packed, step_tensor(5), triton_seed(99), 2, N, agents.start)
    for run, (action, log_prob, value) in zip((actor_step_triton, act_ref), buffers):
        run(*args, action[t, :, agents], log_prob[t, :, agents], value[t, :, agents])
    (ka, kl, kv), (ra, rl, rv) = buffers
    assert_same((ka, kl, kv), (ra, rl, rv))
    written = torch.zeros(T, E, N, dtype=torch.bool)
    written[t, :, agents] = True
    assert (ka[written] != ACTION_FILL).all() and (ka[~written] == ACTION_FILL).all()
    for out in (kl, kv):
        assert (out[written] != FLOAT_FILL).all() and (out[~written] == FLOAT_FILL).all()
    for h, size in enumerate(packed.nvec):
        assert ((ka[written][:, h] >= 0) & (ka[written][:, h] < size)).all()


# ---- (c) the counter RNG: step and seed select the draws ------------------------------------------------

def test_step_and_seed_change_the_actions_and_reproduce_them():
    policy = make_policy(44, MultiDiscrete([11, 11]))
    packed = PackedPolicy(policy, "tanh")
    E, n = 16, 8
    x = observations(E, n, 44, seed=1)

    def kernel(step, seed):
        out = outputs(E, n, 2)
        actor_step_triton(x, packed, step_tensor(step), triton_seed(seed), 0, n, 0, *out)
        return out

    base = kernel(3, 7)
    assert_same(kernel(3, 7), base)
    for step, seed in ((4, 7), (3, 8)):
        other = kernel(step, seed)
        assert (other[0] != base[0]).any(-1).float().mean() > 0.5
        torch.testing.assert_close(other[2], base[2], rtol=0, atol=0)   # the value does not depend on u
    # 64-bit seed (both halves used, the low one >= 2**31) and a step beyond 32 bits: still the reference.
    for step, seed in ((2**32 + 5, 2**40 + 2**31 + 5), (123456789, 2**63 - 1)):
        want = outputs(E, n, 2)
        act_ref(x, packed, step_tensor(step), triton_seed(seed), 0, n, 0, *want)
        assert_same(kernel(step, seed), want)


# ---- Acting: triton backend vs eager backend ---------------------------------------------------------

def test_acting_backends_agree_and_follow_sync():
    policy = make_policy(142, MultiDiscrete([21, 21]), seed=4)
    E, N, agents = 9, 10, slice(0, 6)
    n = agents.stop
    actors = {b: Acting({"g": policy}, {"g": 0}, b, triton_seed(11), env_offset=3, num_agents=N)
              for b in ("triton", "eager")}
    assert "g" in actors["triton"].packed and not actors["eager"].packed
    obs = torch.randn(E, N, 142, generator=torch.Generator().manual_seed(8)) * 2.0
    x = obs[:, agents]

    def act(backend, step, seed=None):
        action = torch.full((2, E, N, 2), ACTION_FILL, dtype=torch.int64)
        log_prob, value = torch.full((2, E, N), FLOAT_FILL), torch.full((2, E, N), FLOAT_FILL)
        actors[backend]({"g": x}, step_tensor(step), {"g": (action[1, :, agents], log_prob[1, :, agents],
                                                            value[1, :, agents])}, seed)
        assert (action[0] == ACTION_FILL).all() and (action[1, :, n:] == ACTION_FILL).all()
        return action[1, :, agents], log_prob[1, :, agents], value[1, :, agents]

    before = act("triton", 2)
    assert_same(before, act("eager", 2))
    assert_same(act("triton", 2, seed=triton_seed(12)), act("eager", 2, seed=triton_seed(12)))  # evaluation's seed
    with torch.no_grad():
        policy.critic[-1].bias.add_(1.0)
        policy.actor[-1].bias[:21].add_(torch.linspace(-3.0, 3.0, 21))
    stale = act("triton", 2)
    assert_same(stale, before)                       # the packed copy still holds the old weights
    for actor in actors.values():
        actor.sync()
    after = act("triton", 2)
    assert_same(after, act("eager", 2))
    torch.testing.assert_close(after[2], before[2] + 1.0, rtol=0, atol=1e-5)
    assert not torch.equal(after[0], before[0])
