"""JaxMARL's MAPPO baseline for MPE (``baselines/MAPPO/mappo_rnn_mpe.py`` with
``config/mappo_homogenous_rnn_mpe.yaml``), re-implemented as a library function (JaxMARL ships its baselines as
scripts beside the package, not in the ``jaxmarl`` wheel). (Part of a library: bench/learning_parity.py prints
the RESULT line.)

What is JaxMARL's, kept as it is there (read from JaxMARL at commit c793d09):

- the config: ``JAXMARL_MAPPO_RNN`` below (16 envs x 128 steps per update, lr 2e-3 annealed linearly per
  update, gamma 0.99, lambda 0.95, 4 epochs x 4 minibatches, clip 0.2, ent 0.01, vf 0.5, grad-norm 0.5);
- the networks: an actor and a critic, each Dense 128 (orthogonal sqrt(2)) -> ReLU -> GRU 128 (flax's
  ``GRUCell``, its state zeroed where the previous step ended the agent's episode) -> Dense 128 (orthogonal
  2) -> ReLU -> head (actor: orthogonal 0.01 logits; critic: orthogonal 1 value); the critic reads the world
  state, every agent's observation concatenated in agent order (no agent id);
- the update: GAE stopped by the env's episode end (the time limit included), separate Adam(eps=1e-5)
  optimisers of actor and critic after their own grad-norm clips, advantages normalised per minibatch, the
  value loss clipped by ``CLIP_EPS`` around the rollout's values, minibatches of whole rollout sequences of
  actors (one permutation of the actors per epoch), each replayed from its state at the rollout's start;
- the env: JaxMARL's own MPE port, as in :mod:`.jaxmarl_ippo_ff`.

What differs, and why: JaxMARL shares one actor and one critic across all agents, which needs one action
space for all of them and, with one critic on one world state, one reward; here each group of alike agents
has its own actor and critic (as in :mod:`.jaxmarl_ippo_ff`), trained exactly as JaxMARL trains its pair. On
simple_spread (one group) this is JaxMARL's baseline unchanged. The return is measured as gpurl measures it.
"""
from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.linen.initializers import constant, orthogonal

from .jaxmarl_common import (agent_groups, clipped_surrogate, clipped_value_loss, curve_of, episode_step, gae,
                             optimiser, sample, seeded)

JAXMARL_MAPPO_RNN = {"LR": 2e-3, "NUM_ENVS": 16, "NUM_STEPS": 128, "FC_DIM_SIZE": 128, "GRU_HIDDEN_DIM": 128,
                     "UPDATE_EPOCHS": 4, "NUM_MINIBATCHES": 4, "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2,
                     "ENT_COEF": 0.01, "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5, "ANNEAL_LR": True}


class _ScannedGRU(nn.Module):
    """A GRU over a sequence [T, B, F] with per-step resets [T, B] (the state zeroed before the step)."""

    @functools.partial(nn.scan, variable_broadcast="params", in_axes=0, out_axes=0, split_rngs={"params": False})
    @nn.compact
    def __call__(self, carry, x):
        inputs, resets = x
        carry = jnp.where(resets[:, None], jnp.zeros_like(carry), carry)
        return nn.GRUCell(features=inputs.shape[-1])(carry, inputs)


class _RecurrentHead(nn.Module):
    """Dense -> ReLU -> GRU -> Dense -> ReLU -> head: JaxMARL's ActorRNN (``out`` logits) and CriticRNN
    (``out`` = 1)."""
    fc: int
    hidden: int
    out: int
    out_gain: float

    @nn.compact
    def __call__(self, state, x):
        inputs, resets = x
        h = nn.relu(nn.Dense(self.fc, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(inputs))
        state, h = _ScannedGRU()(state, (h, resets))
        h = nn.relu(nn.Dense(self.hidden, kernel_init=orthogonal(2), bias_init=constant(0.0))(h))
        return state, nn.Dense(self.out, kernel_init=orthogonal(self.out_gain), bias_init=constant(0.0))(h)


def make_train(env, total_steps: int, config: dict | None = None):
    """``train(seed) -> curve`` as :func:`.jaxmarl_ippo_ff.make_train`."""
    c = {**JAXMARL_MAPPO_RNN, **(config or {})}
    E, T, M, H = c["NUM_ENVS"], c["NUM_STEPS"], c["NUM_MINIBATCHES"], c["GRU_HIDDEN_DIM"]
    updates = int(total_steps) // T // E
    groups = agent_groups(env)
    n_act = {g: env.action_space(a[0]).n for g, a in groups.items()}
    world_dim = sum(env.observation_space(a).shape[0] for a in env.agents)
    actors = {g: _RecurrentHead(c["FC_DIM_SIZE"], H, n, 0.01) for g, n in n_act.items()}
    critic = _RecurrentHead(c["FC_DIM_SIZE"], H, 1, 1.0)
    tx = optimiser(c, updates)

    def per_actor(values, names):  # {agent: [E, ...]} -> [E * n, ...], env-major
        stacked = jnp.stack([values[a] for a in names], 1)
        return stacked.reshape((E * len(names),) + stacked.shape[2:])

    def world_state(obs, n):  # every agent's observation in agent order, once per actor: [E * n, world_dim]
        return jnp.repeat(jnp.concatenate([obs[a] for a in env.agents], -1), n, axis=0)

    def losses(g):
        def actor_loss(params, init, mb):
            _, logits = actors[g].apply(params, init, (mb["obs"], mb["reset"]))
            pg, entropy = clipped_surrogate(c, logits, mb["action"], mb["logp"], mb["adv"])
            return pg - c["ENT_COEF"] * entropy

        def critic_loss(params, init, mb):
            _, value = critic.apply(params, init, (mb["world"], mb["reset"]))
            return c["VF_COEF"] * clipped_value_loss(c, value[..., 0], mb["value"], mb["target"])

        return actor_loss, critic_loss

    def update_group(g, state, init, batch, key):
        """Epochs x minibatches of whole sequences: ``batch`` leaves [T, A, ...], ``init`` the actors' states
        [A, H] (actor's, critic's) at the rollout's start."""
        actor_loss, critic_loss = losses(g)
        A = batch["adv"].shape[1]

        def minibatch(s, mb):
            (pa, oa), (pc, oc) = s
            ua, oa = tx.update(jax.grad(actor_loss)(pa, mb["init_actor"], mb), oa, pa)
            uc, oc = tx.update(jax.grad(critic_loss)(pc, mb["init_critic"], mb), oc, pc)
            return ((optax.apply_updates(pa, ua), oa), (optax.apply_updates(pc, uc), oc)), None

        def epoch(s, k):
            perm = jax.random.permutation(k, A)
            seq = jax.tree.map(lambda x: x[:, perm].reshape((T, M, -1) + x.shape[2:]).swapaxes(0, 1), batch)
            seq["init_actor"], seq["init_critic"] = (x[perm].reshape((M, -1, H)) for x in init)
            return jax.lax.scan(minibatch, s, seq)[0], None

        return jax.lax.scan(epoch, state, jax.random.split(key, c["UPDATE_EPOCHS"]))[0]

    def whole_run(key):
        key, k_reset, k_init = jax.random.split(key, 3)
        obs, env_state = jax.vmap(env.reset)(jax.random.split(k_reset, E))
        states, hidden, last_done = {}, {}, {}
        for g, k in zip(groups, jax.random.split(k_init, len(groups))):
            ka, kc = jax.random.split(k)
            d = env.observation_space(groups[g][0]).shape[0]
            pa = actors[g].init(ka, jnp.zeros((E, H)), (jnp.zeros((1, E, d)), jnp.zeros((1, E), bool)))
            pc = critic.init(kc, jnp.zeros((E, H)), (jnp.zeros((1, E, world_dim)), jnp.zeros((1, E), bool)))
            states[g] = ((pa, tx.init(pa)), (pc, tx.init(pc)))
            A = E * len(groups[g])
            hidden[g] = (jnp.zeros((A, H)), jnp.zeros((A, H)))
            last_done[g] = jnp.zeros((A,), bool)
        running = {g: jnp.zeros((E, len(names))) for g, names in groups.items()}

        def env_step(carry, _):
            states, env_state, obs, last_done, hidden, running, key = carry
            key, k_act, k_env = jax.random.split(key, 3)
            out, actions, new_hidden = {}, {}, {}
            for g, kg in zip(groups, jax.random.split(k_act, len(groups))):
                names = groups[g]
                x, w, reset = per_actor(obs, names), world_state(obs, len(names)), last_done[g][None]
                ha, logits = actors[g].apply(states[g][0][0], hidden[g][0], (x[None], reset))
                hc, value = critic.apply(states[g][1][0], hidden[g][1], (w[None], reset))
                a, logp = sample(kg, logits[0])
                new_hidden[g] = (ha, hc)
                out[g] = {"obs": x, "world": w, "reset": last_done[g], "action": a, "logp": logp, "value": value[0, :, 0]}
                actions.update({name: a.reshape(E, len(names))[:, j] for j, name in enumerate(names)})
            obs, env_state, reward, done, _ = jax.vmap(env.step)(jax.random.split(k_env, E), env_state, actions)
            new_done = {}
            for g, names in groups.items():
                out[g]["reward"] = per_actor(reward, names)
                out[g]["episode_end"] = jnp.repeat(done["__all__"], len(names)).astype(jnp.float32)
                new_done[g] = per_actor(done, names)
            running, stats = episode_step(groups, running, reward, done["__all__"])
            return (states, env_state, obs, new_done, new_hidden, running, key), (out, stats)

        def update(carry, _):
            start_hidden = carry[4]
            carry, (traj, stats) = jax.lax.scan(env_step, carry, None, T)
            states, env_state, obs, last_done, hidden, running, key = carry
            key, k_update = jax.random.split(key)
            new_states = {}
            for g, kg in zip(groups, jax.random.split(k_update, len(groups))):
                w = world_state(obs, len(groups[g]))
                _, last_value = critic.apply(states[g][1][0], hidden[g][1], (w[None], last_done[g][None]))
                adv = gae(c, traj[g]["reward"], traj[g]["value"], traj[g]["episode_end"], last_value[0, :, 0])
                batch = {**{k: traj[g][k] for k in ("obs", "world", "reset", "action", "logp", "value")},
                         "adv": adv, "target": adv + traj[g]["value"]}
                new_states[g] = update_group(g, states[g], start_hidden[g], batch, kg)
            return (new_states, env_state, obs, last_done, hidden, running, key), stats

        carry = (states, env_state, obs, last_done, hidden, running, key)
        return curve_of(jax.lax.scan(update, carry, None, updates)[1])

    return seeded(jax.jit(whole_run), updates, T * E)
