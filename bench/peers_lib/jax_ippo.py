"""The JAX peer of gpurl's PPO: IPPO on JaxMARL's ``MPE_simple_tag_v3``, PureJaxRL style.
(Part of a library: bench/peers.py prints the RESULT line.)

One jitted function per iteration (rollout ``lax.scan`` over T steps of ``vmap(env.step)`` + policy,
GAE, epochs x minibatches of Adam steps, observation-normaliser update), called once per iteration
from Python so gpurl and this baseline can alternate iteration by iteration (see ``bench/peers.py``).

It is gpurl's algorithm with gpurl's hyper-parameters, read from the same :class:`TrainConfig`:
one actor-critic per agent group (adversary, good) shared by the group's agents (JaxMARL's IPPO
shares one network across all agents; gpurl has one per group, so this baseline does too); separate
actor and critic MLPs with orthogonal init (gains sqrt(2), actor head 0.01, critic head 1);
running observation normalisation (clip 10, updated after each update from the rollout's inputs);
frame stacking; GAE(lambda) that bootstraps time-limit truncations from the value of the final
observation (JaxMARL's baselines treat the time limit as terminal; gpurl does not, so neither does
this); per group and minibatch: advantage normalisation, clipped surrogate, clipped value loss,
entropy bonus; one Adam(eps=1e-5) step per minibatch over the sum of the groups' losses with each
group's gradient norm clipped on its own; the learning rate annealed linearly per iteration.
Differences that remain: the random streams (action sampling, minibatch shuffles, env resets) and
JaxMARL's env itself (obstacles reset in U(-1, 1)^2 instead of U(-0.9, 0.9)^2).
"""
from __future__ import annotations

import math
import time
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import optax

GROUPS = ("adversary", "good")


def make_jaxmarl_tag(num_adversaries: int, num_good: int, num_obstacles: int, max_cycles: int = 25):
    """JaxMARL's simple_tag with gpurl's episode length (:func:`.mpe_suite.make_jaxmarl`: JaxMARL ends an
    episode when ``step >= max_steps`` *before* incrementing, i.e. after max_steps + 1 steps, so it is
    built with max_steps = max_cycles - 1)."""
    from .mpe_suite import make_jaxmarl, run_config

    return make_jaxmarl(run_config("simple_tag", num_adversaries=num_adversaries, num_good=num_good,
                                   num_obstacles=num_obstacles, max_cycles=max_cycles))


# ---- networks (plain pytrees: no framework between the benchmark and XLA) ------------------------------


def _dense(key, fan_in: int, fan_out: int, gain: float) -> dict:
    w = jax.nn.initializers.orthogonal(gain)(key, (fan_in, fan_out), jnp.float32)
    return {"w": w, "b": jnp.zeros((fan_out,), jnp.float32)}


def _mlp_init(key, in_dim: int, widths, out_dim: int, out_gain: float) -> list:
    dims = [in_dim, *widths]
    keys = jax.random.split(key, len(dims))
    layers = [_dense(k, a, b, math.sqrt(2.0)) for k, a, b in zip(keys[:-1], dims[:-1], dims[1:])]
    return layers + [_dense(keys[-1], dims[-1], out_dim, out_gain)]


def _mlp(layers: list, x, act):
    for layer in layers[:-1]:
        x = act(x @ layer["w"] + layer["b"])
    return x @ layers[-1]["w"] + layers[-1]["b"]


def init_group(key, in_dim: int, num_actions: int, widths) -> tuple[dict, dict]:
    """``(params, obs_norm)`` of one group's actor-critic."""
    ka, kc = jax.random.split(key)
    params = {"actor": _mlp_init(ka, in_dim, widths, num_actions, 0.01),
              "critic": _mlp_init(kc, in_dim, widths, 1, 1.0)}
    norm = {"mean": jnp.zeros((in_dim,), jnp.float32), "var": jnp.ones((in_dim,), jnp.float32),
            "count": jnp.asarray(1e-4, jnp.float32)}
    return params, norm


def _normalize(norm: dict | None, x):
    if norm is None:
        return x
    return jnp.clip((x - norm["mean"]) * jax.lax.rsqrt(norm["var"] + 1e-8), -10.0, 10.0)


def _norm_update(norm: dict, x):
    """Parallel Welford merge of the rows of ``x`` [B, dim] (as gpurl's RunningNorm.update)."""
    n = jnp.asarray(x.shape[0], jnp.float32)
    batch_mean = x.mean(0)
    batch_var = jnp.maximum((x * x).mean(0) - batch_mean * batch_mean, 0.0)
    total = norm["count"] + n
    delta = batch_mean - norm["mean"]
    mean = norm["mean"] + delta * (n / total)
    var = (norm["var"] * norm["count"] + batch_var * n + delta * delta * (norm["count"] * n / total)) / total
    return {"mean": mean, "var": var, "count": total}


# ---- the trainer ------------------------------------------------------------------------------------------


class JaxIPPO:
    """``JaxIPPO(cfg, env)``; ``iterate()`` runs one iteration and returns its episode statistics
    (``return/adversary``, ``return/good``, ``episodes``; empty when no episode ended)."""

    def __init__(self, cfg, env):
        cfg = SimpleNamespace(**cfg.flat())  # the run's fields and PPO's parameters by their flag names
        self.cfg, self.env = cfg, env
        self.A, self.G = env.num_adversaries, env.num_good_agents
        self.N = self.A + self.G
        self.slices = {"adversary": slice(0, self.A), "good": slice(self.A, self.N)}
        key = jax.random.PRNGKey(cfg.seed)
        key, k_reset = jax.random.split(key)
        obs, state = jax.vmap(env.reset)(jax.random.split(k_reset, cfg.num_envs))
        group_obs = self._group_obs(obs)
        self.obs_dims = {g: group_obs[g].shape[-1] for g in GROUPS}
        K = cfg.frame_stack
        self.in_dims = {g: self.obs_dims[g] * K for g in GROUPS}
        params, norms = {}, {}
        for g, k in zip(GROUPS, jax.random.split(jax.random.PRNGKey(cfg.seed + 7), len(GROUPS))):
            params[g], norms[g] = init_group(k, self.in_dims[g], 5, cfg.hidden)
        self.tx = optax.scale_by_adam(eps=1e-5)
        inputs = {g: self._stack(group_obs[g], None, None) for g in GROUPS}
        E = cfg.num_envs
        self.carry = dict(params=params, norms=norms, opt=self.tx.init(params), env_state=state, inputs=inputs,
                          running=jnp.zeros((E, len(GROUPS)), jnp.float32), key=key)
        self.iteration = 0
        self.env_steps = 0
        self._iterate = jax.jit(self._iteration)
        self.act = {"tanh": jnp.tanh, "relu": jax.nn.relu}[cfg.activation]

    # -- helpers --

    def _group_obs(self, obs: dict) -> dict:
        """JaxMARL's per-agent dict -> {group: [E, n, obs_dim]}."""
        out = {}
        for g, agents in (("adversary", self.env.adversaries), ("good", self.env.good_agents)):
            out[g] = jnp.stack([obs[a] for a in agents], axis=1).astype(jnp.float32)
        return out

    def _stack(self, obs, prev_inputs, started):
        """Policy input [E, n, obs_dim * K]: the new obs, then the K - 1 previous frames of ``prev_inputs``,
        zeroed in envs where an episode started with ``obs`` (``started`` bool [E])."""
        K = self.cfg.frame_stack
        if K == 1:
            return obs
        D = obs.shape[-1]
        if prev_inputs is None:
            old = jnp.zeros(obs.shape[:-1] + (D * (K - 1),), jnp.float32)
        else:
            old = jnp.where(started[:, None, None], 0.0, prev_inputs[..., :D * (K - 1)])
        return jnp.concatenate([obs, old], -1)

    def _final_inputs(self, final_obs, prev_inputs):
        K = self.cfg.frame_stack
        if K == 1:
            return final_obs
        D = final_obs.shape[-1]
        return jnp.concatenate([final_obs, prev_inputs[..., :D * (K - 1)]], -1)

    def _policy(self, params, norm, x):
        x = _normalize(norm if self.cfg.norm_obs else None, x)
        return _mlp(params["actor"], x, self.act), _mlp(params["critic"], x, self.act)[..., 0]

    def _value(self, params, norm, x):
        x = _normalize(norm if self.cfg.norm_obs else None, x)
        return _mlp(params["critic"], x, self.act)[..., 0]

    # -- one iteration, jitted --

    def _iteration(self, carry, lr):
        cfg, env = self.cfg, self.env
        params, norms = carry["params"], carry["norms"]
        E = cfg.num_envs

        def step(c, _):
            key, k_act, k_env, k_reset = jax.random.split(c["key"], 4)
            actions, logps, values = {}, {}, {}
            for g, kg in zip(GROUPS, jax.random.split(k_act, len(GROUPS))):
                logits, value = self._policy(params[g], norms[g], c["inputs"][g])
                a = jax.random.categorical(kg, logits)
                actions[g] = a
                logps[g] = jnp.take_along_axis(jax.nn.log_softmax(logits), a[..., None], -1)[..., 0]
                values[g] = value
            act_dict = {}
            for g, agents in (("adversary", env.adversaries), ("good", env.good_agents)):
                for j, name in enumerate(agents):
                    act_dict[name] = actions[g][:, j]
            # env.step is step_env + reset + select; spelled out to keep the final observation.
            obs_st, st_st, rew, dones, _ = jax.vmap(env.step_env)(jax.random.split(k_env, E), c["env_state"],
                                                                   act_dict)
            obs_re, st_re = jax.vmap(env.reset)(jax.random.split(k_reset, E))
            done = dones["__all__"]

            def pick(r, s):
                return jnp.where(done.reshape((E,) + (1,) * (s.ndim - 1)), r, s)

            env_state = jax.tree.map(pick, st_re, st_st)
            obs = jax.tree.map(pick, obs_re, obs_st)
            final_obs, new_obs = self._group_obs(obs_st), self._group_obs(obs)
            reward = {g: jnp.stack([rew[a] for a in agents], 1).astype(jnp.float32)
                      for g, agents in (("adversary", env.adversaries), ("good", env.good_agents))}
            final_inputs = {g: self._final_inputs(final_obs[g], c["inputs"][g]) for g in GROUPS}
            final_values = jax.lax.cond(
                done.any(),
                lambda: {g: self._value(params[g], norms[g], final_inputs[g]) for g in GROUPS},
                lambda: {g: jnp.zeros((E, final_inputs[g].shape[1]), jnp.float32) for g in GROUPS})
            inputs = {g: self._stack(new_obs[g], c["inputs"][g], done) for g in GROUPS}
            running = c["running"] + jnp.stack([reward[g].mean(1) for g in GROUPS], 1)
            ended = done.astype(jnp.float32)
            ret_sum = ended @ running
            running = running * (1.0 - ended)[:, None]
            out = dict(inputs=c["inputs"], actions=actions, logp=logps, value=values, reward=reward,
                       truncated=done, final_value=final_values, ret_sum=ret_sum, ended=ended.sum())
            return dict(c, key=key, env_state=env_state, inputs=inputs, running=running), out

        c0 = dict(key=carry["key"], env_state=carry["env_state"], inputs=carry["inputs"], running=carry["running"])
        c1, traj = jax.lax.scan(step, c0, None, length=cfg.rollout_len)

        batches = {}
        for g in GROUPS:
            last_value = self._value(params[g], norms[g], c1["inputs"][g])
            adv, ret = _gae(traj["reward"][g], traj["value"][g], last_value, traj["final_value"][g],
                            traj["truncated"], cfg.gamma, cfg.gae_lambda)
            batches[g] = dict(x=traj["inputs"][g].reshape(-1, self.in_dims[g]), a=traj["actions"][g].reshape(-1),
                              logp=traj["logp"][g].reshape(-1), adv=adv.reshape(-1), ret=ret.reshape(-1),
                              value=traj["value"][g].reshape(-1))

        key, k_perm = jax.random.split(c1["key"])
        params, opt = self._update(params, norms, carry["opt"], batches, k_perm, lr)
        if cfg.norm_obs:
            norms = {g: _norm_update(norms[g], batches[g]["x"]) for g in GROUPS}
        stats = {"ret_sum": traj["ret_sum"].sum(0), "episodes": traj["ended"].sum()}
        new_carry = dict(params=params, norms=norms, opt=opt, env_state=c1["env_state"], inputs=c1["inputs"],
                         running=c1["running"], key=key)
        return new_carry, stats

    def _update(self, params, norms, opt, batches, key, lr):
        cfg = self.cfg
        M = cfg.minibatches
        sizes = {g: batches[g]["x"].shape[0] for g in GROUPS}
        for g, n in sizes.items():
            if n % M:
                raise ValueError(f"group {g}: {n} samples do not split into {M} equal minibatches")

        def loss_fn(p, mbs):
            total = 0.0
            for g in GROUPS:
                total = total + self._group_loss(p[g], norms[g], mbs[g])
            return total

        def minibatch(state, mbs):
            p, o = state
            grads = jax.grad(loss_fn)(p, mbs)
            if cfg.max_grad_norm > 0:
                grads = {g: _clip_by_norm(grads[g], cfg.max_grad_norm) for g in GROUPS}
            updates, o = self.tx.update(grads, o, p)
            p = jax.tree.map(lambda w, u: w - lr * u, p, updates)
            return (p, o), None

        def epoch(state, k):
            ks = jax.random.split(k, len(GROUPS))
            mbs = {}
            for g, kg in zip(GROUPS, ks):
                perm = jax.random.permutation(kg, sizes[g]).reshape(M, -1)
                mbs[g] = jax.tree.map(lambda x: x[perm], batches[g])  # [M, B/M, ...]
            state, _ = jax.lax.scan(minibatch, state, mbs)
            return state, None

        (params, opt), _ = jax.lax.scan(epoch, (params, opt), jax.random.split(key, cfg.epochs))
        return params, opt

    def _group_loss(self, p, norm, mb):
        cfg = self.cfg
        logits, value = self._policy(p, norm, mb["x"])
        logp_all = jax.nn.log_softmax(logits)
        logp = jnp.take_along_axis(logp_all, mb["a"][:, None], -1)[:, 0]
        entropy = -(jnp.exp(logp_all) * logp_all).sum(-1).mean()
        log_ratio = logp - mb["logp"]
        ratio = jnp.exp(log_ratio)
        adv = mb["adv"]
        n = adv.shape[0]
        if cfg.norm_adv and n > 1:
            adv = (adv - adv.mean()) / (jnp.sqrt(jnp.sum((adv - adv.mean()) ** 2) / (n - 1)) + 1e-8)
        pg1 = -adv * ratio
        if cfg.clip_coef > 0:
            pg_loss = jnp.maximum(pg1, -adv * jnp.clip(ratio, 1 - cfg.clip_coef, 1 + cfg.clip_coef)).mean()
        else:
            pg_loss = pg1.mean()
        if cfg.clip_vloss and cfg.clip_coef > 0:
            clipped = mb["value"] + jnp.clip(value - mb["value"], -cfg.clip_coef, cfg.clip_coef)
            v_loss = 0.5 * jnp.maximum((value - mb["ret"]) ** 2, (clipped - mb["ret"]) ** 2).mean()
        else:
            v_loss = 0.5 * ((value - mb["ret"]) ** 2).mean()
        return pg_loss - cfg.ent_coef * entropy + cfg.vf_coef * v_loss

    # -- the host side --

    def iterate(self) -> dict[str, float]:
        cfg = self.cfg
        lr = cfg.lr * (1.0 - self.iteration / cfg.iters) if cfg.anneal_lr else cfg.lr
        self.carry, stats = self._iterate(self.carry, jnp.asarray(lr, jnp.float32))
        stats = jax.device_get(stats)  # the one host read of the iteration (waits for it)
        self.iteration += 1
        self.env_steps += cfg.num_envs * cfg.rollout_len
        count = float(stats["episodes"])
        if count == 0:
            return {}
        sums = np.asarray(stats["ret_sum"], dtype=np.float64)
        return {f"return/{g}": float(sums[i] / count) for i, g in enumerate(GROUPS)} | {"episodes": count}


def _clip_by_norm(tree, max_norm: float):
    norm = optax.global_norm(tree)
    scale = jnp.minimum(1.0, max_norm / (norm + 1e-6))  # torch's clip_grad_norm_: max_norm / (norm + 1e-6)
    return jax.tree.map(lambda g: g * scale, tree)


def _gae(reward, value, last_value, final_value, truncated, gamma: float, lam: float):
    """gpurl's gae_ref with terminated = False (simple_tag never terminates by default): reward, value,
    final_value [T, E, n]; last_value [E, n]; truncated bool [T, E]."""
    next_values = jnp.concatenate([value[1:], last_value[None]], 0)

    def back(last, xs):
        r, v, nv, fv, tr = xs
        ended = tr[:, None]
        nxt = jnp.where(ended, fv, nv)
        delta = r + gamma * nxt - v
        last = delta + (gamma * lam) * last * (~ended)
        return last, last

    _, adv = jax.lax.scan(back, jnp.zeros_like(last_value), (reward, value, next_values, final_value, truncated),
                          reverse=True)
    return adv, adv + value


def run_alone(cfg, env, say=print) -> dict:
    """Train without alternation (for trying the baseline on its own): per-iteration rows and timing."""
    trainer = JaxIPPO(cfg, env)
    rows, seconds = [], 0.0
    for it in range(cfg.iters):
        t0 = time.perf_counter()
        stats = trainer.iterate()
        dt = time.perf_counter() - t0
        if it:
            seconds += dt
        rows.append({"iteration": it + 1, "env_steps": trainer.env_steps, **stats, "seconds": dt})
        say(rows[-1])
    return {"rows": rows, "env_steps_per_s": (cfg.iters - 1) * cfg.num_envs * cfg.rollout_len / seconds
            if seconds else None}
