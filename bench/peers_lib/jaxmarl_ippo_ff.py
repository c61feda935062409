"""JaxMARL's IPPO baseline for MPE (``baselines/IPPO/ippo_ff_mpe.py`` with ``config/ippo_ff_mpe.yaml``),
re-implemented as a library function: JaxMARL ships its baselines as scripts beside the package (hydra,
wandb), not in the ``jaxmarl`` wheel. (Part of a library: bench/learning_parity.py prints the RESULT line.)

What is JaxMARL's, kept as it is there (read from JaxMARL at commit c793d09):

- the config: ``JAXMARL_IPPO_FF`` below (16 envs x 128 steps per update, lr 2.5e-4 annealed linearly per
  update, gamma 0.99, lambda 0.95, 4 epochs x 4 minibatches, clip 0.2, ent 0.01, vf 0.5, grad-norm 0.5, tanh);
- the network: separate actor and critic MLPs 64-64, orthogonal init (sqrt(2), actor head 0.01, critic head
  1), zero biases, no observation normalisation;
- the update: GAE where every ``done`` (the time limit included) ends the bootstrap, advantages normalised per
  minibatch, the clipped surrogate, the value loss clipped by ``CLIP_EPS`` around the rollout's values,
  Adam(eps=1e-5) after a global grad-norm clip, minibatches drawn by one permutation per epoch;
- the env: JaxMARL's own MPE port (auto-reset inside ``env.step``), built by :func:`.mpe_suite.make_jaxmarl`
  with gpurl's episode length (JaxMARL's ``max_steps`` counts one step more, see there).

What differs, and why: JaxMARL shares one network across *all* agents, padding observations to the widest;
that only runs when every agent has the same action space (its ``pad`` call also lacks an argument, so
uneven observations stop it). Here each group of alike agents (``speaker``, ``listener``; ``adversary``,
``agent``) has its own network and optimiser, trained exactly as JaxMARL trains its one; on simple_spread
(one group) this is JaxMARL's baseline unchanged. The return is measured as gpurl measures it: each finished
episode's undiscounted sum of one agent's rewards, averaged over the group's agents (JaxMARL's
``MPELogWrapper`` logs that sum times the number of agents).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from .jax_ippo import _mlp, _mlp_init
from .jaxmarl_common import (agent_groups, clipped_surrogate, clipped_value_loss, curve_of, episode_step, gae,
                             optimiser, sample, seeded)

JAXMARL_IPPO_FF = {"LR": 2.5e-4, "NUM_ENVS": 16, "NUM_STEPS": 128, "UPDATE_EPOCHS": 4, "NUM_MINIBATCHES": 4,
                   "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01, "VF_COEF": 0.5,
                   "MAX_GRAD_NORM": 0.5, "ACTIVATION": "tanh", "ANNEAL_LR": True}


def make_train(env, total_steps: int, config: dict | None = None):
    """``train(seed) -> curve``: one jitted function for the whole run, as JaxMARL runs it (compiled once for
    every seed). ``curve``: ``env_steps`` [U] at the end of each update and, per group ``g``, ``return_sum/g``
    and ``episodes/g`` [U] (:func:`.jaxmarl_common.episode_step`)."""
    c = {**JAXMARL_IPPO_FF, **(config or {})}
    E, T, M = c["NUM_ENVS"], c["NUM_STEPS"], c["NUM_MINIBATCHES"]
    updates = int(total_steps) // T // E
    groups = agent_groups(env)
    act = {"tanh": jnp.tanh, "relu": jax.nn.relu}[c["ACTIVATION"]]
    dims = {g: (env.observation_space(a[0]).shape[0], env.action_space(a[0]).n) for g, a in groups.items()}
    tx = optimiser(c, updates)

    def forward(params, x):
        return _mlp(params["actor"], x, act), _mlp(params["critic"], x, act)[..., 0]

    def loss_fn(params, batch):
        logits, value = forward(params, batch["obs"])
        pg, entropy = clipped_surrogate(c, logits, batch["action"], batch["logp"], batch["adv"])
        return pg + c["VF_COEF"] * clipped_value_loss(c, value, batch["value"], batch["target"]) - c["ENT_COEF"] * entropy

    def update_group(state, batch, key):
        """Epochs x minibatches over one group's rollout ``batch`` (leaves [T, E, n, ...]), its samples
        permuted once per epoch."""
        flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[3:]), batch)
        size = flat["adv"].shape[0]

        def epoch(carry, k):
            def minibatch(s, mb):
                updates_, opt = tx.update(jax.grad(loss_fn)(s[0], mb), s[1], s[0])
                return (optax.apply_updates(s[0], updates_), opt), None

            perm = jax.random.permutation(k, size)
            mbs = jax.tree.map(lambda x: x[perm].reshape((M, -1) + x.shape[1:]), flat)
            return jax.lax.scan(minibatch, carry, mbs)[0], None

        return jax.lax.scan(epoch, state, jax.random.split(key, c["UPDATE_EPOCHS"]))[0]

    def group_obs(obs):  # {agent: [E, d]} -> {group: [E, n, d]}
        return {g: jnp.stack([obs[a] for a in names], 1) for g, names in groups.items()}

    def whole_run(key):
        key, k_reset, k_init = jax.random.split(key, 3)
        obs, env_state = jax.vmap(env.reset)(jax.random.split(k_reset, E))
        states = {}
        for g, k in zip(groups, jax.random.split(k_init, len(groups))):
            (in_dim, n_act), (ka, kc) = dims[g], jax.random.split(k)
            params = {"actor": _mlp_init(ka, in_dim, (64, 64), n_act, 0.01),
                      "critic": _mlp_init(kc, in_dim, (64, 64), 1, 1.0)}
            states[g] = (params, tx.init(params))
        running = {g: jnp.zeros((E, len(names))) for g, names in groups.items()}

        def env_step(carry, _):
            states, env_state, obs, running, key = carry
            key, k_act, k_env = jax.random.split(key, 3)
            gobs, out, actions = group_obs(obs), {}, {}
            for g, kg in zip(groups, jax.random.split(k_act, len(groups))):
                logits, value = forward(states[g][0], gobs[g])
                a, logp = sample(kg, logits)
                out[g] = {"obs": gobs[g], "action": a, "logp": logp, "value": value}
                actions.update({name: a[:, j] for j, name in enumerate(groups[g])})
            obs, env_state, reward, done, _ = jax.vmap(env.step)(jax.random.split(k_env, E), env_state, actions)
            for g, names in groups.items():
                out[g]["reward"] = jnp.stack([reward[a] for a in names], 1)
                out[g]["done"] = jnp.stack([done[a] for a in names], 1).astype(jnp.float32)
            running, stats = episode_step(groups, running, reward, done["__all__"])
            return (states, env_state, obs, running, key), (out, stats)

        def update(carry, _):
            carry, (traj, stats) = jax.lax.scan(env_step, carry, None, T)
            states, env_state, obs, running, key = carry
            key, k_update = jax.random.split(key)
            gobs, new_states = group_obs(obs), {}
            for g, kg in zip(groups, jax.random.split(k_update, len(groups))):
                _, last_value = forward(states[g][0], gobs[g])
                adv = gae(c, traj[g]["reward"], traj[g]["value"], traj[g]["done"], last_value)
                batch = {**{k: traj[g][k] for k in ("obs", "action", "logp", "value")},
                         "adv": adv, "target": adv + traj[g]["value"]}
                new_states[g] = update_group(states[g], batch, kg)
            return (new_states, env_state, obs, running, key), stats

        return curve_of(jax.lax.scan(update, (states, env_state, obs, running, key), None, updates)[1])

    return seeded(jax.jit(whole_run), updates, T * E)
