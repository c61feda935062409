"""Episodes, owned by the toolkit: an env's phases plus the ones that end, freeze and restart envs.

An env author writes two lists of phases (:mod:`gpurl.kernels`), both ``fn(e, [i,] s, c, actions)``:

- ``step_phases``: one step of a running env. They write ``s.obs``, ``s.reward``, ``s.terminated`` and
  ``s.truncated`` (and the env's metrics) of every env they run for;
- ``start_phases``: draw a new episode of env ``e`` (keyed by ``s.episode[e]``, the count of episodes
  started since the seed was set) and write its first ``s.obs``.

:func:`episode_kernel` turns them into one kernel that serves ``env.step`` (``c.launch == STEP``) and
``env.reset`` (``c.launch == RESET``), one compile for both:

    step phases (running envs) | settle (per env) | final obs (autoresetting envs)
    | start phases (restarting envs) | count the episode (restarting envs)

``settle`` decides each env's fate after a step: it restarts (``autoreset=True``) or stays ended
(``s.status`` ENDED: skipped, reward 0, metrics 0, until ``env.reset``). In a reset launch it clears the
flags of the envs being reset (``s.restart``, copied from the reset mask). An autoresetting env's last
observation is copied into ``s.final_obs`` before its new episode overwrites ``s.obs``.
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
TOOLKIT_ARRAYS = ("obs", "final_obs", "reward", "terminated", "truncated", "episode", "status", "restart")
TOOLKIT_CONSTANTS = ("seed", "env_id_offset", "autoreset", "launch")

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


def copy_final_obs(e, i, s, c, actions):
    """Agent i's last observation of the episode that just ended, before the new one overwrites it."""
    for f in range(s.obs.shape[2]):
        s.final_obs[e, i, f] = s.obs[e, i, f]


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
    namespace = {"STEP": STEP, "RUNNING": RUNNING, "ENDED": ENDED, "ZERO": _ZERO}
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


def episode_kernel(env_name: str, step_phases, start_phases, metrics: tuple[str, ...]) -> EnvKernel:
    """The one kernel of an env: its phases and the toolkit's, guarded as the module docstring says."""
    if not step_phases:
        raise ValueError(f"{env_name}.step_phases is empty: a step needs at least one phase")
    if not start_phases:
        raise ValueError(f"{env_name}.start_phases is empty: an episode must be drawn and observed")
    # An env restarts once per episode: the restart phases are rare (out of line on the CPU).
    phases = (_guarded(step_phases, stepping, False, "step_phases", env_name)
              + [settle_phase(tuple(metrics)), per_agent(copy_final_obs, when=autoresetting, rare=True)]
              + _guarded(start_phases, restarting, True, "start_phases", env_name)
              + [per_env(count_episode, when=restarting, rare=True)])
    return EnvKernel(env_name, phases, nargs=3)
