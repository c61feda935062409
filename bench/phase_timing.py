"""Split one env step into its kernel phases: time prefixes of the phase list on one frozen state.

Prefix n = the env's kernel cut after its n-th phase (a real EnvKernel built from the same phases; the
toolkit's phases after the step are guarded and idle on a running state).
Before every timed launch the env's state and buffers are restored from one snapshot, so each prefix
runs on identical input; a phase's cost is prefix(n) - prefix(n-1). Uses internals of the built-in
env (its kernel arguments), which is fine for a benchmark and nothing a user needs. Its rows go into
env_throughput.py's RESULT line (``--phases``).
"""
from __future__ import annotations

import dataclasses
import time

import torch

import gpurl
from gpurl.kernels import EnvKernel

from _common import sync


def action_pool(env, count: int, seed: int) -> list[torch.Tensor]:
    """``count`` action tensors of tag_continuous (int64 [E, N, 2], uniform below each agent's bounds), drawn on
    the env's device up front so that a timed loop measures the env alone."""
    gen = torch.Generator(device=env.device).manual_seed(seed)
    high = env._action_high  # [N, 2] exclusive bounds
    return [(torch.rand((env.num_envs, env.num_agents, 2), generator=gen, device=env.device) * high).long()
            for _ in range(count)]


def _buffers(env) -> list[torch.Tensor]:
    state = [getattr(env.state, f.name) for f in dataclasses.fields(env.state)]
    return state + [env.obs, env.final_obs, env.reward, env.terminated, env.truncated] + list(env._tensors.values())


def time_phases(name: str, params: dict, num_envs: int, args, device, repeats: int = 7) -> list[dict]:
    env = gpurl.make("tag_continuous", num_envs=num_envs, device=device, seed=args.seed, validate=False, **params)
    env.reset()
    actions = action_pool(env, 8, args.seed)
    for t in range(args.warmup):
        env.step(actions[t % len(actions)])
    snapshot = [b.clone() for b in _buffers(env)]
    act = env._view(actions[0])
    phases = env.kernel.phases
    prefixes = [EnvKernel(f"prefix{n}", list(phases[:n]), env.kernel.nargs) for n in range(1, len(phases) + 1)]
    best = []
    for kernel in prefixes:
        kernel.launch(env.target, env.num_envs, env.num_agents, env._arrays, env._consts, act)  # compile
        seconds = float("inf")
        for _ in range(repeats):
            for buf, saved in zip(_buffers(env), snapshot):
                buf.copy_(saved)
            sync(env.device)
            start = time.perf_counter()
            kernel.launch(env.target, env.num_envs, env.num_agents, env._arrays, env._consts, act,
                          stream=env._stream())
            sync(env.device)
            seconds = min(seconds, time.perf_counter() - start)
        best.append(seconds)
    rows, previous = [], 0.0
    print(f"\nphases of one step: {name}, num_envs={num_envs} (prefix timing on one frozen state)")
    for phase, total in zip(phases, best):
        cost = max(total - previous, 0.0)
        rows.append(dict(phase=phase.fn.__name__, kind=phase.kind, ms=cost * 1e3))
        print(f"  {phase.fn.__name__:28s} {phase.kind:5s} {cost * 1e3:8.3f} ms")
        previous = max(previous, total)
    print(f"  {'whole step':28s} {'':5s} {best[-1] * 1e3:8.3f} ms")
    return rows
