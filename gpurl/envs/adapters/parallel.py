"""``ParallelEnv``: one gpurl env instance as a ``pettingzoo.ParallelEnv``."""
from __future__ import annotations

import copy
from typing import Any

import gymnasium
import numpy as np
import pettingzoo
import torch

from ._common import check_host_actions, check_open, host_arrays, host_copy, is_discrete, observation_space


def default_prefixes(env) -> dict[str, str]:
    """Group name -> agent name prefix: the env's own ``agent_prefixes`` (simple_tag declares mpe2's
    ``adversary``/``agent``), the group name for groups it does not name."""
    own = getattr(env, "agent_prefixes", None) or {}
    return {name: own.get(name, name) for name in env.groups}


class ParallelEnv(pettingzoo.ParallelEnv):
    """A gpurl env with ``num_envs=1`` and ``autoreset=False``, seen through PettingZoo's parallel API.

    Why one env of its own instead of a view into a big batch: stepping a batch needs actions for all of
    its envs and would autoreset the others under their users' feet. gpurl keys its randomness by
    (seed, global env id, ...), so a one-env batch made with ``env_id_offset=k`` and seed ``s`` IS env
    ``k`` of any batch made with seed ``s`` (``parallel_env(name, env_index=k, seed=s)`` builds it):
    same starts, same trajectories under the same actions. ``autoreset=False`` lets the episode end
    where PettingZoo expects it: ``agents`` empties, and ``reset()`` starts the next one.

    Agents are named ``f"{prefix}_{k}"``, ``k`` counting within the group, in gpurl's agent order;
    ``prefix`` comes from ``agent_prefixes`` (group -> prefix, default: the env's own ``agent_prefixes``,
    e.g. mpe2's ``adversary``/``agent`` for simple_tag, else the group name). Per agent:

    - observation: float32 numpy ``[group obs_dim]`` (the padded row is cut to the group's ``obs_dim``);
    - action: an element of ``action_space(agent)`` (the group's space; a copy per agent so that
      seeding one agent's space leaves the others alone);
    - reward: python float; terminations/truncations: the env's flags (agents end together);
      infos: ``{}``.

    The global state (PettingZoo's ``state()`` / ``state_space``, for centralised critics) is the env's
    ``env.global_state`` row (docs/specs/global_state.md): float32 numpy ``[env.global_state_dim]``.

    gpurl ends episodes per env, not per agent: every agent stays in ``agents`` until the env ends
    (e.g. a runner tagged out of tag_continuous stays, with a zero observation and zero reward).
    """

    def __init__(self, env, agent_prefixes: dict[str, str] | None = None):
        if env.num_envs != 1:
            raise ValueError(f"ParallelEnv needs a gpurl env with num_envs=1, got num_envs={env.num_envs} "
                             "(pick one env of a batch with gpurl.envs.adapters.parallel_env(env_index=...))")
        if env.autoreset:
            raise ValueError("ParallelEnv needs a gpurl env made with autoreset=False: PettingZoo ends the "
                             "episode and the caller resets")
        prefixes = default_prefixes(env)
        for group, prefix in (agent_prefixes or {}).items():
            if group not in env.groups:
                raise ValueError(f"agent_prefixes names unknown group {group!r}; groups are {list(env.groups)}")
            prefixes[group] = prefix
        if len(set(prefixes.values())) != len(prefixes):
            raise ValueError(f"agent_prefixes must give every group its own prefix, got {prefixes}")

        self.env = env
        self.closed = False
        self.metadata = {"name": f"gpurl_{type(env).__name__}", "render_modes": [], "is_parallelizable": True}
        self.render_mode = None
        self._rows: dict[str, tuple[int, int]] = {}  # agent -> (gpurl agent index, obs_dim)
        self._observation_spaces, self._action_spaces = {}, {}
        for group, spec in env.groups.items():
            shared_obs_space = observation_space(spec.obs_dim)
            for k, i in enumerate(range(spec.agents.start, spec.agents.stop)):
                agent = f"{prefixes[group]}_{k}"
                self._rows[agent] = (i, spec.obs_dim)
                self._observation_spaces[agent] = copy.deepcopy(shared_obs_space)
                self._action_spaces[agent] = copy.deepcopy(spec.action_space)
        self.possible_agents = list(self._rows)
        self.state_space = observation_space(env.global_state_dim)
        self.agents: list[str] = []
        self._discrete = all(is_discrete(g.action_space) for g in env.groups.values())
        # agent -> n of its Discrete(n) space: step() takes a plain int in [0, n) without the general check
        self._choices = {agent: int(space.n) for agent, space in self._action_spaces.items()
                         if isinstance(space, gymnasium.spaces.Discrete) and space.start == 0}
        self._actions = np.zeros((env.num_agents, env.action_dims),
                                 dtype=np.int64 if self._discrete else np.float32)

    def observation_space(self, agent: str):
        """Box float32 [obs_dim of the agent's group]; the same object on every call."""
        return self._observation_spaces[self._known(agent)]

    def action_space(self, agent: str):
        """The agent's group's space (Discrete, MultiDiscrete or Box); the same object on every call."""
        return self._action_spaces[self._known(agent)]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start an episode; ``seed`` (an int in [0, 2**64)) re-keys the env (same seed, same episode).
        ``options`` is ignored.

        Returns ``(observations, infos)``, dicts keyed by every agent.
        """
        check_open(self)
        obs = self.env.reset(seed=seed)  # seed: None or an int in [0, 2**64), checked before anything changes
        self.agents = list(self.possible_agents)
        return self._observations(obs, self.agents), {agent: {} for agent in self.agents}

    def step(self, actions: dict[str, Any]):
        """Step with one action per live agent; returns (obs, rewards, terminations, truncations, infos).

        Each is a dict keyed by the agents alive before the step; ``agents`` is empty afterwards when the
        episode ended.
        """
        check_open(self)
        if not self.agents:
            raise RuntimeError("the episode is over (or never started): call reset() before step()")
        if not isinstance(actions, dict):
            raise ValueError(f"actions must be a dict agent -> action, got {type(actions).__name__}")
        missing = [a for a in self.agents if a not in actions]
        unknown = [a for a in actions if a not in self._rows]
        if missing or unknown:
            raise ValueError(f"actions must have one entry per agent of .agents; missing {missing}, "
                             f"unknown {unknown}")
        for agent in self.agents:
            value = actions[agent]
            choices = self._choices.get(agent)
            if (choices is not None and isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
                    and 0 <= value < choices):  # a plain int of a Discrete space, in range: the check's verdict
                self._actions[self._rows[agent][0], 0] = value
                continue
            one = np.asarray(value.detach().cpu() if isinstance(value, torch.Tensor) else value)[None]  # host-ok
            named = lambda _k, a=agent: f"agent {a!r}"  # noqa: E731
            checked = check_host_actions(one, self._action_spaces[agent], 1, named)[0]
            self._actions[self._rows[agent][0], :checked.shape[0]] = checked  # a narrower Box group: padded
        batch = torch.as_tensor(self._actions, device=self.env.device).unsqueeze(0)  # [1, N, action_dims]
        obs, reward, terminated, truncated, _ = self.env.step(batch)

        live = self.agents
        # One wait for the device: observations, rewards and flags come back together.
        rows, rewards, ended, cut = host_arrays(obs[0], reward[0], terminated[:1], truncated[:1])
        ended_by = bool(ended[0]), bool(cut[0])
        self.agents = [] if any(ended_by) else list(live)
        return (self._agent_rows(rows, live),
                {a: float(rewards[self._rows[a][0]]) for a in live},
                {a: ended_by[0] for a in live},
                {a: ended_by[1] for a in live},
                {a: {} for a in live})

    def state(self) -> np.ndarray:
        """The global state of the moment the last ``reset``/``step`` observed: float32 numpy
        ``[env.global_state_dim]``, a copy (docs/specs/global_state.md has each env's layout)."""
        check_open(self)
        if self.env._needs_reset:
            raise RuntimeError("call reset() before state(): no episode has started")
        if self.env.global_state is None:
            raise RuntimeError("state(): the gpurl env was made with global_state=False and writes no global "
                               "state (make it with global_state=True)")
        return host_copy(self.env.global_state[0])

    def close(self):
        """Release the env (gpurl envs hold no OS resources: dropping the reference frees the buffers);
        ``reset``/``step`` afterwards are a RuntimeError."""
        self.agents = []
        self.env = None
        self.closed = True

    # ---- helpers ---------------------------------------------------------------------------------

    def _observations(self, obs: torch.Tensor, agents: list[str]) -> dict[str, np.ndarray]:
        return self._agent_rows(host_copy(obs[0]), agents)  # one transfer for all agents

    def _agent_rows(self, rows: np.ndarray, agents: list[str]) -> dict[str, np.ndarray]:
        """float32 [N, env.obs_dim] host rows -> {agent: its row, cut to its group's obs_dim}."""
        return {agent: rows[self._rows[agent][0], :self._rows[agent][1]] for agent in agents}

    def _known(self, agent: str) -> str:
        if agent not in self._rows:
            raise ValueError(f"unknown agent {agent!r}; agents are {self.possible_agents}")
        return agent
