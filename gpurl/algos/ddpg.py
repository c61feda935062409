"""MADDPG, IDDPG and MATD3: the deterministic-policy algorithm plug-ins for Box actions (see
:mod:`gpurl.algos.base`).

One :class:`~.ddpg_nets.DeterministicActor` per trained group, shared by the group's agents, with one critic
(two with ``twin_critics``) and target copies of both.
- Actor fragment: :class:`DDPGActor` writes every trained group's actions at slot t: the policy's action plus
  Gaussian exploration noise from the counter RNG, clipped to the Box (the policy's alone when evaluating).
- Learner fragment: :class:`DDPGLearner` learns from the replay buffer the trainer fills with each rollout's
  transitions: ``q_updates`` updates of ``q_batch`` transitions drawn over the slots and all envs of the run
  (``ctx.batches``), each row weighted by this rank's share, as the value-based family does. An update:
  - critics: the TD target ``r + gamma (1 - terminated) min_k Q'_k(s', a')``, ``a'`` the target actors' actions
    with clipped smoothing noise (TD3; none by default), each critic's squared error;
  - actors, every ``policy_delay`` updates: ``-Q_1(s, mu(s))`` with every agent of the group acting by the
    current policy (the critics' parameters held fixed in this term), then the targets move towards the online
    networks by ``target_tau``;
  - one backward pass over both terms, the gradients summed over ranks in one call, each network's gradient
    norm clipped, one Adam step of the critics (and of the actors when their update is due).
  The actor term is computed with the critics before this update's step (TD3 steps the critics first); one
  backward and one all-reduce per update instead of two.

MADDPG's critics read the env's global state, every action of the group and the agent's one-hot id; IDDPG's each
agent's own input and action; MATD3 is MADDPG with TD3's defaults (:class:`~.ddpg_params.TD3Params`).
"""
from __future__ import annotations

import copy
from typing import NamedTuple

import torch
from torch import nn
from torch.func import functional_call

from ..fusion.counter_rng import seed_tensor, uniform_ref
from ..storage.replay import gather_rows, group_inputs
from ..storage.rollout import RolloutStorage
from .acting import global_agent_ids
from .base import Algorithm, EnvSpec, Field, LearnContext
from .ddpg_nets import Critic, DeterministicActor
from .ddpg_params import DDPGParams, TD3Params
from .distributions import standard_normal

#: The counter RNG's first head of the target smoothing noise (apart from acting's and the replay draw's).
SMOOTHING_HEAD = 5000


class DDPGTerms(NamedTuple):
    """One group's figures of one update, float32 scalars: the critics' TD loss, the actor's loss (0 where its
    update was not due) and the mean Q of the actions taken (the first critic)."""

    critic_loss: torch.Tensor
    actor_loss: torch.Tensor
    q_taken: torch.Tensor


STAT_NAMES = (*DDPGTerms._fields, "updates")


def td3_target(reward: torch.Tensor, terminated: torch.Tensor, gamma: float,
               next_values: list[torch.Tensor]) -> torch.Tensor:
    """``reward + gamma (1 - terminated) min_k next_values[k]``: reward [B, n], terminated bool [B], each of
    ``next_values`` [B, n] (one critic: DDPG's target; two: TD3's clipped double Q)."""
    next_value = next_values[0] if len(next_values) == 1 else torch.minimum(*next_values)
    return reward + gamma * (~terminated).unsqueeze(-1) * next_value


def smoothed(actions: torch.Tensor, noise: torch.Tensor, clip: float, low: torch.Tensor,
             half_range: torch.Tensor) -> torch.Tensor:
    """TD3's target policy smoothing: ``actions`` [..., A] plus ``noise`` (in half ranges) clipped to +-``clip``,
    then clipped to the Box ``low .. low + 2 half_range``."""
    out = actions + noise.clamp(-clip, clip) * half_range
    return torch.minimum(torch.maximum(out, low), low + 2 * half_range)


class DDPGActor:
    """Every trained group's actions at step t (see the module docstring)."""

    inputs = ("obs[H + t]", "starts")
    outputs = ("actions[t]",)

    def __init__(self, groups, actors: nn.ModuleDict, spec: EnvSpec, seed: torch.Tensor, std: float):
        self.groups, self.actors, self.spec, self.seed, self.std = groups, actors, spec, seed, std

    @torch.no_grad()
    def run(self, s: RolloutStorage, t: int, step: torch.Tensor, seed: torch.Tensor | None = None,
            deterministic: bool = False) -> None:
        for name, actor in self.actors.items():
            group = self.groups[name]
            x = s.policy_input(t, t + 1, group.agents, group.obs_dim)[0]          # [E, n, in]
            E, n = x.shape[:2]
            ids = global_agent_ids(E, n, self.spec.env_offset, self.spec.num_agents, group.agents.start, x.device)
            action = actor.act(x.reshape(E * n, -1), ids, step, self.seed if seed is None else seed, self.std,
                               deterministic)
            s.actions[t, :, group.agents, :actor.action_dims] = action.view(E, n, -1)


class DDPGLearner:
    """``q_updates`` updates from the replay buffer per iteration (see the module docstring)."""

    inputs = ("replay",)
    outputs = ("weights", "statistics")

    def __init__(self, algo: "MADDPG"):
        self.algo, self.params = algo, algo.params
        self.updates = 0
        device = algo.spec.device
        #: int64 [1]: the draw number of the next update (the replay rows' and the smoothing noise's key)
        self.draw = torch.zeros(1, dtype=torch.int64, device=device)

    def set_updates(self, updates: int) -> None:
        """Continue after ``updates`` updates (a loaded checkpoint)."""
        self.updates = updates
        self.draw.fill_(updates)

    def run(self, storage: RolloutStorage, ctx: LearnContext) -> torch.Tensor:
        p, replay, algo = self.params, ctx.replay, self.algo
        stats = torch.zeros(len(algo.trained), len(STAT_NAMES), device=self.draw.device)
        if ctx.batches.replay_transitions(replay) < p.q_batch:  # not enough transitions yet (all ranks): act only
            return stats
        with ctx.timer.phase("learn"):
            rows = ctx.batches.replay_rows(replay, algo.seed, self.draw, p.q_updates, p.q_batch)
            buffers = replay.buffers()
            totals = torch.zeros(len(algo.trained), len(DDPGTerms._fields), device=self.draw.device)
            for u in range(p.q_updates):
                batch = gather_rows(buffers, *(r[u] for r in rows))
                actor_due = (self.updates + 1) % p.policy_delay == 0
                totals += self._update(batch, self.draw + u, actor_due, ctx)
                self.updates += 1
            self.draw += p.q_updates
        stats[:, :len(DDPGTerms._fields)] = ctx.comm.all_reduce_(totals / p.q_updates)
        stats[:, -1].fill_(self.updates)
        return stats

    def _update(self, batch: dict, draw: torch.Tensor, actor_due: bool, ctx: LearnContext) -> torch.Tensor:
        algo, p = self.algo, self.params
        weight = batch["weight"]
        loss, terms = 0.0, []
        for name in algo.trained:
            group = algo.spec.groups[name]
            a, frames = group.agents, p.frame_stack
            actor, critics = algo.actors[name], algo.critics[name]
            x, x_next = (group_inputs(batch[k], a, group.obs_dim, frames) for k in ("inputs", "next_inputs"))
            seen, seen_next = (batch["state"], batch["next_state"]) if algo.central_critic else (x, x_next)
            taken = batch["actions"][:, a, :actor.action_dims]
            with torch.no_grad():
                next_actions = algo.target_actors[name](x_next)
                if p.target_noise > 0:
                    B, n = next_actions.shape[:2]
                    rows = torch.arange(B * n, device=x.device).view(B, n, 1)
                    u = uniform_ref(algo.seed, rows, draw, SMOOTHING_HEAD + actor.heads)
                    next_actions = smoothed(next_actions, p.target_noise * standard_normal(u), p.target_noise_clip,
                                            actor.low, actor.half_range)
                target = td3_target(batch["reward"][:, a], batch["terminated"], p.gamma,
                                    [c(seen_next, next_actions) for c in algo.target_critics[name]])
            q = [critic(seen, taken) for critic in critics]
            samples = q[0].numel()  # the global batch's rows x agents: ranks weight disjoint rows
            critic_loss = sum(((qk - target).square() * weight[:, None]).sum() for qk in q) / samples
            actor_loss = torch.zeros((), device=x.device)
            if actor_due:  # the first critic's value of the current policy's actions, its parameters held fixed
                fixed = {k: v.detach() for k, v in critics[0].named_parameters()}
                value = functional_call(critics[0], fixed, (seen, actor(x)))
                actor_loss = -(value * weight[:, None]).sum() / samples
            loss = loss + critic_loss + actor_loss
            q_taken = (q[0].detach() * weight[:, None]).sum() / samples
            terms.append(torch.stack(DDPGTerms(critic_loss.detach(), actor_loss.detach(), q_taken)))
        algo.step(loss, actor_due, ctx)
        return torch.stack(terms)


class MADDPG(Algorithm):
    """Multi-agent DDPG: deterministic actors, critics on the env's global state and every action of the group."""

    name = "maddpg"
    params_type = DDPGParams
    stat_names = STAT_NAMES
    uses_replay = True
    reads_global_state = True
    central_critic = True
    #: acts only in Box action spaces (the matrix test steps a continuous-action env for it)
    box_actions_only = True

    def __init__(self, config, spec: EnvSpec, trained: list[str], seed: int, generator: torch.Generator):
        p: DDPGParams = config.algo_params
        self.params, self.spec, self.trained = p, spec, trained
        if self.central_critic and spec.state_dim < 1:
            raise ValueError(f"{self.name}'s critics read the env's global state, and this env has none")
        groups = spec.groups
        self.actors = nn.ModuleDict({
            name: DeterministicActor(groups[name].obs_dim * p.frame_stack, groups[name].action_space, p.hidden,
                                     p.activation, generator) for name in trained}).to(spec.device)
        critic_count = 2 if p.twin_critics else 1

        def critic(name: str) -> Critic:
            group, actor = groups[name], self.actors[name]
            seen = spec.state_dim if self.central_critic else group.obs_dim * p.frame_stack
            return Critic(seen, actor.action_dims, group.agents.stop - group.agents.start, self.central_critic,
                          p.hidden, p.activation, generator)

        self.critics = nn.ModuleDict({name: nn.ModuleList([critic(name) for _ in range(critic_count)])
                                      for name in trained}).to(spec.device)
        self.target_actors = copy.deepcopy(self.actors).requires_grad_(False)
        self.target_critics = copy.deepcopy(self.critics).requires_grad_(False)
        self.nets = nn.ModuleDict({"actors": self.actors, "critics": self.critics,
                                   "target_actors": self.target_actors, "target_critics": self.target_critics})
        self.actor_optimizer = torch.optim.Adam(self.actors.parameters(), lr=p.actor_lr)
        self.optimizer = torch.optim.Adam(self.critics.parameters(), lr=p.lr)
        self.seed = seed_tensor(seed, spec.device)
        self.actor = DDPGActor(groups, self.actors, spec, self.seed, p.exploration_std)
        self.learner = DDPGLearner(self)

    def step(self, loss: torch.Tensor, actor_due: bool, ctx: LearnContext) -> None:
        """One backward pass of ``loss``, the gradients summed over ranks, each network's norm clipped, the
        critics' Adam step (and the actors', with the target update, when ``actor_due``)."""
        p = self.params
        trained = [self.actors[name] for name in self.trained]
        trained += [critic for name in self.trained for critic in self.critics[name]]
        self.actor_optimizer.zero_grad(set_to_none=False)
        self.optimizer.zero_grad(set_to_none=False)
        loss.backward()
        parameters = [q for net in trained for q in net.parameters()]
        for q in parameters:  # an actor whose update is not due has no gradient yet: zeros, summed as they are
            if q.grad is None:
                q.grad = torch.zeros_like(q)
        ctx.reduce_gradients([q.grad for q in parameters])
        if p.max_grad_norm > 0:
            for net in trained:
                nn.utils.clip_grad_norm_(net.parameters(), p.max_grad_norm)
        self.optimizer.step()
        if actor_due:
            self.actor_optimizer.step()
            with torch.no_grad():
                for online, target in ((self.actors, self.target_actors), (self.critics, self.target_critics)):
                    for q, q_target in zip(online.parameters(), target.parameters()):
                        q_target.lerp_(q, p.target_tau)

    def fields(self) -> dict[str, Field]:
        return {}  # the actions alone

    def weights(self) -> list[torch.Tensor]:
        # The actors read the actor networks; critics and targets are the learner's, kept equal on every
        # learner rank by the same updates.
        return [*self.actors.parameters()]

    def backends(self) -> dict[str, str]:
        return {"acting": "eager", "learning": "eager"}

    def state_dict(self) -> dict:
        return {"nets": self.nets.state_dict(), "optimizer": self.optimizer.state_dict(),
                "actor_optimizer": self.actor_optimizer.state_dict(), "updates": self.learner.updates}

    def load_state_dict(self, state: dict) -> None:
        self.nets.load_state_dict(state["nets"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.learner.set_updates(int(state["updates"]))


class IDDPG(MADDPG):
    """Independent DDPG: each agent's critic reads its own input and action."""

    name = "iddpg"
    reads_global_state = False
    central_critic = False


class MATD3(MADDPG):
    """MADDPG with TD3's twin critics, target policy smoothing and delayed actor updates (its defaults)."""

    name = "matd3"
    params_type = TD3Params


__all__ = ["DDPGActor", "DDPGLearner", "DDPGTerms", "IDDPG", "MADDPG", "MATD3", "STAT_NAMES", "smoothed",
           "td3_target"]
