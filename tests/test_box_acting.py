"""CPU tier: the off-policy Box algorithms' acting backends (gpurl/algos/box_acting.py).

- ``eager`` writes what the definitions (``DeterministicActor.act``, ``SquashedGaussianActor.act``) give for each
  group's rows, into the group's agents and action columns of slot t only;
- ``compiled`` (one ``torch.compile``d call for every group) writes the eager actions to float tolerance, for a
  deterministic group and a squashed-Gaussian group side by side, at several steps and under an evaluation seed
  (which keeps the noise, as the DDPG actor's did), and with ``deterministic`` (the policies' own actions);
- with weights that saturate every tanh (the actions on the bounds, the noise pushing past them) every
  backend's actions stay inside the Box;
- ``auto`` is ``compiled`` on the CPU; ``triton`` outside Triton's interpreter, an unknown name and a policy that
  is not a Box policy are refused; the fused kernel's launcher refuses wrong dtypes and shapes before any launch.
(The fused kernel itself: tests/test_sim_fusion_box_actor.py.)
"""
from __future__ import annotations

import pytest
import torch

from box_acting_harness import ACTION_FILL, box_actor_setup, box_policy
from gpurl.algos.acting import global_agent_ids
from gpurl.algos.box_acting import BoxActor
from gpurl.fusion import box_actor as fused
from gpurl.fusion.counter_rng import seed_tensor

pytestmark = pytest.mark.cpu

E, N, STD = 29, 5, 0.3
#: name: (kind, agents, obs_dim, action dims)
GROUPS = {"adversary": ("deterministic", slice(0, 3), 11, 5), "agent": ("squashed", slice(3, 5), 7, 3)}


@pytest.fixture(scope="module")
def setup():
    obs = torch.randn(E, N, 11, generator=torch.Generator().manual_seed(0)) * 2.0
    groups, spec, storage = box_actor_setup({name: (g[1], g[2]) for name, g in GROUPS.items()}, obs, columns=5,
                                            env_offset=3)
    actors = torch.nn.ModuleDict({name: box_policy(kind, dim, A, (16, 16), "tanh", seed=i)
                                  for i, (name, (kind, _, dim, A)) in enumerate(GROUPS.items())})
    by_backend = {b: BoxActor(groups, actors, spec, seed_tensor(4, "cpu"), STD, b, "tanh")
                  for b in ("compiled", "eager")}
    return obs, storage, actors, by_backend


def act(actor: BoxActor, storage, step: int, seed=None, deterministic=False) -> torch.Tensor:
    storage.fresh_actions()
    actor.run(storage, 0, torch.tensor([step]), seed, deterministic)
    assert (storage.actions[1] == ACTION_FILL).all()          # slot 1 untouched
    return storage.actions[0].clone()


def definition(obs, actors, step: int, seed: torch.Tensor, deterministic=False) -> torch.Tensor:
    """The actions [E, N, 5] the definitions give for each group's rows (unwritten columns ACTION_FILL)."""
    out = torch.full((E, N, 5), ACTION_FILL)
    for name, (_, agents, dim, A) in GROUPS.items():
        n = agents.stop - agents.start
        ids = global_agent_ids(E, n, 3, N, agents.start, "cpu")
        with torch.no_grad():
            a = actors[name].act(obs[:, agents, :dim].reshape(E * n, dim), ids, torch.tensor([step]), seed, STD,
                                 deterministic)
        out[:, agents, :A] = a.view(E, n, A)
    return out


def assert_inside_the_box(actions: torch.Tensor, actors) -> None:
    for name, (_, agents, _, A) in GROUPS.items():
        a, actor = actions[:, agents, :A], actors[name]
        assert ((a >= actor.low) & (a <= actor.low + 2 * actor.half_range)).all(), name


def test_compiled_acting_writes_the_definitions_actions(setup):
    obs, storage, actors, by_backend = setup
    for step, seed in ((0, None), (11, None), (11, seed_tensor(9, "cpu"))):   # the last: an evaluation's seed
        want = definition(obs, actors, step, seed_tensor(4, "cpu") if seed is None else seed)
        eager, compiled = (act(by_backend[b], storage, step, seed) for b in ("eager", "compiled"))
        assert torch.equal(eager, want)
        torch.testing.assert_close(compiled, eager, rtol=0, atol=1e-5)
        assert (compiled[:, 3:, 3:] == ACTION_FILL).all()                  # the squashed group's 3 columns of 5
        assert_inside_the_box(compiled, actors)
    noiseless = definition(obs, actors, 11, seed_tensor(4, "cpu"), deterministic=True)
    assert (want - noiseless).abs().amax() > 0.05                          # the noise is there


def test_deterministic_acting_is_the_policies_own_action(setup):
    obs, storage, actors, by_backend = setup
    want = torch.full((E, N, 5), ACTION_FILL)
    for name, (_, agents, dim, A) in GROUPS.items():
        with torch.no_grad():
            want[:, agents, :A] = actors[name](obs[:, agents, :dim])
    for backend, actor in by_backend.items():
        got = act(actor, storage, 5, seed_tensor(9, "cpu"), deterministic=True)
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5, msg=backend)
        assert torch.equal(got, act(actor, storage, 6, deterministic=True))   # no draw: the step does not matter


def test_saturated_policies_act_inside_the_box(setup):
    obs, storage, actors, by_backend = setup
    saved = {k: v.clone() for k, v in actors.state_dict().items()}
    try:
        with torch.no_grad():
            for actor in actors.values():
                actor.net[-1].weight.mul_(1e4)                   # every output far past tanh's saturation
        for step in (0, 1):
            eager, compiled = (act(by_backend[b], storage, step) for b in ("eager", "compiled"))
            for actions in (eager, compiled):
                assert_inside_the_box(actions, actors)
            torch.testing.assert_close(compiled, eager, rtol=0, atol=1e-5)
            adversary = eager[:, :3, :5]
            low, high = actors["adversary"].low, actors["adversary"].low + 2 * actors["adversary"].half_range
            assert ((adversary == low) | (adversary == high)).float().mean() > 0.3   # the noise clipped at a bound
    finally:
        actors.load_state_dict(saved)


def test_backend_choice_and_refusals(setup, monkeypatch):
    obs, storage, actors, by_backend = setup
    groups, spec, _ = box_actor_setup({name: (g[1], g[2]) for name, g in GROUPS.items()}, obs, columns=5)
    assert by_backend["compiled"].backend == "compiled" and by_backend["eager"].backend == "eager"
    assert not by_backend["compiled"].packed
    assert BoxActor(groups, actors, spec, seed_tensor(1, "cpu"), STD, "auto", "tanh").backend == "compiled"
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError, match="runs on CUDA, or on the CPU only under TRITON_INTERPRET=1"):
        BoxActor(groups, actors, spec, seed_tensor(1, "cpu"), STD, "triton", "tanh")
    with pytest.raises(ValueError, match="policy_backend must be one of"):
        BoxActor(groups, actors, spec, seed_tensor(1, "cpu"), STD, "fused", "tanh")
    with pytest.raises(TypeError, match="DeterministicActor or SquashedGaussianActor"):
        BoxActor(groups, torch.nn.ModuleDict({"adversary": torch.nn.Linear(11, 5)}), spec, seed_tensor(1, "cpu"),
                 STD, "eager", "tanh")


def test_packing_and_launch_refuse_wrong_arguments():
    actor = box_policy("squashed", 6, 3, (16,))
    with pytest.raises(ValueError, match="outputs_per_dim is 1"):
        fused.pack_box_policy(actor.net, 3, 3, "tanh")
    with pytest.raises(ValueError, match="6 outputs, expected"):
        fused.pack_box_policy(actor.net, 3, 1, "tanh")
    packed = fused.pack_box_policy(actor.net, 3, 2, "tanh")
    assert (packed.heads, packed.nvec, packed.in_dim) == (2, [3, 3], 6)
    x, step, seed, std = torch.randn(4, 2, 6), torch.tensor([1]), seed_tensor(1, "cpu"), torch.tensor([0.1])

    def launch(x=x, low=actor.low, step=step, seed=seed, std=std, action=None):
        action = torch.zeros(4, 2, 3) if action is None else action
        fused.box_actor_step_triton(x, packed, low, actor.half_range, step, seed, std, 0, 2, 0, action)

    with pytest.raises(ValueError, match="action must be float32"):
        launch(action=torch.zeros(4, 2, 3, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"action must be \[E, n, A\] = \(4, 2, 3\)"):
        launch(action=torch.zeros(4, 2, 5))
    with pytest.raises(ValueError, match="action needs a contiguous last dimension"):
        launch(action=torch.zeros(4, 2, 6)[..., ::2])
    with pytest.raises(ValueError, match="x must be float32"):
        launch(x=x.double())
    with pytest.raises(ValueError, match="x has 5 inputs per row, the policy takes 6"):
        launch(x=x[..., :5])
    with pytest.raises(ValueError, match="std must be a torch.float32 tensor of 1"):
        launch(std=torch.tensor([0.1], dtype=torch.float64))
    with pytest.raises(ValueError, match="step must be a torch.int64"):
        launch(step=torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="seed must be a torch.int64 tensor of 2"):
        launch(seed=torch.tensor([1]))
    with pytest.raises(ValueError, match="low must be a torch.float32 tensor of 3"):
        launch(low=actor.low[:2])
    q_like = fused.PackedPolicy.__new__(fused.PackedPolicy)
    q_like.heads, q_like.with_value, q_like.nvec = 1, True, [3]
    with pytest.raises(ValueError, match="takes a packed Box policy"):
        fused.box_actor_step_triton(x, q_like, actor.low, actor.half_range, step, seed, std, 0, 2, 0,
                                    torch.zeros(4, 2, 3))
