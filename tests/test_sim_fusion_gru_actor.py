"""Sim tier: the fused recurrent actor step (``gru_actor_fused_kernel`` under TRITON_INTERPRET=1) and the
feed-forward actor without a critic (``WITH_VALUE`` false), against the one definition of acting,
``ActorCritic.act``.

Actions must be identical (same counter-RNG bits, same inverse-CDF comparison), log-probs within 1e-5,
the new hidden state within 5e-5 of the definition computed in float64 (as the float32 definition is). The shapes are irregular (7 envs x 3 agents of 5, 13 inputs, GRU widths 24
and 32 padded to 32, heads [4, 3] and [5], tanh and relu) and every tensor is a slot of rollout-shaped
storage as the trainer holds it: observations [T + 1, E, N, D + 3], hidden states [T + 1, E, N, H + 5]
(a wider last dimension than H, so a store of a padded unit would show), episode starts [T + 1, E]
with some set. Two chained steps (each side carrying its own state) check the recurrence; the
interpreter costs per program, so the row counts stay at one or two programs.
"""
from __future__ import annotations

import copy

import pytest
import torch
from gymnasium.spaces import Discrete, MultiDiscrete

from gpurl.algos.acting import Acting, global_agent_ids
from gpurl.algos.nets import ActorCritic
from gpurl.fusion.counter_rng import seed_tensor

pytestmark = pytest.mark.sim

triton = pytest.importorskip("triton")

from gpurl.fusion.actor import actor_step_triton  # noqa: E402
from gpurl.fusion.gru_actor import gru_actor_step_triton  # noqa: E402
from gpurl.fusion.packing import PackedPolicy, PackedRecurrentPolicy  # noqa: E402

ACTION_FILL, FLOAT_FILL = -7, 1234.5
T, E, N, D = 3, 7, 5, 13
AGENTS = slice(1, 4)          # a group of 3 of the 5 agents
n = AGENTS.stop - AGENTS.start


def make_policy(space, widths, activation, norm_obs=True, recurrent=True, critic=False, seed=0):
    """A policy away from initialisation (every parameter moved), heads far from uniform, and a running
    normalisation that has seen data of non-zero mean and non-unit scale."""
    gen = torch.Generator().manual_seed(seed)
    policy = ActorCritic(D, space, widths, activation, norm_obs, generator=gen, recurrent=recurrent, critic=critic)
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen))
    if norm_obs:
        policy.obs_norm.update(torch.randn(256, D, generator=gen) * 2.0 + 0.5)
    return policy


def storage(H, heads, seed):
    """Rollout-shaped buffers: obs [T + 1, E, N, D + 3] (some inputs past the normaliser's clip), hidden
    [T + 1, E, N, H + 5] (slot 0 mid-episode states), starts bool [T + 1, E], actions, log-probs."""
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(T + 1, E, N, D + 3, generator=g) * 3.0
    obs[..., :2] *= 40.0
    hidden = torch.full((T + 1, E, N, H + 5), FLOAT_FILL)
    hidden[0, ..., :H] = torch.rand(E, N, H, generator=g) * 2 - 1
    starts = torch.rand(T + 1, E, generator=g) < 0.4
    starts[:, :2], starts[:, 2:4] = True, False      # every step: some envs start, some carry their state
    action = torch.full((T, E, N, heads), ACTION_FILL, dtype=torch.int64)
    log_prob = torch.full((T, E, N), FLOAT_FILL)
    return dict(obs=obs, hidden=hidden, starts=starts, action=action, log_prob=log_prob)


def act_ref(policy, x, h_in, starts, step, seed, action, log_prob, h_out):
    """The definition, ``policy.act``, on the rows of x [E, n, D], written like the kernel."""
    ids = global_agent_ids(E, n, 2, N, AGENTS.start, x.device)
    H = h_in.shape[-1]
    with torch.no_grad():
        a, lp, _, h = policy.act(x.reshape(E * n, D), ids, step, seed, h_in.reshape(E * n, H),
                                 starts.repeat_interleave(n))
    action.copy_(a.view(E, n, -1))
    log_prob.copy_(lp.view(E, n))
    h_out.copy_(h.view(E, n, H))


VARIANTS = {
    # space, widths, activation, norm_obs, critic (the kernel computes no value either way)
    "tanh-24x20-heads43": (MultiDiscrete([4, 3]), (24, 20), "tanh", True, False),
    "relu-32-discrete5-nonorm-critic": (Discrete(5), (32,), "relu", False, True),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_gru_step_matches_the_definition_over_two_chained_steps(variant):
    space, widths, activation, norm_obs, critic = VARIANTS[variant]
    policy = make_policy(space, widths, activation, norm_obs, critic=critic, seed=len(variant))
    packed = PackedRecurrentPolicy(policy, activation)
    H, heads = policy.hidden_size, packed.heads
    assert packed.HP == 32 and packed.head_layers == len(widths) - 1
    # Padded units: zero weights and biases in every gate row and every later layer's input column.
    for w in (packed.wx, packed.wh):
        assert (w.view(3, 32, 32)[:, H:] == 0).all() and (w[:, H:] == 0).all()
    assert (packed.bx.view(3, 32)[:, H:] == 0).all() and (packed.bh.view(3, 32)[:, H:] == 0).all()
    buffers = {"kernel": storage(H, heads, seed=5), "definition": storage(H, heads, seed=5),
               "exact": {k: v.double() if v.is_floating_point() else v for k, v in storage(H, heads, seed=5).items()}}
    exact_policy = copy.deepcopy(policy).double()
    seed = seed_tensor(2**40 + 2**31 + 9, "cpu")
    for t in range(2):
        for side, run in (("kernel", gru_actor_step_triton), ("definition", None), ("exact", None)):
            s = buffers[side]
            x = s["obs"][t, :, AGENTS, :D]
            h_in, h_out = s["hidden"][t, :, AGENTS, :H], s["hidden"][t + 1, :, AGENTS, :H]
            assert not x.is_contiguous() and not h_in.is_contiguous()
            args = (x, h_in, s["starts"][t], torch.tensor([11 + t]), seed)
            outs = (s["action"][t, :, AGENTS], s["log_prob"][t, :, AGENTS], h_out)
            if run is None:
                act_ref(exact_policy if side == "exact" else policy, *args, *outs)
            else:
                run(x, packed, h_in, s["starts"][t], args[3], seed, 2, N, AGENTS.start, *outs)
        k, d = buffers["kernel"], buffers["definition"]
        assert torch.equal(k["action"][t], d["action"][t]), f"step {t}: rows sample different actions"
        torch.testing.assert_close(k["log_prob"][t], d["log_prob"][t], rtol=0, atol=1e-5)
        # The new hidden state against the definition in float64: on inputs up to ~120 the recurrence leaves
        # float32 results some 1e-5 from it, the float32 definition as far as the kernel (and by how much
        # depends on the CPU: torch's matmul sums in its own order), so neither is the other's reference here.
        exact = buffers["exact"]["hidden"][t + 1].float()
        torch.testing.assert_close(d["hidden"][t + 1], exact, rtol=0, atol=5e-5)
        torch.testing.assert_close(k["hidden"][t + 1], exact, rtol=0, atol=5e-5)
    # Only the group's slice of slots 1 and 2 was written, and never a unit beyond H.
    hidden = buffers["kernel"]["hidden"]
    written = torch.zeros(T + 1, E, N, H + 5, dtype=torch.bool)
    written[1:3, :, AGENTS, :H] = True
    written[0, ..., :H] = True                       # slot 0: the initial states, read only
    assert (hidden[~written] == FLOAT_FILL).all()
    assert (hidden[1:3, :, AGENTS, :H] != FLOAT_FILL).all()
    action = buffers["kernel"]["action"]
    assert (action[2] == ACTION_FILL).all() and (action[:2, :, [0, 4]] == ACTION_FILL).all()
    for h, size in enumerate(packed.nvec):
        assert ((action[:2, :, AGENTS, h] >= 0) & (action[:2, :, AGENTS, h] < size)).all()


def test_mlp_actor_without_a_critic_computes_no_value():
    policy = make_policy(MultiDiscrete([4, 3]), (24, 20), "tanh", recurrent=False, critic=False, seed=3)
    packed = PackedPolicy(policy, "tanh")
    assert not packed.with_value and packed.c_w0.numel() == 1
    x = storage(1, 2, seed=8)["obs"][1, :, AGENTS, :D]
    step, seed = torch.tensor([4]), seed_tensor(77, "cpu")
    got = (torch.full((E, n, 2), ACTION_FILL, dtype=torch.int64), torch.full((E, n), FLOAT_FILL))
    actor_step_triton(x, packed, step, seed, 2, N, AGENTS.start, *got)
    ids = global_agent_ids(E, n, 2, N, AGENTS.start, x.device)
    with torch.no_grad():
        a, lp, value, hidden = policy.act(x.reshape(E * n, D), ids, step, seed)
    assert value is None and hidden is None
    assert torch.equal(got[0], a.view(E, n, 2))
    torch.testing.assert_close(got[1], lp.view(E, n), rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="no critic"):
        actor_step_triton(x, packed, step, seed, 2, N, AGENTS.start, *got, torch.zeros(E, n))


def test_acting_triton_and_eager_agree_for_a_recurrent_group_with_a_critic():
    """Acting's triton backend (the GRU kernel, then the critic pass) against its eager one, writing
    actions, log-probs, values and the next state into slots of rollout storage."""
    policy = make_policy(MultiDiscrete([4, 3]), (24, 20), "tanh", critic=True, seed=6)
    seed = seed_tensor(12, "cpu")
    actors = {b: Acting({"g": policy}, {"g": AGENTS.start}, b, seed, env_offset=2, num_agents=N)
              for b in ("triton", "eager")}
    assert isinstance(actors["triton"].packed["g"], PackedRecurrentPolicy) and not actors["eager"].packed
    H, t = policy.hidden_size, 1
    results = {}
    for backend, actor in actors.items():
        s = storage(H, 2, seed=9)
        value = torch.full((T, E, N), FLOAT_FILL)
        outputs = {"g": (s["action"][t, :, AGENTS], s["log_prob"][t, :, AGENTS], value[t, :, AGENTS])}
        hidden = {"g": (s["hidden"][t, :, AGENTS, :H], s["starts"][t], s["hidden"][t + 1, :, AGENTS, :H])}
        actor({"g": s["obs"][t, :, AGENTS, :D]}, torch.tensor([6]), outputs, hidden=hidden)
        results[backend] = (s["action"][t], s["log_prob"][t], value[t], s["hidden"][t + 1])
    (ka, kl, kv, kh), (ea, el, ev, eh) = results["triton"], results["eager"]
    assert torch.equal(ka, ea)
    for got, want in ((kl, el), (kv, ev), (kh, eh)):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    assert (kv[:, AGENTS] != FLOAT_FILL).all() and (kv[:, [0, 4]] == FLOAT_FILL).all()
    with pytest.raises(ValueError, match="is recurrent"):
        actors["triton"]({"g": torch.zeros(E, n, D)}, torch.tensor([6]), {"g": outputs["g"]})
