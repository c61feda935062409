"""A new algorithm written outside gpurl, as a user would: REINFORCE with a learned baseline.

Importing this module registers ``--algo reinforce``. It touches no file of gpurl: it declares its parameters
(:class:`ReinforceParams`, an :class:`~gpurl.algos.AlgoParams` subclass), its rollout fields, an actor fragment
(PPO's, reused) and a learner fragment, through ``gpurl.algos`` alone. The trainer then makes its flags
(``--baseline-coef``), checks its values, runs it under every distribution policy and checkpoints it
(tests/test_algo_dist_matrix.py holds it to the one-device run like the built-in algorithms).

The learner: per trained group, Monte Carlo returns over the rollout, ``G_t = r_t + gamma (1 - ended_t)
G_{t+1}`` from the critic's value of the observation after the last step (an episode that ended, by
termination or by the time limit, is not bootstrapped: the simplest REINFORCE); one gradient step of
``-log pi(a_t | s_t) (G_t - V(s_t)) + baseline_coef / 2 (G_t - V(s_t))^2``, every sample's term summed and
divided by the samples of all ranks (``ctx.comm``), the gradients summed over ranks (``ctx.reduce_gradients``).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from gpurl.algos import AlgoParams, Algorithm, EnvSpec, Field, LearnContext, register_algorithm
from gpurl.algos.acting import Acting
from gpurl.algos.nets import ActorCritic
from gpurl.algos.params import setting
from gpurl.algos.ppo import PPOActor
from gpurl.fusion.counter_rng import seed_tensor
from gpurl.storage import RolloutStorage


@dataclass
class ReinforceParams(AlgoParams):
    baseline_coef: float = setting("weight of the baseline's squared error in the loss", default=0.5, ge=0)


def returns(reward: torch.Tensor, ended: torch.Tensor, last_value: torch.Tensor, gamma: float) -> torch.Tensor:
    """float32 [T, E, n] Monte Carlo returns of ``reward`` [T, E, n]; ``ended`` bool [T, E] (the episode ended
    at step t); ``last_value`` [E, n] bootstraps the steps after the rollout's last."""
    out = torch.empty_like(reward)
    following = last_value
    for t in range(reward.shape[0] - 1, -1, -1):
        following = reward[t] + gamma * (~ended[t]).unsqueeze(-1) * following
        out[t] = following
    return out


class ReinforceLearner:
    inputs = ("obs", "starts", "reward", "terminated", "truncated", "actions")
    outputs = ("weights", "statistics")

    def __init__(self, params: ReinforceParams, groups, nets: nn.ModuleDict, optimizer: torch.optim.Optimizer):
        self.params, self.groups, self.nets, self.optimizer = params, groups, nets, optimizer

    def run(self, s: RolloutStorage, ctx: LearnContext) -> torch.Tensor:
        p, T, E = self.params, s.steps, s.reward.shape[1]
        ended = s.terminated | s.truncated
        envs = ctx.comm.all_reduce_(torch.full((1,), float(E), device=s.reward.device))[0]  # envs of every rank
        self.optimizer.zero_grad(set_to_none=False)
        loss, stats = 0.0, []
        for name, net in self.nets.items():
            group = self.groups[name]
            a, n = group.agents, group.agents.stop - group.agents.start
            x = s.policy_input(0, T, a, group.obs_dim)                          # [T, E, n, in]
            with torch.no_grad():
                last = net.value(s.policy_input(T, T + 1, a, group.obs_dim)[0].reshape(E * n, -1)).view(E, n)
            G = returns(s.reward[:, :, a], ended, last, p.gamma)
            log_prob, _, value = net.evaluate(x.reshape(T * E * n, -1), s.actions[:, :, a].reshape(T * E * n, -1))
            error = G.reshape(-1) - value
            samples = T * n * envs
            group_loss = (-(log_prob * error.detach()).sum() + p.baseline_coef * 0.5 * (error ** 2).sum()) / samples
            loss = loss + group_loss
            stats.append(torch.stack([group_loss.detach(), G.sum() / samples]))
        loss.backward()
        parameters = [q for q in self.nets.parameters()]
        for q in parameters:
            if q.grad is None:
                q.grad = torch.zeros_like(q)
        ctx.reduce_gradients([q.grad for q in parameters])
        self.optimizer.step()
        return ctx.comm.all_reduce_(torch.stack(stats))


class Reinforce(Algorithm):
    """REINFORCE with a learned baseline, one policy per trained group (see the module docstring)."""

    name = "reinforce"
    params_type = ReinforceParams
    stat_names = ("loss", "mean_return")

    def __init__(self, config, spec: EnvSpec, trained: list[str], seed: int, generator: torch.Generator):
        p: ReinforceParams = config.algo_params
        self.params, self.spec, self.trained = p, spec, trained
        groups = spec.groups
        self.nets = nn.ModuleDict({
            name: ActorCritic(groups[name].obs_dim * p.frame_stack, groups[name].action_space, p.hidden,
                              p.activation, norm_obs=False, generator=generator)
            for name in trained}).to(spec.device)
        self.optimizer = torch.optim.Adam(self.nets.parameters(), lr=p.lr)
        acting = Acting(dict(self.nets), {name: groups[name].agents.start for name in trained}, p.policy_backend,
                        seed_tensor(seed, spec.device), spec.env_offset, spec.num_agents)
        self.acting = acting
        self.actor = PPOActor(groups, acting, recurrent=False)
        self.learner = ReinforceLearner(p, groups, self.nets, self.optimizer)

    def fields(self) -> dict[str, Field]:
        return {"log_prob": Field(), "value": Field(extra_steps=1)}  # what PPO's actor writes

    def sync_actors(self) -> None:
        self.acting.sync()


register_algorithm(Reinforce)
