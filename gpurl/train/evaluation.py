"""Evaluating trained policies: episodes with new seeds, per-episode totals, means with confidence intervals.

What ``gpurl eval`` runs (:mod:`gpurl.train.eval_cli`). Every env of a batch plays the same number of whole
episodes from its reset, and each of those episodes counts: stopping at the first N episodes to end would
favour short ones. An episode's totals are the trainer's (:class:`~.metrics.EpisodeStats`): each group's
return (the mean over its agents of their summed rewards), the episode length and the env's metrics (e.g.
Tag's tags per episode).
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import torch

from .fragments import RandomActor
from .metrics import EpisodeStats

#: Two-sided 95% quantiles of Student's t for 1 to 4 degrees of freedom; from 5 on, the expansion below.
_T975_SMALL = {1: 12.706204736, 2: 4.302652730, 3: 3.182446305, 4: 2.776445105}
_Z975 = 1.959963984540054

#: Most episodes one evaluation may ask for (``gpurl eval --episodes``, ``gpurl train --eval-episodes``).
#: Why a million: the 95% interval of a mean over n episodes narrows as 1/sqrt(n), so at a million it is
#: already 0.2% of one episode's spread (the defaults ask for 100 and 256). It is also the step budget:
#: a million episodes of the longest preset episode (500 steps) are 5e8 env steps per policy, hours on a
#: CPU. A larger value is a typo, not a measurement, and would run for days or never end.
MAX_EVAL_EPISODES = 1_000_000


def check_eval_episodes(value: int, flag_name: str, minimum: int = 1) -> int:
    """``value`` if it is an int from ``minimum`` to :data:`MAX_EVAL_EPISODES`; else ValueError, one line
    naming ``flag_name``, the value and the range allowed (``minimum=0`` where 0 means "skip")."""
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_EVAL_EPISODES:
        raise ValueError(f"{flag_name} {value!r} is out of range: give {minimum} to {MAX_EVAL_EPISODES} episodes "
                         f"(the bound is MAX_EVAL_EPISODES in gpurl/train/evaluation.py)")
    return value


def t_quantile_975(df: int) -> float:
    """The 97.5% quantile of Student's t with ``df`` degrees of freedom: a table for df 1-4, else the
    Cornish-Fisher expansion around the normal quantile (Abramowitz and Stegun 26.7.5, four terms: within
    3e-4 of the exact value from df 5 on)."""
    if df < 1:
        raise ValueError(f"Student's t needs df >= 1, got {df}")
    if df in _T975_SMALL:
        return _T975_SMALL[df]
    z = _Z975
    return (z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * df ** 3)
            + (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / (92160 * df ** 4))


def mean_std_ci95(values: list[float]) -> tuple[float, float | None, float | None]:
    """``(mean, sample standard deviation, half-width of the mean's 95% confidence interval)`` (Student's t)
    of ``values``; a single value has neither spread nor interval (None, None)."""
    n = len(values)
    if n == 0:
        raise ValueError("no values to summarise")
    mean = math.fsum(values) / n
    if n == 1:
        return mean, None, None
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, std, t_quantile_975(n - 1) * std / math.sqrt(n)


def summarize(values: torch.Tensor) -> dict[str, float]:
    """:func:`mean_std_ci95` of per-episode values [n] (one episode: std 0, no interval)."""
    mean, std, half = mean_std_ci95(values.double().tolist())  # host-ok: an evaluation's totals, read once
    return {"mean": mean, "std": std or 0.0, "ci95": half, "episodes": values.numel()}


class RandomPolicy:
    """Every group uniformly at random (the random baseline), called like a trained policy."""

    def __init__(self, env, seed: int):
        self.env = env
        self.actor = RandomActor(dict(env.groups), env.device)
        self.generator = torch.Generator(env.device).manual_seed(seed)
        self._slot: SimpleNamespace | None = None

    def __call__(self, obs: torch.Tensor, starts: torch.Tensor | None = None) -> torch.Tensor:
        E = obs.shape[0]
        if self._slot is None or self._slot.actions.shape[1] != E:
            env = self.env
            self._slot = SimpleNamespace(actions=torch.zeros(1, E, env.num_agents, env.action_dims,
                                                             dtype=env.action_dtype, device=env.device))
        self.actor.run(self._slot, 0, self.generator)
        return self._slot.actions[0]


class Lineup:
    """Who plays which groups: ``players`` is ``[(policy, groups)]``; a group no player names plays at random.
    Called like one policy, it returns the actions of all of them side by side."""

    def __init__(self, env, players: list[tuple[object, list[str]]], seed: int):
        taken = [g for _, groups in players for g in groups]
        twice = sorted({g for g in taken if taken.count(g) > 1})
        if twice:
            raise ValueError(f"groups {twice} are given to two players")
        unknown = sorted(set(taken) - set(env.groups))
        if unknown:
            raise ValueError(f"groups {unknown} are not groups of {env.env_name()!r} ({list(env.groups)})")
        rest = [g for g in env.groups if g not in taken]
        self.env = env
        self.players = players + ([(RandomPolicy(env, seed), rest)] if rest else [])
        self._actions: torch.Tensor | None = None

    def __call__(self, obs: torch.Tensor, starts: torch.Tensor | None = None) -> torch.Tensor:
        if len(self.players) == 1:
            return self.players[0][0](obs, starts)
        if self._actions is None or self._actions.shape[0] != obs.shape[0]:
            env = self.env
            self._actions = torch.zeros(obs.shape[0], env.num_agents, env.action_dims, dtype=env.action_dtype,
                                        device=env.device)
        for policy, groups in self.players:
            actions = policy(obs, starts)
            for name in groups:
                agents = self.env.groups[name].agents
                self._actions[:, agents] = actions[:, agents]
        return self._actions


@torch.no_grad()
def play_episodes(env, policy, episodes_per_env: int, max_steps: int = 1_000_000) -> dict[str, torch.Tensor]:
    """Each of ``env``'s envs (autoreset on) plays ``episodes_per_env`` whole episodes from a reset, acted by
    ``policy(obs, starts) -> actions``; returns every episode's totals by column name, float32 [E * k]."""
    if not env.autoreset:
        raise ValueError("play_episodes needs an env made with autoreset=True")
    E = env.num_envs
    stats = EpisodeStats(E, {n: g.agents for n, g in env.groups.items()}, sorted(env.step_metrics()), env.device)
    totals = torch.zeros(E, len(stats.columns()), device=env.device)
    played = torch.zeros(E, dtype=torch.int64, device=env.device)
    finished = []
    obs, starts = env.reset(), None
    for _ in range(max_steps):
        obs, reward, terminated, truncated, _ = env.step(policy(obs, starts))
        starts = terminated | truncated
        stats.update(reward, terminated, truncated, env.step_metrics(), totals=totals)
        counted = starts & (played < episodes_per_env)
        finished.append(totals[counted])  # host-ok: an evaluation, not a rollout
        played += counted.to(torch.int64)
        if bool((played >= episodes_per_env).all()):  # host-ok: once per step of an evaluation
            break
    else:
        raise RuntimeError(f"{int((played < episodes_per_env).sum())} envs did not finish {episodes_per_env} "
                           f"episodes in {max_steps} steps")
    rows = torch.cat(finished)
    return {name: rows[:, c] for c, name in enumerate(stats.columns())}


__all__ = ["MAX_EVAL_EPISODES", "Lineup", "RandomPolicy", "check_eval_episodes", "mean_std_ci95", "play_episodes",
           "summarize", "t_quantile_975"]
