"""The MAPPO paper's own code (Yu et al., "The Surprising Effectiveness of PPO in Cooperative Multi-Agent Games",
marlbenchmark/on-policy) as a reference: its R_MAPPO trainer, policy, buffers and MPE runner, run in-process at
the paper's published MPE configurations. (Part of a library: bench/learning_parity.py prints the RESULT line.)

Their code is not copied here: :func:`import_onpolicy` imports ``onpolicy`` from a checkout whose path is given
(``path=`` or ``$ONPOLICY_PATH``; ``git clone https://github.com/marlbenchmark/on-policy``). Read at commit
de66d7a (2024-07-18).

What is theirs, kept as it is there:

- the configurations: ``ONPOLICY_RMAPPO_SPREAD`` (``train_mpe_scripts/train_mpe_spread.sh``) and
  ``ONPOLICY_RMAPPO_COMM`` (``train_mpe_comm.sh``) on top of ``onpolicy/config.py``'s defaults, applied as their
  ``train_mpe.py`` applies them (``rmappo`` turns the recurrent policy on). Two of the scripts' flags are
  ``store_false`` switches, so passing them turns the feature *off*: spread's ``--use_ReLU`` gives tanh
  networks, comm's ``--share_policy`` gives one policy per agent (their separated runner);
- the learning: their ``MPERunner.run`` (shared or separated), ``R_MAPPO``, ``R_MAPPOPolicy`` and buffers,
  unchanged, 1 torch thread, seeded as ``train_mpe.py`` seeds (torch and numpy with the seed, env ``rank``
  with ``seed + 1000 * rank``);
- the env: their ``MultiAgentEnv`` and scenario, trained on their reward (spread: every agent gets the team
  sum; speaker-listener: both agents get twice mpe2's reward).

What differs, and why:

- the envs step in this process (their ``DummyVecEnv``, which ``train_mpe.py`` uses for 1 thread only; 128
  threads would be 128 subprocesses there), so all envs draw from numpy's one global generator: the same
  distributions, not their streams. Ragged observations (speaker 3, listener 11) are stacked as the object
  arrays numpy < 1.24 made (numpy 2 refuses ``np.array`` on them);
- no logging, model saving or evaluation (files only in a temporary directory, removed after the run; their
  prints are swallowed); the run stops after ``total_steps // (episode_length * n_rollout_threads)`` updates,
  their own ``num_env_steps`` arithmetic;
- with ``match_mpe2=True`` (the default) their env is made the same task as mpe2's (gpurl's spec), changing
  no learning code: their simple_spread draws landmarks in 0.8 * U(-1, 1)^2, mpe2 in U(-1, 1)^2 (their
  ``reset_world`` is replaced by one without the 0.8, the same draws in the same order otherwise); their
  ``World.integrate_state`` moves a body with its *new* velocity (damp, add force, then move: their
  ``core.py`` 265-278), mpe2 with its *old* one (move, damp, add force: mpe2 ``_mpe_utils/core.py``
  231-239), so the world's ``integrate_state`` is replaced by mpe2's order.
  :func:`.onpolicy_check.check_reward_map` runs both envs from the same state with the same actions and
  shows they then agree step for step;
- the return is measured on gpurl's (mpe2's) scale: each step's recorded reward is mapped to mpe2's
  per-agent reward, averaged over the group (:func:`gpurl_group_rewards`). simple_spread (mpe2's
  ``local_ratio`` 0.5): their agent i scores -D - 1 - c_i (D: the sum over landmarks of the nearest agent's
  distance; c_i: the other agents within 0.3; the 1: its collision test counts itself), and every agent gets
  the sum R = -N*D - N - C (C = sum of c_i); mpe2's agent i gets -D/2 - c_i/2, their mean -D/2 - C/(2N), so
  mean = (R + N) / (2N) (N = 3: an episode's ``theirs = 6 G - 75``). simple_speaker_listener: both get
  -|p - q|^2 in mpe2 and the sum of both, -2|p - q|^2, in theirs: R / 2. The map holds for mpe2's
  ``local_ratio`` 0.5 only.

Other differences, not changed: they train on their reward (on simple_spread every agent gets the team sum,
collisions included, where mpe2's collision term is each agent's own); their Discrete(5) move labels swap each
axis' direction (theirs 1: +x, 2: -x, 3: +y, 4: -y; mpe2 1: -x, 2: +x, 3: -y, 4: +y: the same task up to
relabelling); their env returns float64 observations (mpe2 casts to float32; their buffers store float32).
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import sys
import tempfile
import time
import types
import warnings
from pathlib import Path

import numpy as np

ONPOLICY_URL = "https://github.com/marlbenchmark/on-policy"

#: ``train_mpe_spread.sh``: every argument it passes, as their parser leaves it (``--use_ReLU`` is a
#: ``store_false`` switch: tanh). Not here: ``--seed`` (``train``'s argument), ``--wandb_name`` (no such
#: argument; their parser drops it). ``num_env_steps`` is the paper's full budget (documentation: a run's
#: budget is ``make_train``'s ``total_steps``).
ONPOLICY_RMAPPO_SPREAD = {"env_name": "MPE", "algorithm_name": "rmappo", "experiment_name": "check",
                          "scenario_name": "simple_spread", "num_agents": 3, "num_landmarks": 3,
                          "n_training_threads": 1, "n_rollout_threads": 128, "num_mini_batch": 1,
                          "episode_length": 25, "num_env_steps": 20_000_000, "ppo_epoch": 10, "use_ReLU": False,
                          "gain": 0.01, "lr": 7e-4, "critic_lr": 7e-4, "user_name": "yuchao"}
#: ``train_mpe_comm.sh`` (simple_speaker_listener), likewise: ReLU (no ``--use_ReLU``), ``--share_policy`` is a
#: ``store_false`` switch (one policy per agent), 15 epochs, 2M steps.
ONPOLICY_RMAPPO_COMM = {"env_name": "MPE", "algorithm_name": "rmappo", "experiment_name": "check",
                        "scenario_name": "simple_speaker_listener", "num_agents": 2, "num_landmarks": 3,
                        "n_training_threads": 1, "n_rollout_threads": 128, "num_mini_batch": 1,
                        "episode_length": 25, "num_env_steps": 2_000_000, "ppo_epoch": 15, "gain": 0.01,
                        "lr": 7e-4, "critic_lr": 7e-4, "user_name": "yuchao", "share_policy": False}
PUBLISHED = {"simple_spread": ONPOLICY_RMAPPO_SPREAD, "simple_speaker_listener": ONPOLICY_RMAPPO_COMM}

#: mpe2's ``local_ratio`` the simple_spread map assumes (mpe2's default, the comparison's).
LOCAL_RATIO = 0.5
#: mpe2's move label -> theirs (their one-hot u = (a[1] - a[2], a[3] - a[4]); mpe2's u = (-1, +1, ...) for 1, 2).
MOVE_TO_THEIRS = (0, 2, 1, 4, 3)


# --- importing their code ------------------------------------------------------------------------------------

def _stub(name: str, **attrs) -> None:
    """A module their import chain names but this use never needs, where it is not installed."""
    if name in sys.modules or importlib.util.find_spec(name) is not None:
        return
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module


class _NoWriter:
    """tensorboardX's SummaryWriter, writing nothing (their runner makes one; logging is overridden)."""

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def import_onpolicy(path: str | None = None) -> types.ModuleType:
    """``onpolicy`` from the checkout at ``path`` (else ``$ONPOLICY_PATH``), put first on ``sys.path``.

    Stubs the modules their import chain names but training never uses, where absent: ``tensorboardX`` (a
    writer that writes nothing), ``imageio`` (gif rendering), ``wandb`` (their default logger, off here),
    ``seaborn`` (unused colour palettes), ``absl`` (flags their ``envs/__init__`` parses for StarCraft)."""
    path = path or os.environ.get("ONPOLICY_PATH")
    if not path or not (Path(path) / "onpolicy" / "__init__.py").is_file():
        raise ImportError(f"the MAPPO paper's code (onpolicy) is needed: `git clone {ONPOLICY_URL} <dir>`, then "
                          f"pass path=<dir> or set ONPOLICY_PATH=<dir> (the directory holding onpolicy/); "
                          f"got {path!r}")
    root = str(Path(path).resolve())
    if root not in sys.path:
        sys.path.insert(0, root)
    _stub("tensorboardX", SummaryWriter=_NoWriter)
    _stub("imageio")
    _stub("wandb", run=None, log=lambda *a, **k: None, init=lambda *a, **k: None)
    _stub("seaborn", color_palette=lambda *a, **k: [])
    if importlib.util.find_spec("absl") is None:
        _stub("absl", flags=types.SimpleNamespace(FLAGS=lambda argv: argv))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # `imp` and gym deprecation warnings
        import onpolicy
        import onpolicy.envs.mpe.environment  # noqa: F401 (gym's spaces; fails here if gym is missing)
    if not str(Path(onpolicy.__file__).resolve()).startswith(root):
        raise ImportError(f"`onpolicy` is imported from {onpolicy.__file__}, not from {root}")
    return onpolicy


# --- configuration -------------------------------------------------------------------------------------------

def all_args(scenario: str, config: dict | None = None):
    """Their ``all_args`` namespace: ``onpolicy.config.get_config()``'s defaults plus ``train_mpe.py``'s
    scenario arguments, then the scenario's published configuration, then ``config``; ``rmappo`` switches the
    recurrent policy on as ``train_mpe.py`` does. Needs :func:`import_onpolicy` first."""
    from onpolicy.config import get_config

    if scenario not in PUBLISHED:
        raise ValueError(f"no published on-policy configuration for {scenario!r}; choose from {list(PUBLISHED)}")
    parser = get_config()
    parser.add_argument("--scenario_name", type=str, default="simple_spread")  # train_mpe.parse_args
    parser.add_argument("--num_landmarks", type=int, default=3)
    parser.add_argument("--num_agents", type=int, default=2)
    args = parser.parse_known_args([])[0]
    values = {**PUBLISHED[scenario], **(config or {})}
    unknown = sorted(k for k in values if not hasattr(args, k))
    if unknown:
        raise ValueError(f"not arguments of on-policy's parser: {unknown}")
    for key, value in values.items():
        setattr(args, key, value)
    if args.algorithm_name != "rmappo":
        raise ValueError("this reference runs their rmappo only")
    args.use_recurrent_policy, args.use_naive_recurrent_policy = True, False
    if scenario == "simple_spread" and args.num_agents != args.num_landmarks:
        raise ValueError("mpe2's simple_spread has N agents and N landmarks")
    return args


def groups(scenario: str, n_agents: int) -> dict[str, list[int]]:
    """gpurl's agent groups as indices of their agents (their agent order is mpe2's)."""
    if scenario == "simple_spread":
        return {"agent": list(range(n_agents))}
    return {"speaker": [0], "listener": [1]}


#: gpurl's group names per scenario.
GROUPS = {"simple_spread": ("agent",), "simple_speaker_listener": ("speaker", "listener")}


# --- rewards on gpurl's scale --------------------------------------------------------------------------------

def gpurl_group_rewards(scenario: str, reward) -> dict[str, np.ndarray]:
    """Each group's mpe2 per-agent reward averaged over the group, from their recorded rewards ``[E, N]``:
    ``{group: [E]}`` (see the module docstring for the maps)."""
    reward = np.asarray(reward, np.float64)
    if scenario == "simple_spread":
        n = reward.shape[1]
        # Shared: every column is the team sum R = -N*D - C - N; mpe2's agents average -D/2 - C/(2N) at 0.5.
        return {"agent": (reward[:, 0] + n) / (2 * n)}
    return {"speaker": reward[:, 0] / 2, "listener": reward[:, 1] / 2}


def gpurl_agent_rewards(scenario: str, individual) -> np.ndarray:
    """Each agent's mpe2 reward from their per-agent ``info['individual_reward']`` ``[..., N]`` (the scenario's
    reward before their team sum): simple_spread -D - 1 - c_i -> -D/2 - c_i/2 (c_i: other agents touching i);
    simple_speaker_listener -|p - q|^2 as is."""
    individual = np.asarray(individual, np.float64)
    return (individual + 1) / 2 if scenario == "simple_spread" else individual


# --- their env, made mpe2's task -----------------------------------------------------------------------------

def _spread_reset_mpe2(self, world) -> None:
    """Their simple_spread ``reset_world`` with mpe2's landmark distribution U(-1, 1)^2 (theirs: 0.8 x that)."""
    world.assign_agent_colors()
    world.assign_landmark_colors()
    for agent in world.agents:
        agent.state.p_pos = np.random.uniform(-1, +1, world.dim_p)
        agent.state.p_vel = np.zeros(world.dim_p)
        agent.state.c = np.zeros(world.dim_c)
    for landmark in world.landmarks:
        landmark.state.p_pos = np.random.uniform(-1, +1, world.dim_p)
        landmark.state.p_vel = np.zeros(world.dim_p)


def _integrate_mpe2(self, p_force) -> None:
    """mpe2's ``World.integrate_state``: move with the old velocity, then damp and add the force."""
    for i, entity in enumerate(self.entities):
        if not entity.movable:
            continue
        entity.state.p_pos += entity.state.p_vel * self.dt
        entity.state.p_vel = entity.state.p_vel * (1 - self.damping)
        if p_force[i] is not None:
            entity.state.p_vel += (p_force[i] / entity.mass) * self.dt
        if entity.max_speed is not None:
            speed = np.sqrt(np.square(entity.state.p_vel[0]) + np.square(entity.state.p_vel[1]))
            if speed > entity.max_speed:
                entity.state.p_vel = entity.state.p_vel / speed * entity.max_speed


def make_env(args, match_mpe2: bool = True):
    """Their ``MPEEnv(args)`` (scenario loaded, world made, ``MultiAgentEnv`` built), with mpe2's landmark
    distribution and integration order where ``match_mpe2``."""
    from onpolicy.envs.mpe.environment import MultiAgentEnv
    from onpolicy.envs.mpe.scenarios import load

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # `imp`
        scenario = load(args.scenario_name + ".py").Scenario()
    if match_mpe2 and args.scenario_name == "simple_spread":
        scenario.reset_world = types.MethodType(_spread_reset_mpe2, scenario)  # make_world calls it too
    world = scenario.make_world(args)
    if match_mpe2:
        world.integrate_state = types.MethodType(_integrate_mpe2, world)
    return MultiAgentEnv(world, scenario.reset_world, scenario.reward, scenario.observation, scenario.info)


def _stack(rows: list) -> np.ndarray:
    """Per-env lists of per-agent observations -> ``[E, N, D]``, or an object array ``[E, N]`` of 1-D arrays
    where agents' widths differ (what numpy < 1.24 made of them, and their runners expect)."""
    if len({len(o) for row in rows for o in row}) == 1:
        return np.array(rows)
    return _objects(rows)


def _objects(rows: list) -> np.ndarray:
    """Per-env lists of per-agent info dicts -> an object array ``[E, N]``."""
    out = np.empty((len(rows), len(rows[0])), dtype=object)
    for i, row in enumerate(rows):
        for j, item in enumerate(row):
            out[i, j] = item
    return out


def _vec_env_class():
    """Their ``DummyVecEnv`` with ragged observations stacked by :func:`_stack` and each step's rewards and
    dones handed to ``record`` (before the envs that ended reset)."""
    from onpolicy.envs.env_wrappers import DummyVecEnv

    class InProcessVecEnv(DummyVecEnv):
        record = None

        def step_wait(self):
            obs, rews, dones, infos = map(list, zip(*[env.step(a) for a, env in zip(self.actions, self.envs)]))
            rews, dones = np.array(rews), np.array(dones)  # [E, N, 1], [E, N]
            if self.record is not None:
                self.record(rews[..., 0], dones)
            for i, done in enumerate(dones):
                if np.all(done):
                    obs[i] = self.envs[i].reset()
            self.actions = None
            return _stack(obs), rews, dones, _objects(infos)

        def reset(self):
            return _stack([env.reset() for env in self.envs])

    return InProcessVecEnv


# --- their runner, recording returns ---------------------------------------------------------------------------

class _Returns:
    """Per update, per group: the sum over the episodes that ended of the episode's per-agent return on gpurl's
    scale, averaged over the group, and their count."""

    def __init__(self, scenario: str, n_envs: int, steps_per_update: int):
        self.scenario, self.steps_per_update = scenario, steps_per_update
        self.names = GROUPS[scenario]
        self.running = {g: np.zeros(n_envs) for g in self.names}
        self.total = {g: 0.0 for g in self.names}
        self.ended = 0
        self.stamps: list[float] = []  # perf_counter at the end of each update
        self.curve: dict[str, list] = {"env_steps": [], **{f"{k}/{g}": [] for k in ("return_sum", "episodes")
                                                           for g in self.names}}

    def step(self, reward, dones) -> None:
        """``reward`` [E, N] their recorded rewards, ``dones`` [E, N]."""
        ended = np.all(dones, axis=1)
        for g, r in gpurl_group_rewards(self.scenario, reward).items():
            self.running[g] += r
            self.total[g] += self.running[g][ended].sum()
            self.running[g][ended] = 0.0
        self.ended += int(ended.sum())

    def close_update(self) -> None:
        self.stamps.append(time.perf_counter())
        c = self.curve
        c["env_steps"].append((len(c["env_steps"]) + 1) * self.steps_per_update)
        for g in self.names:
            c[f"return_sum/{g}"].append(self.total[g])
            c[f"episodes/{g}"].append(self.ended)
            self.total[g] = 0.0
        self.ended = 0

    def result(self) -> dict:
        return {k: np.asarray(v, np.int64 if k == "env_steps" or k.startswith("episodes/") else np.float64)
                for k, v in self.curve.items()}


def _runner_class(share_policy: bool):
    """Their MPE runner (shared policy or one per agent) with no model files and no logging, calling
    ``on_update`` after each update's training."""
    if share_policy:
        from onpolicy.runner.shared.mpe_runner import MPERunner
    else:
        from onpolicy.runner.separated.mpe_runner import MPERunner

    class Runner(MPERunner):
        on_update = None

        def save(self, *args, **kwargs):
            pass

        def log_train(self, *args, **kwargs):
            pass

        def log_env(self, *args, **kwargs):
            pass

        def train(self):
            infos = super().train()
            if self.on_update is not None:
                self.on_update()
            return infos

    return Runner


def make_train(scenario: str, total_steps: int, config: dict | None = None, path: str | None = None, *,
               match_mpe2: bool = True):
    """``train(seed) -> curve``: their rmappo at the scenario's published configuration (``config`` overrides
    entries, their argument names), for ``total_steps`` env steps rounded down to whole updates of
    ``episode_length x n_rollout_threads``. The curve: ``env_steps`` [U] and per group ``return_sum/g`` [U] and
    ``episodes/g`` [U], as :func:`.jaxmarl_common.seeded`'s; the returns on gpurl's scale."""
    import_onpolicy(path)
    import torch

    probe = all_args(scenario, config)
    steps_per_update = probe.episode_length * probe.n_rollout_threads
    if int(total_steps) // steps_per_update < 1:
        raise ValueError(f"total_steps {total_steps} is less than one update ({steps_per_update} env steps)")
    vec_env, runner_class = _vec_env_class(), _runner_class(probe.share_policy)

    def train(seed: int) -> dict:
        args = all_args(scenario, config)
        args.seed, args.num_env_steps = int(seed), int(total_steps)
        args.use_wandb, args.cuda, args.use_eval, args.model_dir = False, False, False, None
        saved = torch.get_num_threads(), torch.get_rng_state(), np.random.get_state()
        try:
            torch.set_num_threads(args.n_training_threads)
            torch.manual_seed(args.seed)
            np.random.seed(args.seed)
            envs = vec_env([_env_fn(args, rank, match_mpe2) for rank in range(args.n_rollout_threads)])
            returns = _Returns(scenario, args.n_rollout_threads, steps_per_update)
            envs.record = returns.step
            with tempfile.TemporaryDirectory(prefix="onpolicy-") as run_dir, \
                    contextlib.redirect_stdout(io.StringIO()):
                runner = runner_class({"all_args": args, "envs": envs, "eval_envs": None,
                                       "num_agents": args.num_agents, "device": torch.device("cpu"),
                                       "run_dir": Path(run_dir)})
                runner.on_update = returns.close_update
                runner.run()
            envs.close()
            train.update_seconds = np.diff(returns.stamps)  # steady-state cost, for time_updates
            return returns.result()
        finally:
            torch.set_num_threads(saved[0])
            torch.set_rng_state(saved[1])
            np.random.set_state(saved[2])

    return train


def _env_fn(args, rank: int, match_mpe2: bool):
    """``train_mpe.make_train_env``'s env of ``rank``: seeded with ``seed + 1000 * rank`` (their ``seed``
    reseeds numpy's global generator)."""

    def init_env():
        env = make_env(args, match_mpe2)
        env.seed(args.seed + rank * 1000)
        return env

    return init_env


def time_updates(scenario: str, updates: int = 4, config: dict | None = None, path: str | None = None) -> dict:
    """Wall-clock cost of a short run at the published configuration (``config`` overriding): the whole run's
    seconds, the median seconds between consecutive updates' ends (rollout + training, setup excluded) and
    the env steps per update."""
    import_onpolicy(path)
    args = all_args(scenario, config)
    per_update = args.episode_length * args.n_rollout_threads
    train = make_train(scenario, updates * per_update, config, path)
    start = time.perf_counter()
    train(0)
    return {"run_seconds": time.perf_counter() - start, "update_seconds": float(np.median(train.update_seconds)),
            "steps_per_update": per_update}
