"""MAPPO: the central critic against the MLP it stands for, its gradients reach only its own parameters,
the actor never reads the global state, the acting pass's per-env values are the per-agent definition,
value normalisation, and the config checks."""
from __future__ import annotations

import pytest
import torch

from gpurl.algos import MAPPOParams
from gpurl.algos.acting import Acting
from gpurl.algos.central_critic import CentralCritic, ValueNorm
from gpurl.algos.ppo import PPOActor
from gpurl.algos.ppo_learner import central_values_compiled
from gpurl.algos.ppo_loss import policy_terms, value_terms
from gpurl.algos.ppo_objective import PPOObjective, pick
from gpurl.train import Trainer

from gpurl.train.config import TrainConfig
from test_train_ppo import run_iterations, tiny_config

pytestmark = pytest.mark.cpu


def test_central_critic_is_an_mlp_over_the_state_and_the_agents_one_hot():
    critic = CentralCritic(11, 4, (16, 8), "tanh", agent_id=True, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        critic.state_norm.mean.normal_()
        critic.state_norm.var.uniform_(0.5, 2)
    states = torch.randn(6, 11)
    # The reference: one row per (env, agent), [normalised state, one-hot id] through the whole MLP.
    whole = torch.nn.Linear(11 + 4, 16)  # the first layer over [state, one-hot id] as one Linear
    with torch.no_grad():
        whole.weight.copy_(torch.cat([critic.first.weight, critic.agent_columns.T], 1))
        whole.bias.copy_(critic.first.bias)
    x = torch.cat([critic.state_norm(states).repeat_interleave(4, 0), torch.eye(4).repeat(6, 1)], 1)
    want = critic.rest(critic.first_activation(whole(x))).view(6, 4)
    torch.testing.assert_close(critic.values(states), want, rtol=1e-5, atol=1e-6)
    agent = torch.tensor([0, 3, 1, 2, 2, 0])
    torch.testing.assert_close(critic.value_of(states, agent), want[torch.arange(6), agent], rtol=1e-5, atol=1e-6)
    shared = CentralCritic(11, 4, (16, 8), "tanh", agent_id=False, generator=torch.Generator().manual_seed(0))
    v = shared.values(states)
    assert v.shape == (6, 4) and torch.equal(v, v[:, :1].expand(-1, 4))


def test_value_norm_normalises_returns_and_inverts():
    norm = ValueNorm()
    returns = torch.randn(500) * 7 + 3
    norm.update(returns)
    z = norm.normalize(returns)
    assert abs(z.mean().item()) < 1e-3 and abs(z.std().item() - 1) < 1e-2
    torch.testing.assert_close(norm.denormalize(z), returns, rtol=1e-5, atol=1e-4)


@pytest.fixture(scope="module")
def mappo():
    trainer = Trainer(tiny_config(algo="mappo", value_norm=True))
    run_iterations(trainer, 1)
    trainer.rollout()
    return trainer


def test_critic_gradients_reach_only_the_critics_and_policy_gradients_only_the_actors(mappo):
    algo, learner, s = mappo.algo, mappo.algo.learner, mappo.storage
    advantages, returns = learner.advantages(s)
    samples = learner.samples
    samples.pack(s, advantages, returns, algo.nets, algo.value_norms)
    samples.shuffle(learner.seed, torch.zeros(1, dtype=torch.int64))
    m = torch.zeros(1, dtype=torch.int64)
    coef, one = learner.objective.coef, torch.ones(())
    for name, net in algo.nets.items():
        critic, cols = algo.critics[name], learner.columns[name]
        mb = PPOObjective._batch(cols, samples.epoch[name], pick(samples.weight[name], m), None, m)
        rows = pick(samples.critic_epoch[name], m)
        S, n = s.state_dim, cols.agents
        log_prob, entropy, own_value = net.evaluate(mb.inputs, mb.actions, normalized=True)
        assert own_value is None and net.critic is None
        policy_loss = policy_terms(log_prob, entropy, mb.log_prob, mb.advantages, len(mb), 0 * one, one, coef)[0]
        value_loss = value_terms(critic.values(rows[:, :S]), rows[:, S + n:], rows[:, S:S + n], rows.shape[0] * n, coef)
        for loss, reaches, spared in ((policy_loss, net, critic), (value_loss, critic, net)):
            params = [*reaches.parameters(), *spared.parameters()]
            grads = torch.autograd.grad(loss, params, allow_unused=True, retain_graph=True)
            mine, others = grads[:len(list(reaches.parameters()))], grads[len(list(reaches.parameters())):]
            assert all(g is None or torch.count_nonzero(g) == 0 for g in others)
            assert sum(torch.count_nonzero(g) for g in mine if g is not None) > 0


def test_the_actor_never_reads_the_global_state_and_values_come_once_per_env(mappo):
    algo, s = mappo.algo, mappo.storage
    t, step = 3, torch.tensor([77])
    algo.actor.run(s, t, step)
    actions, log_prob, value = s.actions[t].clone(), s.log_prob[t].clone(), s.value[t].clone()
    # The per-env pass equals the per-agent definition value_of(state, agent), de-normalised.
    for name, critic in algo.critics.items():
        a = mappo.env.groups[name].agents
        E, n = s.global_state.shape[1], a.stop - a.start
        per_agent = critic.value_of(s.global_state[t].repeat_interleave(n, 0), torch.arange(n).repeat(E))
        want = algo.value_norms[name].denormalize(per_agent).view(E, n)
        torch.testing.assert_close(value[:, a], want, rtol=1e-5, atol=1e-5)
    s.global_state[t] += 5 * torch.randn_like(s.global_state[t])
    algo.actor.run(s, t, step)
    assert torch.equal(s.actions[t], actions) and torch.equal(s.log_prob[t], log_prob)
    assert not torch.allclose(s.value[t], value)


def test_compiled_acting_makes_the_critics_pass_in_its_call_and_writes_the_eager_values(mappo):
    """The compiled backend computes the central values inside the acting call (a rollout step stays four
    kernels, tests/test_host_work.py): the same actions, log-probs and values as the eager pass."""
    algo, s = mappo.algo, mappo.storage
    eager = algo.actor
    acting = Acting(eager.acting.policies, eager.acting.starts, "compiled", eager.acting.seed,
                    eager.acting.env_offset, eager.acting.num_agents)
    fn, _, args = eager.critic_pass
    compiled = PPOActor(eager.groups, acting, eager.recurrent, (fn, central_values_compiled, args))
    t, step = 2, torch.tensor([41])
    written = []
    for actor in (eager, compiled):
        s.value[t] = float("nan")
        actor.run(s, t, step)
        written.append((s.actions[t].clone(), s.log_prob[t].clone(), s.value[t].clone()))
    assert torch.equal(written[1][0], written[0][0])
    torch.testing.assert_close(written[1][1], written[0][1], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(written[1][2], written[0][2], rtol=1e-5, atol=1e-5)


def test_mappo_needs_its_options_and_trains_with_every_one():
    with pytest.raises(ValueError, match="value_norm=True is not read by algo 'ppo' .read by: mappo."):
        tiny_config(value_norm=True)
    with pytest.raises(ValueError, match="algo 'ppo' takes PPOParams, got algo_params of type MAPPOParams"):
        TrainConfig(iters=1, algo_params=MAPPOParams(value_norm=True)).validated()  # the config itself
    # Only an algorithm that reads the global state has the env write it (and the storage keep it).
    ppo = Trainer(tiny_config())
    assert ppo.env.global_state is None and ppo.storage.state_dim == 0
    # The agent-specific critic with value normalisation is the fixture's; here the shared one, raw values.
    losses = run_iterations(Trainer(tiny_config(algo="mappo", critic_agent_id=False)), 2)[-1]
    assert all(v == v for v in losses.values()) and losses["v_loss/runner"] > 0
