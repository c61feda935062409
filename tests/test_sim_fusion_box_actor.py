"""Sim tier: the fused Box actor (``box_actor_fused_kernel`` under TRITON_INTERPRET=1) against the one definition
of each Box policy's acting, ``DeterministicActor.act`` and ``SquashedGaussianActor.act`` (run through ``act_ref``
below on the same rows).

Actions must agree to float32 tolerance (the counter-RNG bits are the same; the dots' summation order, the
squash's ``2 / (1 + exp(-2 v))`` for ``tanh(v) + 1`` and the angle's cosine differ by rounding). Covered: both
policies with and without noise; the launch geometries (64-row programs with a masked tail; 128 padded hidden
units, 16-row programs, 32 padded outputs), relu and three hidden layers, a one-dimensional Box; the trainer's
strided views (a group's agents and action columns sliced out of the ``[T, E, N, C]`` action buffer: only that
slice is written); step and seed sensitivity, 64-bit seeds and steps beyond 32 bits; and ``BoxActor``'s triton
vs eager backends, including an evaluation's seed, deterministic acting and the packed weights' ``sync``.
"""
from __future__ import annotations

import pytest
import torch

from box_acting_harness import ACTION_FILL, box_actor_setup, box_policy
from gpurl.algos.acting import global_agent_ids
from gpurl.algos.box_acting import BoxActor
from gpurl.fusion.actor import block_rows
from gpurl.fusion.box_actor import box_actor_step_triton, pack_box_policy
from gpurl.fusion.counter_rng import seed_tensor

pytestmark = pytest.mark.sim

triton = pytest.importorskip("triton")

KINDS = ("deterministic", "squashed")
ATOL = 2e-5


def act_ref(x, actor, step, seed, std, deterministic, env_offset, num_agents, group_start, action):
    """The definition, ``actor.act``, on the rows of ``x`` [E, n, D], written like the kernel."""
    E, n, D = x.shape
    ids = global_agent_ids(E, n, env_offset, num_agents, group_start, x.device)
    with torch.no_grad():
        a = actor.act(x.reshape(E * n, D), ids, step, seed, std, deterministic)
    action.copy_(a.view(action.shape))


def both(x, actor, activation, step, seed, std=0.3, noise=True, env_offset=0, num_agents=None, group_start=0):
    """(kernel's actions, reference's actions) [E, n, A] for the rows x [E, n, D]."""
    E, n, _ = x.shape
    num_agents = n if num_agents is None else num_agents
    packed = pack_box_policy(actor.net, actor.action_dims, actor.outputs_per_dim, activation)
    step, seed = torch.tensor([step]), seed_tensor(seed, "cpu")
    got, want = (torch.full((E, n, actor.action_dims), ACTION_FILL) for _ in range(2))
    box_actor_step_triton(x, packed, actor.low, actor.half_range, step, seed, torch.tensor([std]), env_offset,
                          num_agents, group_start, got, noise)
    act_ref(x, actor, step, seed, std, not noise, env_offset, num_agents, group_start, want)
    return got, want


def assert_inside(actions, actor):
    assert ((actions >= actor.low) & (actions <= actor.low + 2 * actor.half_range)).all()


@pytest.mark.parametrize("noise", [True, False], ids=["noise", "no-noise"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("variant,in_dim,A,widths,activation,E,n", [
    ("spread-64x64-tanh", 18, 5, (64, 64), "tanh", 70, 3),          # 210 rows: 4 programs of 64, a masked tail
    ("wide-100x37-relu", 44, 7, (100, 37), "relu", 9, 7),           # HP 128: 16-row programs, NP 32
    ("three-layers-tanh", 30, 3, (32, 48, 40), "tanh", 13, 5),
    ("one-dim-relu", 10, 1, (16,), "relu", 40, 2),
])
def test_kernel_matches_the_definition(variant, in_dim, A, widths, activation, E, n, kind, noise):
    actor = box_policy(kind, in_dim, A, widths, activation, seed=len(variant))
    x = torch.randn(E, n, in_dim, generator=torch.Generator().manual_seed(E)) * 2.0
    got, want = both(x, actor, activation, step=17, seed=20261127, noise=noise, env_offset=5, num_agents=n + 4,
                     group_start=2)
    torch.testing.assert_close(got, want, rtol=0, atol=ATOL)
    assert_inside(got, actor)
    assert got.std(dim=(0, 1)).min() > 0.01                 # actions vary by row: a real comparison
    if variant.startswith("wide"):
        assert block_rows(pack_box_policy(actor.net, A, actor.outputs_per_dim, activation)) == 16


@pytest.mark.parametrize("kind", KINDS)
def test_saturated_outputs_stay_in_the_box(kind):
    actor = box_policy(kind, 12, 4, (32,), "tanh", seed=3, spread=1e4)    # every output far past saturation
    x = torch.randn(64, 3, 12, generator=torch.Generator().manual_seed(2))
    for noise in (True, False):
        got, want = both(x, actor, "tanh", step=3, seed=8, std=2.0, noise=noise)
        torch.testing.assert_close(got, want, rtol=0, atol=ATOL)
        assert_inside(got, actor)
        on_bounds = (got == actor.low) | (got == actor.low + 2 * actor.half_range)
        assert on_bounds.float().mean() > 0.5


def test_only_the_groups_slice_of_the_action_buffer_is_written():
    actor = box_policy("squashed", 20, 4, (32, 32), "tanh", seed=3)
    T, E, N, C, t, agents = 3, 11, 13, 6, 1, slice(4, 11)
    obs = torch.randn(T + 1, E, N, 29, generator=torch.Generator().manual_seed(3))
    x = obs[t, :, agents, :20]                                   # the trainer's strided view
    assert not x.is_contiguous() and x.stride(2) == 1
    buffers = [torch.full((T, E, N, C), ACTION_FILL) for _ in range(2)]
    packed = pack_box_policy(actor.net, 4, 2, "tanh")
    step, seed = torch.tensor([5]), seed_tensor(99, "cpu")
    box_actor_step_triton(x, packed, actor.low, actor.half_range, step, seed, torch.tensor([0.1]), 2, N,
                          agents.start, buffers[0][t, :, agents, :4])
    act_ref(x, actor, step, seed, 0.1, False, 2, N, agents.start, buffers[1][t, :, agents, :4])
    kernel, ref = buffers
    torch.testing.assert_close(kernel, ref, rtol=0, atol=ATOL)
    written = torch.zeros(T, E, N, C, dtype=torch.bool)
    written[t, :, agents, :4] = True
    assert (kernel[written] != ACTION_FILL).all() and (kernel[~written] == ACTION_FILL).all()


@pytest.mark.parametrize("kind", KINDS)
def test_step_and_seed_select_the_draws(kind):
    actor = box_policy(kind, 12, 3, (32,), seed=5)
    x = torch.randn(32, 4, 12, generator=torch.Generator().manual_seed(6))
    base, _ = both(x, actor, "tanh", step=3, seed=7)
    for step, seed in ((4, 7), (3, 8)):
        other, _ = both(x, actor, "tanh", step=step, seed=seed)
        assert (other - base).abs().gt(1e-4).float().mean() > 0.5
    # A step beyond 32 bits and a 64-bit seed (both halves, the low one >= 2**31): still the definition.
    for step, seed in ((2**32 + 5, 2**40 + 2**31 + 5), (123456789, 2**63 - 1)):
        got, want = both(x, actor, "tanh", step=step, seed=seed)
        torch.testing.assert_close(got, want, rtol=0, atol=ATOL)


# ---- BoxActor: the trainer's acting, triton vs eager backends ----------------------------------------------

def test_box_actor_backends_agree_and_follow_sync():
    N, E = 5, 24
    obs = torch.randn(E, N, 14, generator=torch.Generator().manual_seed(8))
    groups, spec, storage = box_actor_setup({"adversary": (slice(0, 3), 14), "agent": (slice(3, 5), 10)}, obs,
                                            columns=5, env_offset=6)
    actors = torch.nn.ModuleDict({"adversary": box_policy("deterministic", 14, 5, (32, 32), seed=1),
                                  "agent": box_policy("squashed", 10, 2, (32, 32), seed=2)})
    by_backend = {b: BoxActor(groups, actors, spec, seed_tensor(11, "cpu"), 0.2, b, "tanh")
                  for b in ("triton", "eager")}
    assert by_backend["triton"].packed and not by_backend["eager"].packed
    assert by_backend["triton"].backend == "triton"

    def act(backend, step, seed=None, deterministic=False):
        storage.fresh_actions()
        by_backend[backend].run(storage, 1, torch.tensor([step]), seed, deterministic)
        assert (storage.actions[0] == ACTION_FILL).all() and (storage.actions[1, :, :3] != ACTION_FILL).all()
        agent = storage.actions[1, :, 3:]
        assert (agent[..., :2] != ACTION_FILL).all() and (agent[..., 2:] == ACTION_FILL).all()
        return storage.actions[1].clone()

    def agree(*args):
        got = act("triton", *args)
        torch.testing.assert_close(got, act("eager", *args), rtol=0, atol=ATOL)
        return got

    for step in (0, 50):
        agree(step)
    evaluation = agree(0, seed_tensor(12, "cpu"))                    # an evaluation's seed: noise, its own draws
    assert (evaluation - agree(0)).abs().amax() > 1e-3
    greedy = agree(0, seed_tensor(12, "cpu"), True)                  # deterministic: the policies' own actions
    assert torch.equal(greedy, agree(7, None, True))
    with torch.no_grad():
        actors["adversary"].net[-1].bias.add_(torch.tensor([0.0, 0.0, 0.0, 0.0, 50.0]))
    assert torch.equal(act("triton", 0, None, True), greedy)        # packed copy still the old weights
    for actor in by_backend.values():
        actor.sync()
    after = agree(0, None, True)
    adversary = actors["adversary"]
    assert (after[:, :3, 4] == adversary.low[4] + 2 * adversary.half_range[4]).all()
    assert torch.equal(after[:, 3:], greedy[:, 3:])
