"""Episodes, owned by the toolkit: an env's phases plus the ones that end, freeze and restart envs.

An env author writes two lists of phases (:mod:`gpurl.kernels`), and may write a third, all
``fn(e, [i,] s, c, actions)``:

- ``step_phases``: one step of a running env. They write ``s.obs``, ``s.reward``, ``s.terminated`` and
  ``s.truncated`` (and the env's metrics) of every env they run for;
- ``start_phases``: draw a new episode of env ``e`` (keyed by ``s.episode[e]``, the count of episodes
  started since the seed was set) and write its first ``s.obs``;
- ``state_phases``: write the global state ``s.global_state[e, :]`` (float32 [E, S]) from the env's
  arrays; they run after the step phases of a stepping env and after the start phases of a restarting
  one, so the state always describes the moment ``s.obs`` does. Without them the toolkit writes its
  default, every agent's observation in agent order (:func:`default_state_phases`). An env made with
  ``global_state=False`` (``c.write_global_state == 0``) runs none of them and copies no final global
  state: its ``s.global_state`` and ``s.final_global_state`` are [E, 0] (one build serves both settings).

:func:`episode_kernel` turns them into one kernel that serves ``env.step`` (``c.launch == STEP``) and
``env.reset`` (``c.launch == RESET``), one compile for both:

    step phases + state phases (running envs) | settle (per env)
    | final obs and final global state (autoresetting envs)
    | start phases + state phases (restarting envs) | count the episode (restarting envs)

``settle`` decides each env's fate after a step: it restarts (``autoreset=True``) or stays ended
(``s.status`` ENDED: skipped, reward 0, metrics 0, until ``env.reset``). In a reset launch it clears the
flags of the envs being reset (``s.restart``, copied from the reset mask). An autoresetting env's last
observation and global state are copied into ``s.final_obs`` and ``s.final_global_state`` before its new
episode overwrites ``s.obs`` and ``s.global_state``.
"""
from __future__ import annotations

import numpy as np

from ..kernels.program import EnvKernel, Phase, per_agent, per_env
from ..kernels.targets import device

#: ``c.launch``: what a launch of an episode kernel does.
STEP, RESET = 0, 1
#: ``s.status`` of an env: it runs; it ended with autoreset=False and waits for ``env.reset``.
RUNNING, ENDED = 0, 1

#: What the toolkit adds to the arrays (``s``) and constants (``c``) an env declares.
TOOLKIT_ARRAYS = ("obs", "final_obs", "reward", "terminated", "truncated", "global_state", "final_global_state",
                  "episode", "status", "restart", "global_state_layout")
TOOLKIT_CONSTANTS = ("seed", "env_id_offset", "autoreset", "launch", "write_global_state")

_ZERO = np.float32(0.0)


@device
def stepping(e, s, c, actions):
    """Env e takes this step: a step launch, and the env has not ended (autoreset=False)."""
    return c.launch == STEP and s.status[e] == RUNNING


@device
def restarting(e, s, c, actions):
    """Env e starts a new episode in this launch (an autoreset, or a reset of its mask)."""
    return s.restart[e] != 0


@device
def autoresetting(e, s, c, actions):
    return c.launch == STEP and s.restart[e] != 0


@device
def stepping_with_state(e, s, c, actions):
    """Env e takes this step and the env writes a global state (``c.write_global_state``)."""
    return c.write_global_state != 0 and c.launch == STEP and s.status[e] == RUNNING


@device
def restarting_with_state(e, s, c, actions):
    """Env e starts a new episode in this launch and the env writes a global state."""
    return c.write_global_state != 0 and s.restart[e] != 0


def copy_final_outputs(e, i, s, c, actions):
    """Agent i's last observation of the episode that just ended, and its share (features i, i + N, ...) of
    the env's last global state (when the env writes one), before the new episode overwrites them."""
    for f in range(s.obs.shape[2]):
        s.final_obs[e, i, f] = s.obs[e, i, f]
    if c.write_global_state != 0:
        for f in range(i, s.global_state.shape[1], s.obs.shape[1]):
            s.final_global_state[e, f] = s.global_state[e, f]


def observations_to_state(e, i, s, c, actions):
    """The default global state: agent i's observation (its group's ``obs_dim`` features) at its offset
    (``s.global_state_layout[i] = (offset, obs_dim)``)."""
    # Unsigned indices: Numba skips the negative-index wraparound of every access (this runs every step).
    offset = np.uint64(s.global_state_layout[i, 0])
    obs = s.obs[e, i]
    state = s.global_state[e]
    for f in range(np.uint64(s.global_state_layout[i, 1])):
        state[offset + f] = obs[f]


def default_state_phases() -> list[Phase]:
    """The global state of an env that declares no ``state_phases``: every agent's observation, cut to its
    group's ``obs_dim`` and concatenated in agent order (S = sum over groups of agents x obs_dim; the
    layout table is :func:`global_state_layout`)."""
    return [per_agent(observations_to_state)]


def global_state_layout(groups) -> np.ndarray:
    """int32 [N, 2]: (offset, width) of each agent's observation in the default global state of
    ``groups`` (an ordered ``{name: Group}``), agents in order, each as wide as its group's ``obs_dim``."""
    rows, offset = [], 0
    for group in groups.values():
        for _ in range(group.agents.start, group.agents.stop):
            rows.append((offset, group.obs_dim))
            offset += group.obs_dim
    return np.array(rows, dtype=np.int32).reshape(-1, 2)


def default_global_state_ref(obs: np.ndarray, groups) -> np.ndarray:
    """The default global state of observations ``obs`` [E, N, obs_dim] (NumPy): float32 [E, S], each
    agent's first ``obs_dim`` features of its group, concatenated in agent order (the reference of
    :func:`default_state_phases`)."""
    obs = np.asarray(obs, np.float32)
    rows = [obs[:, g.agents, :g.obs_dim].reshape(obs.shape[0], -1) for g in groups.values()]
    return np.concatenate(rows, axis=1)


def default_global_state_dim(groups) -> int:
    """S of the default global state: sum over ``groups`` of agents x obs_dim."""
    return sum((g.agents.stop - g.agents.start) * g.obs_dim for g in groups.values())


def count_episode(e, s, c, actions):
    s.episode[e] += 1


_SETTLE = '''
def settle(e, s, c, actions):
    if c.launch != STEP:
        if s.restart[e] != 0:
            s.status[e] = RUNNING
            s.terminated[e] = False
            s.truncated[e] = False
{clear_reset}
        return
    if s.status[e] != RUNNING:
        for i in range(s.reward.shape[1]):
            s.reward[e, i] = ZERO
{clear_ended}
        s.restart[e] = 0
        return
    ended = s.terminated[e] != 0 or s.truncated[e] != 0
    s.restart[e] = 1 if ended and c.autoreset != 0 else 0
    if ended and c.autoreset == 0:
        s.status[e] = ENDED
'''


def settle_phase(metrics: tuple[str, ...]) -> Phase:
    """The per-env phase after the step phases (see the module docstring); it zeroes ``metrics`` (per-env
    float32 fields) of ended envs and of envs being reset."""
    def clear(indent: str) -> str:
        return "\n".join(f"{indent}s.{name}[e] = ZERO" for name in metrics) or f"{indent}pass"

    source = _SETTLE.replace("{clear_reset}", clear(" " * 12)).replace("{clear_ended}", clear(" " * 8))
    namespace = {"STEP": STEP, "RUNNING": RUNNING, "ENDED": ENDED, "ZERO": _ZERO, "__name__": __name__}  # gpurl's
    exec(compile(source, "<gpurl settle>", "exec"), namespace)
    settle = namespace["settle"]
    settle.__doc__ = f"gpurl's end of a step, clearing metrics {metrics}"
    return per_env(settle)


def _guarded(phases, when, rare: bool, role: str, env_name: str) -> list[Phase]:
    out = []
    for phase in phases:
        if not isinstance(phase, Phase):
            raise TypeError(f"{env_name}.{role}: expected phases made with per_agent()/per_env(), got {phase!r}")
        if phase.when is not None:
            raise ValueError(f"{env_name}.{role}: {phase.fn.__name__} has when=...; the toolkit decides which "
                             f"envs run {role} (drop when=, or test your own condition inside the phase)")
        out.append(Phase(phase.kind, phase.fn, when, rare))
    return out


def episode_kernel(env_name: str, step_phases, start_phases, metrics: tuple[str, ...],
                   state_phases=None, launch_bounds=None) -> EnvKernel:
    """The one kernel of an env: its phases and the toolkit's, guarded as the module docstring says
    (``state_phases`` None or empty: :func:`default_state_phases`); ``launch_bounds``: its CUDA build's
    (:class:`~gpurl.kernels.program.EnvKernel`)."""
    state_phases = list(state_phases or default_state_phases())
    if not step_phases:
        raise ValueError(f"{env_name}.step_phases is empty: a step needs at least one phase")
    if not start_phases:
        raise ValueError(f"{env_name}.start_phases is empty: an episode must be drawn and observed")
    # An env restarts once per episode: the restart phases are rare (out of line on the CPU).
    phases = (_guarded(step_phases, stepping, False, "step_phases", env_name)
              + _guarded(state_phases, stepping_with_state, False, "state_phases", env_name)
              + [settle_phase(tuple(metrics)), per_agent(copy_final_outputs, when=autoresetting, rare=True)]
              + _guarded(start_phases, restarting, True, "start_phases", env_name)
              + _guarded(state_phases, restarting_with_state, True, "state_phases", env_name)
              + [per_env(count_episode, when=restarting, rare=True)])
    return EnvKernel(env_name, phases, nargs=3, launch_bounds=launch_bounds)
