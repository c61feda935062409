"""What JaxMARL's PPO baselines for MPE share, as ``bench/peers_lib``'s re-implementations of them use it:
agent groups, the annealed optimiser, GAE and the episode returns of a rollout step. (Part of a library:
bench/learning_parity.py prints the RESULT line.)
"""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import optax


def agent_groups(env) -> dict[str, list[str]]:
    """JaxMARL's agent names by group: ``adversary_0`` -> ``adversary`` (mpe2's prefixes)."""
    groups: dict[str, list[str]] = {}
    for name in env.agents:
        groups.setdefault(re.sub(r"_\d+$", "", name), []).append(name)
    return groups


def optimiser(c: dict, updates: int):
    """JaxMARL's: a global grad-norm clip, then Adam(eps=1e-5) whose rate falls linearly per update."""
    steps_per_update = c["NUM_MINIBATCHES"] * c["UPDATE_EPOCHS"]

    def lr_at(count):
        return c["LR"] * (1.0 - (count // steps_per_update) / updates) if c["ANNEAL_LR"] else c["LR"]

    return optax.chain(optax.clip_by_global_norm(c["MAX_GRAD_NORM"]), optax.adam(learning_rate=lr_at, eps=1e-5))


def gae(c: dict, reward, value, done, last_value):
    """Advantages [T, ...] where every ``done`` (the time limit too, as JaxMARL's baselines have it) stops the
    bootstrap; ``done[t]`` marks the step that ended an episode."""

    def back(carry, x):
        adv, next_value = carry
        r, v, d = x
        delta = r + c["GAMMA"] * next_value * (1 - d) - v
        adv = delta + c["GAMMA"] * c["GAE_LAMBDA"] * (1 - d) * adv
        return (adv, v), adv

    return jax.lax.scan(back, (jnp.zeros_like(last_value), last_value), (reward, value, done), reverse=True)[1]


def clipped_value_loss(c: dict, value, old_value, target):
    """JaxMARL's value loss: the larger of the plain and the clipped squared error, halved."""
    clipped = old_value + jnp.clip(value - old_value, -c["CLIP_EPS"], c["CLIP_EPS"])
    return 0.5 * jnp.maximum(jnp.square(value - target), jnp.square(clipped - target)).mean()


def clipped_surrogate(c: dict, logits, action, old_logp, adv):
    """The actor's loss (advantages normalised in the minibatch) and the policy's mean entropy."""
    logp_all = jax.nn.log_softmax(logits)
    ratio = jnp.exp(jnp.take_along_axis(logp_all, action[..., None], -1)[..., 0] - old_logp)
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg = -jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - c["CLIP_EPS"], 1 + c["CLIP_EPS"]) * adv).mean()
    return pg, -(jnp.exp(logp_all) * logp_all).sum(-1).mean()


def sample(key, logits):
    """An action per row of ``logits`` and its log-probability."""
    a = jax.random.categorical(key, logits)
    return a, jnp.take_along_axis(jax.nn.log_softmax(logits), a[..., None], -1)[..., 0]


def episode_step(groups: dict, running: dict, reward: dict, done_all):
    """Add a step's rewards to each env's running returns; for the envs whose episode ended, the sum over them of
    the per-agent return averaged over each group, and their count. Returns ``(running, stats)`` with
    ``stats[g] = (sum, count)``."""
    ended = done_all.astype(jnp.float32)
    stats, out = {}, {}
    for g, names in groups.items():
        total = running[g] + jnp.stack([reward[a] for a in names], 1)
        stats[g] = ((total.mean(1) * ended).sum(), ended.sum())
        out[g] = total * (1 - ended[:, None])
    return out, stats


def curve_of(stats_per_update: dict) -> dict:
    """``{return_sum/g, episodes/g}`` [U] from the per-step ``stats`` a whole run's scan stacked [U, T]."""
    return {**{f"return_sum/{g}": s.sum(1) for g, (s, _) in stats_per_update.items()},
            **{f"episodes/{g}": n.sum(1) for g, (_, n) in stats_per_update.items()}}


def seeded(compiled, updates: int, steps_per_update: int):
    """``train(seed) -> curve``: the jitted whole run (compiled once, for every seed) called on the seed's key,
    with ``env_steps`` [U] at the end of each update added to its curve."""

    def train(seed: int) -> dict:
        curve = {k: np.asarray(v) for k, v in compiled(jax.random.PRNGKey(seed)).items()}
        curve["env_steps"] = np.arange(1, updates + 1) * steps_per_update
        return curve

    return train
