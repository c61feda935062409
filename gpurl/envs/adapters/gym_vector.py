"""``GymVectorEnv``: one agent group of a gpurl env as a ``gymnasium.vector.VectorEnv``."""
from __future__ import annotations

from typing import Any, Callable

import gymnasium
import numpy as np
import torch
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from ..checks import check_seed
from ..spaces import action_bounds
from ._common import (check_host_actions, check_open, check_random_space, host_arrays, host_copy, is_discrete,
                      observation_space, random_actions)

#: other_actions(group name, obs float32 [num_envs, group size, group obs_dim] on env.device)
#: -> actions [num_envs, group size, action_dims] (or [num_envs, group size] for Discrete) on env.device.
OtherPolicy = Callable[[str, torch.Tensor], torch.Tensor]


def choose_group(env, group: str | None) -> str:
    """``group``, checked; None means the env's only group that has agents."""
    if group is None:
        populated = [name for name, g in env.groups.items() if g.agents.stop > g.agents.start]
        if len(populated) != 1:
            raise ValueError(f"group=None needs an env with one agent group; this env has groups {list(env.groups)}:"
                             " pass group=<name>")
        return populated[0]
    if group not in env.groups:
        raise ValueError(f"unknown group {group!r}; this env's groups are {list(env.groups)}")
    return group


class GymVectorEnv(gymnasium.vector.VectorEnv):
    """The agents of one group of a batched gpurl env, flattened into Gymnasium sub-envs.

    Sub-env ``j = e * group_size + k`` is agent ``k`` of the group in gpurl env ``e``, so
    ``num_envs = env.num_envs * group_size``. Each step returns numpy arrays:

    - obs float32 ``[num_envs, group obs_dim]`` (a group's padded row is cut to its own ``obs_dim``),
    - rewards float64 ``[num_envs]``; terminations, truncations bool ``[num_envs]`` (an env's flags are
      repeated for each of its agents: they end together),
    - infos: ``{}``, or, when some env ended, Gymnasium's SAME_STEP keys: ``final_obs`` (object array
      ``[num_envs]`` holding each ended sub-env's last obs, None elsewhere), ``_final_obs`` (bool mask),
      ``final_info`` (``{}``, gpurl has no per-env step info) and ``_final_info``.

    gpurl resets an ended env inside the same step (``metadata["autoreset_mode"] == SAME_STEP``): ``obs``
    already holds the first observation of its next episode. ``env`` must be made with
    ``autoreset=True``; the adapter owns it from here on (stepping it directly desynchronises both).

    Agents of the other groups act by ``other_actions``:

    - ``"random"`` (default): uniform over their action space, from a torch generator on ``env.device``
      seeded with ``env.seed`` and re-seeded by ``reset(seed=s)``: the same seed gives the same run;
    - ``"noop"``: all zeros (index 0 is the no-op of every built-in env's discrete actions; zero force
      for simple_tag's Box actions);
    - a callable ``other_actions(group, obs)`` (see ``OtherPolicy``): ``obs`` is a view of the current
      observations of that group, valid only during the call; it returns that group's actions.
    """

    def __init__(self, env, group: str | None = None, other_actions: str | OtherPolicy = "random"):
        if not env.autoreset:
            raise ValueError("GymVectorEnv needs a gpurl env made with autoreset=True (Gymnasium SAME_STEP "
                             "autoreset); got autoreset=False")
        if not (callable(other_actions) or (isinstance(other_actions, str) and other_actions in ("random", "noop"))):
            raise ValueError(f"other_actions must be 'random', 'noop' or a callable, got {other_actions!r}")
        self.env = env
        self.group = choose_group(env, group)
        self.other_actions = other_actions
        spec = env.groups[self.group]
        self._agents = spec.agents
        self._obs_dim = spec.obs_dim
        self._group_size = spec.agents.stop - spec.agents.start
        self._others = [name for name, g in env.groups.items()
                        if name != self.group and g.agents.stop > g.agents.start]
        if other_actions == "random":
            for name in self._others:
                check_random_space(env.groups[name].action_space, name)

        self.num_envs = env.num_envs * self._group_size
        self.single_observation_space = observation_space(self._obs_dim)
        self.single_action_space = spec.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}
        self.render_mode = None

        discrete = is_discrete(spec.action_space)
        # All agents' actions go in one step, [E, N, action_dims] (a narrower Box group's padded with 0);
        # each group writes its own columns of its own rows, a view taken once.
        self._actions = torch.zeros(env.num_envs, env.num_agents, env.action_dims,
                                    dtype=torch.int64 if discrete else torch.float32, device=env.device)
        self._own_actions = self._group_actions(self.group)
        self._other_actions = {name: self._group_actions(name) for name in self._others}
        self._generator = torch.Generator(device=env.device)
        self._generator.manual_seed(env.seed)

    # ---- Gymnasium API ---------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset every env; returns ``(obs float32 [num_envs, obs_dim], {})``.

        ``seed`` (one int in [0, 2**64): gpurl keys all envs of a batch by one seed and their env ids)
        re-keys the env and the other groups' random actions; a full reset with the same seed repeats a
        run exactly. After ``close()`` a call is a RuntimeError.
        """
        check_open(self)
        if seed is not None and (isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer))):
            raise ValueError(f"seed must be one int or None (gpurl seeds the whole batch), got {seed!r}")
        if seed is not None:
            check_seed(seed)  # [0, 2**64): checked before the generators below are re-seeded
        if options:
            raise ValueError(f"GymVectorEnv.reset takes no options, got {sorted(options)}")
        if seed is not None:
            self._np_random, self._np_random_seed = seeding.np_random(int(seed))
            self._generator.manual_seed(int(seed))
        obs = self.env.reset(seed=None if seed is None else int(seed))
        return self._group_obs(obs), {}

    def step(self, actions):
        """Step every env with ``actions`` (``action_space``: [num_envs, *single_action_space.shape]).

        Returns ``(obs, rewards, terminations, truncations, infos)`` as described in the class docstring.
        """
        check_open(self)
        env, G = self.env, self._group_size
        host = check_host_actions(actions, self.single_action_space, self.num_envs, self._name_sub_env)
        self._own_actions.copy_(torch.from_numpy(host.reshape(self._own_actions.shape)))
        for name in self._others:
            self._act_for(name)
        obs, reward, terminated, truncated, info = env.step(self._actions)

        # One wait for the device: the flags, the rewards and the observations come back together.
        terminations, truncations, rewards, obs_rows = host_arrays(terminated, truncated, reward[:, self._agents],
                                                                   self._group_rows(obs))
        terminations, truncations = np.repeat(terminations, G), np.repeat(truncations, G)
        rewards = rewards.reshape(self.num_envs).astype(np.float64)
        infos: dict[str, Any] = {}
        ended = terminations | truncations
        if ended.any():
            final = self._group_obs(info["final_obs"])
            final_obs = np.full(self.num_envs, None, dtype=object)
            for j in np.flatnonzero(ended):
                final_obs[j] = final[j]
            infos = {"final_obs": final_obs, "_final_obs": ended, "final_info": {}, "_final_info": ended.copy()}
        return obs_rows.reshape(self.num_envs, self._obs_dim), rewards, terminations, truncations, infos

    def close_extras(self, **kwargs):
        self.env = None  # gpurl envs hold no OS resources; dropping the reference frees the buffers

    # ---- helpers ---------------------------------------------------------------------------------

    def _group_rows(self, obs: torch.Tensor) -> torch.Tensor:
        """[E, N, env.obs_dim] -> the group's rows, [E, group size, group obs_dim] (a view)."""
        return obs[:, self._agents, :self._obs_dim]

    def _group_obs(self, obs: torch.Tensor) -> np.ndarray:
        """[E, N, env.obs_dim] -> float32 [E * group size, group obs_dim], a fresh host array."""
        return host_copy(self._group_rows(obs)).reshape(self.num_envs, self._obs_dim)

    def _group_actions(self, name: str) -> torch.Tensor:
        """The columns of group ``name``'s actions in the step's action tensor: a view [E, its size, its
        action dims] (a narrower Box group's columns after its own stay 0)."""
        group = self.env.groups[name]
        return self._actions[:, group.agents, :action_bounds(group.action_space)[0]]

    def _name_sub_env(self, j: int) -> str:
        e, k = divmod(j, self._group_size)
        return f"sub-env {j} (env {e}, {self.group} agent {k})"

    def _act_for(self, name: str) -> None:
        group = self.env.groups[name]
        target = self._other_actions[name]
        if self.other_actions == "random":
            random_actions(group.action_space, target, self._generator)
        elif self.other_actions == "noop":
            target.zero_()
        else:
            acted = self.other_actions(name, self.env.obs[:, group.agents, :group.obs_dim])
            target.copy_(self._check_other(name, acted, target))

    def _check_other(self, name: str, acted, target: torch.Tensor) -> torch.Tensor:
        if not isinstance(acted, torch.Tensor):
            raise ValueError(f"other_actions({name!r}, obs) must return a torch.Tensor, got {type(acted).__name__}")
        shapes = [tuple(target.shape)] + ([tuple(target.shape[:-1])] if target.shape[-1] == 1 else [])
        if tuple(acted.shape) not in shapes:
            raise ValueError(f"other_actions({name!r}, obs) must return shape {' or '.join(map(str, shapes))}, "
                             f"got {tuple(acted.shape)}")
        if target.dtype == torch.int64 and acted.is_floating_point():
            raise ValueError(f"other_actions({name!r}, obs) must return integer actions, got {acted.dtype}")
        return acted.reshape(target.shape).to(target.device)
