"""Trained policies out of a run: ``gpurl.load_policy(path)`` gives a callable that maps observations to actions.

    policy = gpurl.load_policy("runs/tag-10v100-seed0-...")      # a run dir or a checkpoint file
    env = gpurl.make(policy.env_name, num_envs=16, **policy.env_params)
    obs = env.reset()
    starts = None
    for _ in range(100):
        actions = policy(obs, starts)                             # [E, N, action_dims]
        obs, reward, terminated, truncated, _ = env.step(actions)
        starts = terminated | truncated                           # the next obs begins an episode there

The policy acts as it did in training: the same networks, the same policy inputs (a frame stack keeps the
last ``frame_stack`` observations of each env; a recurrent policy carries its state; both restart where
``starts`` says an episode begins), sampled from the counter RNG keyed by ``seed`` (or, ``deterministic``, each
agent's most likely action; value-based policies act greedily either way). Groups the run did not train act
uniformly at random, as they did in training. Acting runs the eager torch definition
(:meth:`gpurl.algos.nets.ActorCritic.act`), on any device.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from ..algos import ALGORITHMS, EnvSpec
from ..envs import make, resolve_device
from ..fusion.counter_rng import seed_tensor
from ..storage.rollout import RolloutStorage
from .checkpoint import CheckpointError, latest_checkpoint, load_checkpoint
from .config import TrainConfig
from .fragments import RandomActor


def read_checkpoint(path: str | Path, say=print) -> tuple[Path, dict]:
    """``(file, checkpoint)`` of a run dir (its newest checkpoint that loads) or a checkpoint file;
    CheckpointError naming the path when there is none or it does not load."""
    path = Path(path)
    if path.is_dir():
        found = latest_checkpoint(path, say)
        if found is None:
            raise CheckpointError(f"{path} holds no checkpoint (checkpoint.pt): is it a gpurl run directory?")
        return found
    return path, load_checkpoint(path)


def check_env_fits(checkpoint: dict, source, env) -> None:
    """CheckpointError unless ``env`` is the env the checkpoint's run trained on (name, then every group's
    agents, observation width and action space), before anything acts."""
    saved = checkpoint["config"]
    if saved.get("env") != env.env_name():
        raise CheckpointError(f"checkpoint {source} was trained on env {saved.get('env')!r}; this env is "
                              f"{env.env_name()!r}")
    trained = saved.get("train_groups") or list(env.groups)
    missing = [g for g in trained if g not in env.groups]
    if missing:
        raise CheckpointError(f"checkpoint {source} trained groups {missing} that this {env.env_name()!r} env lacks "
                              f"(it has {list(env.groups)})")


class TrainedPolicy:
    """The policies of one checkpoint acting on batches of ``env``'s kind (any number of envs).

    ``policy(obs, starts=None)``: obs float32 [E, N, obs_dim] as the env returns it; ``starts`` bool [E]: this
    observation begins an episode (None: only on the first call, or after :meth:`reset`). Returns actions
    [E, N, action_dims] (int64, or float32 for Box groups), a buffer the next call rewrites.
    """

    def __init__(self, checkpoint: dict, env, source="the checkpoint given", deterministic: bool = False,
                 seed: int = 0):
        check_env_fits(checkpoint, source, env)
        saved = TrainConfig.from_dict(checkpoint["config"])
        # Eager acting: the definition itself, on any device and for any batch size, no compile wait.
        eager = dataclasses.replace(saved.algo_params, policy_backend="eager", learner_backend="eager")
        self.config = dataclasses.replace(saved, algo_params=eager, cuda_graph=False)
        self.source, self.deterministic = str(source), bool(deterministic)
        self.env_name, self.env_params = saved.env, dict(saved.env_params)
        self.device = env.device
        self.groups = dict(env.groups)
        self.trained = [g for g in self.groups if not saved.train_groups or g in saved.train_groups]
        self.iteration = int(checkpoint["iteration"])
        algo_class = ALGORITHMS[saved.algo]
        self.algo = algo_class(self.config, EnvSpec.of(env), self.trained, saved.seed, torch.Generator())
        try:
            self.algo.load_state_dict(checkpoint["algo_state"])
        except (RuntimeError, KeyError, ValueError) as err:
            raise CheckpointError(f"checkpoint {source}: its {saved.algo} networks do not fit this env's groups "
                                  f"({type(err).__name__}: {str(err).splitlines()[0]})") from err
        self.random_actor = RandomActor({n: g for n, g in self.groups.items() if n not in self.trained}, self.device)
        self.generator = torch.Generator(self.device).manual_seed(seed)
        self.seed = seed_tensor(seed, self.device)
        self.step = torch.zeros(1, dtype=torch.int64, device=self.device)
        self._env = env
        self._storage: RolloutStorage | None = None

    @property
    def algorithm(self) -> str:
        return self.config.algo

    def reset(self) -> None:
        """Forget every env's history: the next call's observations all begin episodes."""
        self._storage = None

    @torch.no_grad()
    def __call__(self, obs: torch.Tensor, starts: torch.Tensor | None = None) -> torch.Tensor:
        s = self._input(obs, starts)
        self.random_actor.run(s, 0, self.generator)
        self.algo.actor.run(s, 0, self.step, self.seed, deterministic=self.deterministic)
        self.step += 1
        return s.actions[0]

    def _input(self, obs: torch.Tensor, starts: torch.Tensor | None) -> RolloutStorage:
        """The storage whose slot 0 holds ``obs`` (after the frames before it), checked first."""
        env = self._env
        expected = (env.num_agents, env.obs_dim)
        if not isinstance(obs, torch.Tensor) or obs.dim() != 3 or tuple(obs.shape[1:]) != expected:
            got = tuple(obs.shape) if isinstance(obs, torch.Tensor) else type(obs).__name__
            raise ValueError(f"observations must be a float32 tensor [num_envs, {expected[0]}, {expected[1]}] of "
                             f"{self.env_name!r}, got {got}")
        if obs.dtype != torch.float32 or obs.device != self.device:
            raise ValueError(f"observations must be float32 on {self.device}, got {obs.dtype} on {obs.device}")
        E = obs.shape[0]
        if starts is not None and (not isinstance(starts, torch.Tensor) or tuple(starts.shape) != (E,)
                                   or starts.dtype != torch.bool):
            raise ValueError(f"starts must be a bool tensor [{E}] (which envs' observations begin an episode)")
        s = self._storage
        if s is None or s.obs.shape[1] != E:
            if s is not None and starts is not None:
                raise ValueError(f"this policy acted on {s.obs.shape[1]} envs; {E} now (call reset() first)")
            s = self._storage = RolloutStorage(1, E, env.num_agents, env.obs_dim, env.action_dims, env.action_dtype,
                                               self.config.algo_params.frame_stack - 1, self.device, self.algo.fields(),
                                               env.global_state_dim if self.algo.reads_global_state else 0)
            s.start(obs, torch.zeros(E, s.state_dim, device=self.device) if s.state_dim else None)
            return s
        H = s.history
        s.obs[H + 1].copy_(obs)
        s.starts[H + 1] = False if starts is None else starts.to(self.device)
        s.roll_over()
        return s


def load_policy(path: str | Path, env=None, deterministic: bool = False, seed: int = 0, device=None,
                say=print) -> TrainedPolicy:
    """The trained policies of a run dir or checkpoint file as a callable obs -> actions (:class:`TrainedPolicy`).

    ``env``: the gpurl env it will act in (checked against the run's: CheckpointError if another env); None
    builds a one-env copy of the run's env on ``device`` (default: CUDA if usable) to learn its shapes, and the
    policy acts on any batch of that env. ``seed`` keys its random draws.
    """
    source, checkpoint = read_checkpoint(path, say)
    if env is None:
        config = TrainConfig.from_dict(checkpoint["config"])
        config.import_env_modules()
        env = make(config.env, num_envs=1, device=resolve_device(device), seed=seed, **config.env_params)
    return TrainedPolicy(checkpoint, env, source, deterministic, seed)


__all__ = ["TrainedPolicy", "check_env_fits", "load_policy", "read_checkpoint"]
