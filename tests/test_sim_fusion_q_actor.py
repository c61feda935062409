"""Sim tier: the fused epsilon-greedy actor (``q_actor_fused_kernel`` under TRITON_INTERPRET=1) against the
one definition of epsilon-greedy acting, ``QNetwork.act`` (run through ``act_ref`` below on the same rows).

Actions must be identical: the same greedy argmax (lowest index on ties), the same counter-RNG bits for the
explore draw and the random action. Covered: epsilon 0 (greedy), 0.3 and 1 (uniform random actions); the
launch geometries (64-row programs with a masked tail; 128 padded hidden units, 16-row programs), relu and
three hidden layers; the trainer's strided views (a group's agents sliced out of the ``[T, E, N, 1]`` action
buffer: only that slice is written); exact ties and padded actions; step / seed sensitivity; and
``QActor``'s triton vs eager backends, including greedy evaluation and the packed weights' ``sync``.
"""
from __future__ import annotations

import gymnasium
import pytest
import torch

from gpurl.algos.acting import global_agent_ids
from gpurl.algos.q_acting import QActor
from gpurl.algos.q_nets import QNetwork
from gpurl.fusion.counter_rng import seed_tensor
from gpurl.fusion.q_actor import pack_q_network, q_actor_step_triton
from q_acting_harness import ACTION_FILL, q_actor_setup

pytestmark = pytest.mark.sim

triton = pytest.importorskip("triton")


def q_network(in_dim, num_actions, widths=(64, 64), activation="tanh", seed=0) -> QNetwork:
    """A QNetwork whose Qs spread over the actions (random output biases), so the argmax varies by row."""
    net = QNetwork(in_dim, gymnasium.spaces.Discrete(num_actions), widths, activation,
                   torch.Generator().manual_seed(seed))
    with torch.no_grad():
        net.net[-1].bias.normal_(0.0, 0.5, generator=torch.Generator().manual_seed(seed + 7))
    return net


def act_ref(x, net, step, seed, epsilon, env_offset, num_agents, group_start, action):
    """The definition, ``net.act``, on the rows of ``x`` [E, n, D], written like the kernel."""
    E, n, D = x.shape
    ids = global_agent_ids(E, n, env_offset, num_agents, group_start, x.device)
    with torch.no_grad():
        a, _ = net.act(x.reshape(E * n, D), ids, step, seed, epsilon)
    action.copy_(a.view(E, n, 1))


def both(x, net, step, seed, epsilon, env_offset=0, num_agents=None, group_start=0):
    """(kernel's actions, reference's actions) [E, n, 1] for the rows x [E, n, D]."""
    E, n, _ = x.shape
    num_agents = n if num_agents is None else num_agents
    packed = pack_q_network(net.net, net.num_actions, "relu" if isinstance(net.net[1], torch.nn.ReLU) else "tanh")
    args = (x, torch.tensor([step]), seed_tensor(seed, "cpu"), torch.tensor([epsilon]), env_offset, num_agents,
            group_start)
    got, want = (torch.full((E, n, 1), ACTION_FILL, dtype=torch.int64) for _ in range(2))
    q_actor_step_triton(x, packed, *args[1:], got)
    act_ref(x, net, *args[1:], want)
    return got, want


@pytest.mark.parametrize("epsilon", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("variant,in_dim,num_actions,widths,activation,E,n", [
    ("spread-64x64-tanh", 18, 5, (64, 64), "tanh", 70, 3),          # 210 rows: 4 programs of 64, a masked tail
    ("wide-100x37-relu", 44, 9, (100, 37), "relu", 9, 7),           # HP 128: 16-row programs
    ("three-layers-tanh", 30, 7, (32, 48, 40), "tanh", 13, 5),
])
def test_kernel_matches_the_definition(variant, in_dim, num_actions, widths, activation, E, n, epsilon):
    net = q_network(in_dim, num_actions, widths, activation, seed=len(variant))
    x = torch.randn(E, n, in_dim, generator=torch.Generator().manual_seed(E)) * 2.0
    got, want = both(x, net, step=17, seed=20261127, epsilon=epsilon, env_offset=5, num_agents=n + 4, group_start=2)
    assert torch.equal(got, want), f"{(got != want).sum().item()} of {E * n} rows act differently"
    assert ((got >= 0) & (got < num_actions)).all()
    if epsilon == 0.0:
        assert len(torch.unique(got)) > 2          # the argmax varies by row: a real comparison
    if epsilon == 1.0:
        assert len(torch.unique(got)) == num_actions


def test_ties_take_the_lowest_index_and_padded_actions_are_never_taken():
    net = q_network(10, 5, (16,))
    with torch.no_grad():   # every Q the same: the greedy action is 0 (torch.argmax's lowest index)
        net.net[-1].weight.zero_()
        net.net[-1].bias.fill_(-3.0)
    x = torch.randn(40, 2, 10, generator=torch.Generator().manual_seed(1))
    got, want = both(x, net, step=3, seed=4, epsilon=0.0)
    assert torch.equal(got, want) and (got == 0).all()
    with torch.no_grad():   # actions 3 and 4 tie for the best: 3. The 11 padded actions hold Q = -1e30.
        net.net[-1].bias.copy_(torch.tensor([-5.0, -4.0, -6.0, 2.0, 2.0]))
    got, want = both(x, net, step=3, seed=4, epsilon=0.0)
    assert torch.equal(got, want) and (got == 3).all()


def test_only_the_groups_slice_of_the_action_buffer_is_written():
    net = q_network(20, 6, seed=3)
    T, E, N, t, agents = 3, 11, 13, 1, slice(4, 11)
    obs = torch.randn(T + 1, E, N, 29, generator=torch.Generator().manual_seed(3))
    x = obs[t, :, agents, :20]                                   # the trainer's strided view
    assert not x.is_contiguous() and x.stride(2) == 1
    buffers = [torch.full((T, E, N, 1), ACTION_FILL, dtype=torch.int64) for _ in range(2)]
    packed = pack_q_network(net.net, 6, "tanh")
    args = (torch.tensor([5]), seed_tensor(99, "cpu"), torch.tensor([0.4]), 2, N, agents.start)
    q_actor_step_triton(x, packed, *args, buffers[0][t, :, agents])
    act_ref(x, net, *args, buffers[1][t, :, agents])
    kernel, ref = buffers
    assert torch.equal(kernel, ref)
    written = torch.zeros(T, E, N, 1, dtype=torch.bool)
    written[t, :, agents] = True
    assert (kernel[written] != ACTION_FILL).all() and (kernel[~written] == ACTION_FILL).all()


def test_step_and_seed_select_the_draws():
    net = q_network(12, 8, (32,), seed=5)
    x = torch.randn(32, 4, 12, generator=torch.Generator().manual_seed(6))
    base, _ = both(x, net, step=3, seed=7, epsilon=1.0)
    for step, seed in ((4, 7), (3, 8)):
        other, _ = both(x, net, step=step, seed=seed, epsilon=1.0)
        assert (other != base).float().mean() > 0.5
    # A step beyond 32 bits and a 64-bit seed (both halves, the low one >= 2**31): still the definition.
    for step, seed in ((2**32 + 5, 2**40 + 2**31 + 5), (123456789, 2**63 - 1)):
        got, want = both(x, net, step=step, seed=seed, epsilon=0.5)
        assert torch.equal(got, want)


def test_bad_arguments_are_refused_before_the_launch():
    net = q_network(6, 3, (16,))
    packed = pack_q_network(net.net, 3, "tanh")
    x = torch.randn(4, 2, 6)
    args = (torch.tensor([1]), seed_tensor(1, "cpu"))
    with pytest.raises(ValueError, match="int64"):
        q_actor_step_triton(x, packed, *args, torch.tensor([0.1]), 0, 2, 0, torch.zeros(4, 2, 1, dtype=torch.int32))
    with pytest.raises(ValueError, match="epsilon must be a float32"):
        q_actor_step_triton(x, packed, *args, torch.tensor([0.1], dtype=torch.float64), 0, 2, 0,
                            torch.zeros(4, 2, 1, dtype=torch.int64))


# ---- QActor: the trainer's acting, triton vs eager backends ----------------------------------------------

def test_q_actor_backends_agree_and_follow_sync():
    N, E, obs_dim = 5, 24, 14
    obs = torch.randn(E, N, obs_dim, generator=torch.Generator().manual_seed(8))
    groups, spec, storage = q_actor_setup({"adversary": (slice(0, 3), obs_dim), "agent": (slice(3, 5), obs_dim - 4)},
                                          obs, env_offset=6)
    nets = torch.nn.ModuleDict({name: q_network(g.obs_dim, 5, (32, 32), seed=i)
                                for i, (name, g) in enumerate(groups.items())})
    actors = {b: QActor(groups, nets, spec, seed_tensor(11, "cpu"), 1.0, 0.1, 100, b, "tanh")
              for b in ("triton", "eager")}
    assert actors["triton"].packed and not actors["eager"].packed

    def act(backend, step, seed=None):
        storage.fresh_actions()
        actors[backend].run(storage, 1, torch.tensor([step]), seed)
        assert (storage.actions[0] == ACTION_FILL).all() and (storage.actions[1] != ACTION_FILL).all()
        return storage.actions[1]

    for step in (0, 50, 200):   # epsilon 1.0, 0.55, 0.1
        assert torch.equal(act("triton", step), act("eager", step))
    greedy = act("triton", 0, seed=seed_tensor(12, "cpu"))          # an evaluation: greedy whatever the step
    assert torch.equal(greedy, act("eager", 0, seed=seed_tensor(12, "cpu")))
    with torch.no_grad():
        nets["adversary"].net[-1].bias.add_(torch.tensor([0.0, 0.0, 0.0, 0.0, 50.0]))
    assert torch.equal(act("triton", 0, seed_tensor(12, "cpu")), greedy)   # packed copy still the old weights
    for actor in actors.values():
        actor.sync()
    after = act("triton", 0, seed_tensor(12, "cpu"))
    assert torch.equal(after, act("eager", 0, seed_tensor(12, "cpu")))
    assert (after[:, :3] == 4).all() and torch.equal(after[:, 3:], greedy[:, 3:])
