"""PPO, A2C and MAPPO: the policy-gradient algorithm plug-ins (see :mod:`gpurl.algos.base`).

One :class:`~.nets.ActorCritic` per trained group, shared by the group's agents; ``recurrent="gru"``
puts a GRU after its actor's first layer (:mod:`.gru`), whose state is a carried rollout field.
- Actor fragment: :class:`~.acting.Acting` writes every group's actions and log-probs (and, for PPO,
  values; and a recurrent actor's next state) at slot t: fused Triton kernel, compiled or eager torch,
  all one definition, ``ActorCritic.act``. MAPPO then computes every group's values from the global
  state at t in one pass (:class:`~.central_critic.CentralCritic`, once per env).
- Learner fragment: :class:`~.ppo_learner.PPOLearner` (GAE, then epochs x minibatches of the PPO loss,
  every group's gradients summed by the distribution policy, each network's gradient norm clipped on
  its own, one Adam step).

A2C is PPO with one epoch, one minibatch and no clipping. MAPPO is PPO whose critics read the global
state (optionally with the agent's one-hot id) and whose actors have no critic.
"""
from __future__ import annotations

import torch
from torch import nn

from ..fusion.counter_rng import seed_tensor
from .acting import Acting
from .base import Algorithm, EnvSpec, Field
from .central_critic import CentralCritic, ValueNorm
from .flat import FlatParameters
from .flat_adam import FlatAdam
from .nets import ActorCritic
from .ppo_learner import PPOLearner, central_values, central_values_compiled
from .ppo_loss import STAT_NAMES
from .ppo_params import A2CParams, MAPPOParams, PPOParams


class PPOActor:
    """Every trained group's policy at step t (untrained groups are the trainer's); with central
    critics (MAPPO), their values of the global state at t in the same acting call. ``critic_pass``:
    ``(fn, compiled_fn, args)``, the critics' pass ``fn(*args, global_state)`` (:func:`central_values`)."""

    inputs = ("obs[H + t]", "starts", "hidden[t]", "global_state[t]")
    outputs = ("actions[t]", "log_prob[t]", "value[t]", "hidden[t + 1]")

    def __init__(self, groups, acting: Acting, recurrent: bool, critic_pass=None):
        self.groups, self.acting, self.recurrent, self.critic_pass = groups, acting, recurrent, critic_pass

    def run(self, s, t: int, step: torch.Tensor, seed: torch.Tensor | None = None, deterministic: bool = False) -> None:
        inputs, outputs, carried = {}, {}, {}
        for name in self.acting.policies:
            group = self.groups[name]
            a = group.agents
            inputs[name] = s.frame_views(t, t + 1, a, group.obs_dim)
            outputs[name] = (s.actions[t, :, a], s.log_prob[t, :, a],
                             None if self.critic_pass is not None else s.value[t, :, a])
            if self.recurrent:
                carried[name] = (s.hidden[t, :, a], s.starts[s.history + t], s.hidden[t + 1, :, a])
        central = None
        if self.critic_pass is not None:  # MAPPO: the critics of the global state, in the acting call
            fn, compiled_fn, args = self.critic_pass
            targets = [s.value[t, :, self.groups[name].agents] for name in self.acting.policies]
            central = (fn, compiled_fn, (*args, s.global_state[t]), targets)
        self.acting(inputs, step, outputs, seed, hidden=carried or None, deterministic=deterministic,
                    central=central)


class PPO(Algorithm):
    """Proximal policy optimisation (clipped surrogate, GAE), one actor-critic per trained group."""

    name = "ppo"
    stat_names = STAT_NAMES
    params_type = PPOParams
    graph_safe_update = True
    #: MAPPO: critics on the global state instead of each policy's own
    central_critic = False

    def __init__(self, config, spec: EnvSpec, trained: list[str], seed: int, generator: torch.Generator):
        p: PPOParams = config.algo_params
        self.params, self.spec, self.trained = p, spec, trained
        groups = spec.groups
        self.recurrent = p.recurrent == "gru"
        self.nets = nn.ModuleDict({
            name: ActorCritic(groups[name].obs_dim * p.frame_stack, groups[name].action_space, p.hidden,
                              p.activation, p.norm_obs, generator, recurrent=self.recurrent,
                              critic=not self.central_critic)
            for name in trained
        }).to(spec.device)
        self.critics = self.value_norms = None
        if self.central_critic:
            if spec.state_dim < 1:
                raise ValueError(f"{self.name} needs the env's global state, and this env has none (global_state_dim 0)")
            self.critics = nn.ModuleDict({
                name: CentralCritic(spec.state_dim, groups[name].agents.stop - groups[name].agents.start,
                                    p.hidden, p.activation, p.critic_agent_id, p.norm_obs, generator)
                for name in trained}).to(spec.device)
            if p.value_norm:
                self.value_norms = nn.ModuleDict({name: ValueNorm() for name in trained}).to(spec.device)
        # Every trained network's parameters as views of one flat parameter; each clipped on its own.
        self.trainable = nn.ModuleDict({**self.nets, **{f"critic:{k}": c for k, c in (self.critics or {}).items()}})
        self.flat = FlatParameters(self.trainable)
        # Adam on the one flat parameter, its state and learning rate on the device.
        self.optimizer = FlatAdam(self.flat.data, p.lr, eps=1e-5)
        seed_key = seed_tensor(seed, spec.device)
        self.acting = Acting({name: self.nets[name] for name in trained},
                             {name: groups[name].agents.start for name in trained}, p.policy_backend,
                             seed_key, spec.env_offset, spec.num_agents)
        self.learning_backend = "eager" if p.learner_backend == "eager" else "compiled"
        critic_pass = None
        if self.central_critic:
            critics = list(self.critics.values())
            norms = [None if self.value_norms is None else self.value_norms[k] for k in trained]
            standalone = central_values if p.policy_backend == "eager" else central_values_compiled
            critic_pass = (central_values, standalone, (critics, norms))
        self.actor = PPOActor(groups, self.acting, self.recurrent, critic_pass)
        self.learner = PPOLearner(p, config.iters, groups, self.nets, self.trainable, self.flat, self.optimizer,
                                  self.learning_backend, seed_key, self.critics, self.value_norms)

    def fields(self) -> dict[str, Field]:
        fields = {"log_prob": Field(), "value": Field(extra_steps=1)}
        if self.recurrent:  # hidden[t]: the state entering step t (before an episode start zeroes it)
            fields["hidden"] = Field(shape=(self.params.hidden[0],), extra_steps=1, carried=True)
        return fields

    def _modules(self) -> nn.ModuleDict:
        return nn.ModuleDict({"nets": self.nets, **({"critics": self.critics} if self.critics is not None else {}),
                              **({"value_norms": self.value_norms} if self.value_norms is not None else {})})

    def weights(self) -> list[torch.Tensor]:
        # The parameters are views of the flat one; then every statistic the actors read.
        return [self.flat.param, *self._modules().buffers()]

    def sync_actors(self) -> None:
        self.acting.sync()

    def backends(self) -> dict[str, str]:
        acting = sorted(set(self.acting.backends.values()))
        return {"acting": "/".join(acting) or "none", "learning": self.learning_backend}

    def state_dict(self) -> dict:
        return {"nets": self._modules().state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self._modules().load_state_dict(state["nets"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.sync_actors()


class A2C(PPO):
    """Advantage actor-critic: PPO's loss with one epoch, one minibatch and no clipping (its defaults)."""

    name = "a2c"
    params_type = A2CParams


class MAPPO(PPO):
    """Multi-agent PPO: each group's critic reads the env's global state (with the agent's one-hot id
    when ``critic_agent_id``), values optionally normalised (``value_norm``); the actors are PPO's."""

    name = "mappo"
    params_type = MAPPOParams
    central_critic = True
    reads_global_state = True


__all__ = ["A2C", "MAPPO", "PPO"]
