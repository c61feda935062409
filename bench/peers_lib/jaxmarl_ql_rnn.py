"""JaxMARL's Q-learning baselines for MPE (``baselines/QLearning/iql_rnn.py``, ``vdn_rnn.py`` and
``qmix_rnn.py`` with ``config/alg/ql_rnn_mpe.yaml``), re-implemented as one library function whose ``mixer``
picks the script (JaxMARL ships its baselines as scripts beside the package, with hydra, wandb and flashbax,
not in the ``jaxmarl`` wheel). (Part of a library: bench/learning_parity.py prints the RESULT line.)

What is JaxMARL's, kept as it is there (read from JaxMARL at commit c793d09):

- the config: ``JAXMARL_QL_RNN`` below (8 envs, a rollout of a whole episode per env per update, a buffer of
  5000 rollouts, 32 rollouts per gradient step, one gradient step per update, gamma 0.9, lr 0.005 falling
  linearly to 1e-10 over the gradient steps, grad-norm 25, RAdam, target copied every 200 updates (tau 1),
  learning from the first update past 10000 env steps, epsilon 1 -> 0.05 linearly over the first 10% of the
  updates, then 0.05);
- the env handling of ``CTRolloutManager``: every update resets all envs and plays ``NUM_STEPS`` steps from
  the reset, each agent's observation flattened, zero-padded to the widest and followed by the agent's one-hot
  id, zeroed where the step ended the agent's episode; the world state (QMIX's mixer input) is every agent's
  raw observation concatenated in agent order; the team reward (VDN, QMIX) the sum of the agents' rewards;
  valid actions the agent's own action count within the widest (JaxMARL pads actions too);
- the network, shared by all agents: Dense 64 (orthogonal 1) -> ReLU -> GRU 64 (flax's ``GRUCell``, its state
  zeroed where the stored ``done`` is set) -> Dense Q per action (orthogonal 1), zero biases;
- exploration: per agent, greedy on the valid actions or, with probability epsilon (drawn per env), uniform
  over them; epsilon at the update's count before it;
- the buffer: a FIFO of ``BUFFER_SIZE // NUM_ENVS`` rollouts per env (flashbax's trajectory buffer with the
  rollout as one item), samplable once it holds ``BUFFER_BATCH_SIZE`` per env, sampled uniformly with
  replacement (env row and item drawn independently, as flashbax draws them);
- the update: the GRU unrolled from zeros over each sampled rollout by the online and the target network;
  double Q (the next action is the online network's argmax over valid actions, valued by the target
  network); one-step targets, no n-step or TD(lambda); the stored ``done`` of step ``t`` is the one the env
  returned *before* it (kept for the GRU reset), and the targets use it as JaxMARL's do, ``r_t + gamma *
  (1 - done_t) * Q'_{t+1}``, the rollout's last step only a bootstrap (no target of its own);
  IQL: per-agent rewards, dones and Q; VDN: team reward, ``__all__`` done, the agents' Q summed; QMIX: team
  reward, ``__all__`` done, the monotonic mixer (hypernetworks on the world state: |W1| n x 32 and |W2| 32 x 1
  from ReLU-128 hypernets, b1 from a Dense, b2 from a ReLU-32 hypernet, ELU between, orthogonal 0.001 inits)
  of the online network's chosen-action Q against the target mixer of the target network's next Q; the loss
  the mean squared TD error; the target network (agent and mixer) copied after the update's gradient step
  when the update count (before it) is a multiple of 200;
- the env: JaxMARL's own MPE port (auto-reset inside ``env.step``), built by :func:`.mpe_suite.make_jaxmarl`
  with gpurl's episode length (JaxMARL's ``max_steps`` counts one step more, see there).

What differs, and why:

- ``NUM_STEPS`` is 25 here, JaxMARL's 26: ql_rnn_mpe.yaml's 26 is one whole episode of JaxMARL's own
  simple_spread (``max_steps`` 25, so 26 steps), and this env is built with gpurl's 25-step episodes. With 25
  each rollout is one whole episode, as in JaxMARL: no stored ``done`` is ever set, the last (terminal) step
  is only a bootstrap. With 26 it would hold a second episode's first step, and the done alignment above would
  then bootstrap the terminal step through the next episode's (zeroed) first observation, which JaxMARL never
  does on its simple_spread. ``config={"NUM_STEPS": 26}`` runs the literal value.
- no greedy test episodes (JaxMARL's ``TEST_DURING_TRAINING``; they do not touch training) and no logging.
- the return is measured as gpurl measures it (as :mod:`.jaxmarl_ippo_ff`): each finished training episode's
  undiscounted sum of one agent's rewards (exploration included), averaged over the group's agents. An
  episode still running when an update ends is dropped (every update resets the envs).

JaxMARL's one network and its padding are kept for every scenario (unlike the PPO references, Q-learning's
mixers need all the agents in one network); on simple_spread (three alike agents) nothing is padded.
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.linen.initializers import constant, orthogonal

from .jaxmarl_common import agent_groups, curve_of, episode_step, seeded
from .jaxmarl_mappo_rnn import _ScannedGRU  # JaxMARL's ScannedRNN; its flax name keys the init, so shared as is

#: ql_rnn_mpe.yaml, bar TOTAL_TIMESTEPS (the budget is make_train's argument) and NUM_STEPS (26 there: the
#: episode length of JaxMARL's simple_spread; 25 is this env's, see the module's docstring).
JAXMARL_QL_RNN = {"NUM_ENVS": 8, "NUM_STEPS": 25, "BUFFER_SIZE": 5000, "BUFFER_BATCH_SIZE": 32, "HIDDEN_SIZE": 64,
                  "MIXER_EMBEDDING_DIM": 32, "MIXER_HYPERNET_HIDDEN_DIM": 128, "MIXER_INIT_SCALE": 0.001,
                  "EPS_START": 1.0, "EPS_FINISH": 0.05, "EPS_DECAY": 0.1, "MAX_GRAD_NORM": 25,
                  "TARGET_UPDATE_INTERVAL": 200, "TAU": 1.0, "NUM_EPOCHS": 1, "LR": 0.005, "LEARNING_STARTS": 10000,
                  "LR_LINEAR_DECAY": True, "GAMMA": 0.9}

MIXERS = ("iql", "vdn", "qmix")


class _RNNQNetwork(nn.Module):
    """JaxMARL's RNNQNetwork: Dense -> ReLU -> GRU -> Dense Q, orthogonal(1) kernels, zero biases."""
    action_dim: int
    hidden: int

    @nn.compact
    def __call__(self, state, x):
        obs, resets = x  # [T, B, D], [T, B]
        h = nn.relu(nn.Dense(self.hidden, kernel_init=orthogonal(1.0), bias_init=constant(0.0))(obs))
        state, h = _ScannedGRU()(state, (h, resets))
        return state, nn.Dense(self.action_dim, kernel_init=orthogonal(1.0), bias_init=constant(0.0))(h)


class _HyperNetwork(nn.Module):
    """Dense -> ReLU -> Dense, orthogonal(``scale``) kernels, zero biases."""
    hidden: int
    out: int
    scale: float

    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Dense(self.hidden, kernel_init=orthogonal(self.scale), bias_init=constant(0.0))(x))
        return nn.Dense(self.out, kernel_init=orthogonal(self.scale), bias_init=constant(0.0))(x)


class _MixingNetwork(nn.Module):
    """JaxMARL's QMIX mixer: Q [T, B, n] and world state [T, B, W] -> Q_tot [T, B]."""
    embedding: int
    hypernet_hidden: int
    scale: float

    @nn.compact
    def __call__(self, q, states):
        T, B, n = q.shape
        e = self.embedding
        w_1 = _HyperNetwork(self.hypernet_hidden, e * n, self.scale)(states)
        b_1 = nn.Dense(e, kernel_init=orthogonal(self.scale), bias_init=constant(0.0))(states)
        w_2 = _HyperNetwork(self.hypernet_hidden, e, self.scale)(states)
        b_2 = _HyperNetwork(e, 1, self.scale)(states)
        w_1 = jnp.abs(w_1.reshape(T, B, n, e))
        b_1 = b_1.reshape(T, B, 1, e)
        w_2 = jnp.abs(w_2.reshape(T, B, e, 1))
        b_2 = b_2.reshape(T, B, 1, 1)
        hidden = nn.elu(jnp.matmul(q[:, :, None, :], w_1) + b_1)
        return (jnp.matmul(hidden, w_2) + b_2)[..., 0, 0]


def make_train(env, total_steps: int, config: dict | None = None, mixer: str = "qmix"):
    """``train(seed) -> curve`` as :func:`.jaxmarl_ippo_ff.make_train`: JaxMARL's ``iql_rnn`` (``mixer="iql"``),
    ``vdn_rnn`` (``"vdn"``) or ``qmix_rnn`` (``"qmix"``), one jitted function for the whole run."""
    if mixer not in MIXERS:
        raise ValueError(f"mixer {mixer!r}: one of {MIXERS}")
    c = {**JAXMARL_QL_RNN, **(config or {})}
    E, T, H, B = c["NUM_ENVS"], c["NUM_STEPS"], c["HIDDEN_SIZE"], c["BUFFER_BATCH_SIZE"]
    updates = int(total_steps) // T // E
    agents, groups = list(env.agents), agent_groups(env)
    n = len(agents)
    obs_dims = [int(np.prod(env.observation_space(a).shape)) for a in agents]
    n_acts = [env.action_space(a).n for a in agents]
    max_obs, A = max(obs_dims), max(n_acts)
    D, W = max_obs + n, sum(obs_dims)
    one_hot = jnp.eye(n)
    valid = jnp.array([[1.0] * k + [0.0] * (A - k) for k in n_acts])  # [n, A], CTRolloutManager's valid_actions_oh
    L = c["BUFFER_SIZE"] // E  # rollouts kept per env (flashbax's max_length_time_axis)

    network = _RNNQNetwork(A, H)
    mixing = _MixingNetwork(c["MIXER_EMBEDDING_DIM"], c["MIXER_HYPERNET_HIDDEN_DIM"], c["MIXER_INIT_SCALE"])
    eps_at = optax.linear_schedule(c["EPS_START"], c["EPS_FINISH"], c["EPS_DECAY"] * updates)
    lr = optax.linear_schedule(c["LR"], 1e-10, c["NUM_EPOCHS"] * updates) if c["LR_LINEAR_DECAY"] else c["LR"]
    tx = optax.chain(optax.clip_by_global_norm(c["MAX_GRAD_NORM"]), optax.radam(learning_rate=lr))

    def preprocess(obs, done=None):
        """CTRolloutManager's: per agent, flattened, zero-padded, one-hot id appended (zeroed where ``done``);
        -> ([E, n, D], world state [E, W])."""
        rows = []
        for i, a in enumerate(agents):
            o = obs[a].reshape(E, -1)
            x = jnp.concatenate([jnp.pad(o, ((0, 0), (0, max_obs - o.shape[-1]))),
                                 jnp.broadcast_to(one_hot[i], (E, n))], -1)
            rows.append(x if done is None else jnp.where(done[a][:, None], 0.0, x))
        return jnp.stack(rows, 1), jnp.concatenate([obs[a].reshape(E, -1) for a in agents], -1)

    def q_values(params, hidden, obs, resets):
        """The shared network over every agent: obs [T, b, n, D], resets [T, b, n], hidden [b * n, H] ->
        (hidden, Q [T, b, n, A])."""
        t, b = obs.shape[:2]
        hidden, q = network.apply(params, hidden, (obs.reshape(t, b * n, D), resets.reshape(t, b * n)))
        return hidden, q.reshape(t, b, n, A)

    def explore(key, q, eps):
        """JaxMARL's eps_greedy_exploration, per agent: q [n, E, A] -> actions [n, E]."""
        def one_agent(k, q_a, valid_a):
            k_a, k_e = jax.random.split(k)
            greedy = jnp.argmax(q_a - (1 - valid_a) * 1e10, -1)
            random = jax.vmap(lambda kk, v: jax.random.choice(kk, jnp.arange(A), p=v / v.sum()))(
                jax.random.split(k_a, E), valid_a)
            return jnp.where(jax.random.uniform(k_e, greedy.shape) < eps, random, greedy)

        return jax.vmap(one_agent)(jax.random.split(key, n), q, jnp.broadcast_to(valid[:, None], (n, E, A)))

    def loss_fn(params, target, batch):
        """The mean squared TD error of a sampled batch (leaves [T, B, ...]), as the mixer's script has it."""
        zeros = jnp.zeros((B * n, H))
        resets = batch["done"] > 0
        _, q_next_target = q_values(target["agent"], zeros, batch["obs"], resets)
        _, q = q_values(params["agent"], zeros, batch["obs"], resets)
        chosen = jnp.take_along_axis(q, batch["action"][..., None], -1)[..., 0]  # [T, B, n]
        best = jnp.argmax(q - (1 - valid) * 1e10, -1)  # double Q: the online argmax...
        q_next = jnp.take_along_axis(q_next_target, best[..., None], -1)[..., 0]  # ...valued by the target
        g = c["GAMMA"]
        if mixer == "iql":
            y = batch["reward"][:-1] + (1 - batch["done"][:-1]) * g * q_next[1:]
            pred = chosen[:-1]
        elif mixer == "vdn":
            y = batch["reward_all"][:-1] + (1 - batch["done_all"][:-1]) * g * q_next.sum(-1)[1:]
            pred = chosen.sum(-1)[:-1]
        else:
            q_tot_next = mixing.apply(target["mixer"], q_next, batch["state"])
            y = batch["reward_all"][:-1] + (1 - batch["done_all"][:-1]) * g * q_tot_next[1:]
            pred = mixing.apply(params["mixer"], chosen, batch["state"])[:-1]
        return jnp.mean((pred - jax.lax.stop_gradient(y)) ** 2)

    def learn(params, opt_state, target, buffer, key):
        """NUM_EPOCHS gradient steps, each on a fresh uniform sample of BUFFER_BATCH_SIZE rollouts."""
        def epoch(carry, k):
            params, opt_state = carry
            k_item, k_row = jax.random.split(k)
            item = jax.random.randint(k_item, (B,), 0, buffer["count"])
            row = jax.random.randint(k_row, (B,), 0, E)
            batch = jax.tree.map(lambda x: jnp.swapaxes(x[item, row], 0, 1), buffer["data"])  # [T, B, ...]
            grads = jax.grad(loss_fn)(params, target, batch)
            upd, opt_state = tx.update(grads, opt_state, params)
            return (optax.apply_updates(params, upd), opt_state), None

        return jax.lax.scan(epoch, (params, opt_state), jax.random.split(key, c["NUM_EPOCHS"]))[0]

    def whole_run(key):
        key, k_agent, k_mixer = jax.random.split(key, 3)
        params = {"agent": network.init(k_agent, jnp.zeros((1, H)), (jnp.zeros((1, 1, D)), jnp.zeros((1, 1), bool)))}
        if mixer == "qmix":
            params["mixer"] = mixing.init(k_mixer, jnp.zeros((1, 1, n)), jnp.zeros((1, 1, W)))
        item = {"obs": jnp.zeros((T, n, D)), "state": jnp.zeros((T, W)), "action": jnp.zeros((T, n), jnp.int32),
                "reward": jnp.zeros((T, n)), "reward_all": jnp.zeros((T,)), "done": jnp.zeros((T, n)),
                "done_all": jnp.zeros((T,))}
        buffer = {"data": jax.tree.map(lambda x: jnp.zeros((L, E) + x.shape, x.dtype), item),
                  "next": jnp.int32(0), "count": jnp.int32(0)}
        learner = {"params": params, "target": params, "opt": tx.init(params), "updates": jnp.int32(0),
                   "timesteps": jnp.int32(0)}

        def env_step(carry, _):
            hidden, obs, state, last_done, env_state, running, params, eps, key = carry
            key, k_act, k_env = jax.random.split(key, 3)
            hidden, q = q_values(params, hidden, obs[None], last_done["agents"][None] > 0)
            actions = explore(k_act, jnp.swapaxes(q[0], 0, 1), eps)  # [n, E]
            raw, env_state, reward, done, _ = jax.vmap(env.step)(
                jax.random.split(k_env, E), env_state, {a: actions[i] for i, a in enumerate(agents)})
            r = jnp.stack([reward[a] for a in agents], 1)
            step = {"obs": obs, "state": state, "action": actions.T, "reward": r, "reward_all": r.sum(1),
                    "done": last_done["agents"], "done_all": last_done["all"]}
            new_obs, new_state = preprocess(raw, done)
            new_done = {"agents": jnp.stack([done[a] for a in agents], 1).astype(jnp.float32),
                        "all": done["__all__"].astype(jnp.float32)}
            running, stats = episode_step(groups, running, reward, done["__all__"])
            return (hidden, new_obs, new_state, new_done, env_state, running, params, eps, key), (step, stats)

        def update(carry, _):
            learner, buffer, key = carry
            key, k_reset, k_roll, k_learn = jax.random.split(key, 4)
            raw, env_state = jax.vmap(env.reset)(jax.random.split(k_reset, E))
            obs, state = preprocess(raw)
            done0 = {"agents": jnp.zeros((E, n)), "all": jnp.zeros((E,))}
            running = {g: jnp.zeros((E, len(names))) for g, names in groups.items()}
            eps = eps_at(learner["updates"])
            roll = (jnp.zeros((E * n, H)), obs, state, done0, env_state, running, learner["params"]["agent"], eps,
                    k_roll)
            _, (traj, stats) = jax.lax.scan(env_step, roll, None, T)
            learner = {**learner, "timesteps": learner["timesteps"] + T * E}

            data = jax.tree.map(lambda buf, x: buf.at[buffer["next"]].set(jnp.swapaxes(x, 0, 1)), buffer["data"], traj)
            buffer = {"data": data, "next": (buffer["next"] + 1) % L, "count": jnp.minimum(buffer["count"] + 1, L)}

            learn_now = (buffer["count"] >= B) & (learner["timesteps"] > c["LEARNING_STARTS"])
            params, opt = jax.lax.cond(
                learn_now, lambda: learn(learner["params"], learner["opt"], learner["target"], buffer, k_learn),
                lambda: (learner["params"], learner["opt"]))
            copy = learner["updates"] % c["TARGET_UPDATE_INTERVAL"] == 0
            target = jax.lax.cond(copy, lambda: optax.incremental_update(params, learner["target"], c["TAU"]),
                                  lambda: learner["target"])
            learner = {**learner, "params": params, "opt": opt, "target": target, "updates": learner["updates"] + 1}
            return (learner, buffer, key), stats

        return curve_of(jax.lax.scan(update, (learner, buffer, key), None, updates)[1])

    return seeded(jax.jit(whole_run), updates, T * E)


def make_train_iql(env, total_steps: int, config: dict | None = None):
    """JaxMARL's ``iql_rnn``: :func:`make_train` with ``mixer="iql"``."""
    return make_train(env, total_steps, config, "iql")


def make_train_vdn(env, total_steps: int, config: dict | None = None):
    """JaxMARL's ``vdn_rnn``: :func:`make_train` with ``mixer="vdn"``."""
    return make_train(env, total_steps, config, "vdn")


def make_train_qmix(env, total_steps: int, config: dict | None = None):
    """JaxMARL's ``qmix_rnn``: :func:`make_train` with ``mixer="qmix"`` (the default)."""
    return make_train(env, total_steps, config, "qmix")
