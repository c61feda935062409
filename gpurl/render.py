"""Episodes of the built-in 2-D envs as animated GIFs (or MP4s): who is where, and every tag marked.

    from gpurl.render import render_random_episode
    render_random_episode("tag_continuous", "tag.gif", num_taggers=2, num_runners=4)

``bench/tag_ppo.py --render-final`` saves one episode of the trained policies into the log dir
(``Trainer.record_episode`` plays it, :func:`save_animation` draws it). Rendering reads env 0's state
back to the host after every step: it is a viewer, not part of any training loop.

An env draws itself: its class's ``draw_frame(ax, env, frames, t)`` (matplotlib; a built-in env's lives in
its folder's ``draw.py``, an MPE scenario's in its module), or one given by :func:`register_drawer` for a class
you do not own.
matplotlib (the ``train`` extra) and Pillow write GIFs; MP4 needs ffmpeg on the PATH.
"""
from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from .envs import make
from .envs.random_actions import RandomActions, action_columns

#: A frame: env 0's state fields (host copies) after a step, plus ``reward`` [N] of that step.
Frame = dict[str, np.ndarray]
Drawer = Callable[["object", "object", list[Frame], int], None]

_DRAWERS: dict[type, Drawer] = {}


def register_drawer(env_class: type, draw: Drawer) -> None:
    """Teach :func:`save_animation` to draw ``env_class`` (over its own ``draw_frame``, if any):
    ``draw(ax, env, frames, t)`` draws frame t."""
    _DRAWERS[env_class] = draw


def drawer_for(env) -> Drawer:
    """What draws ``env``'s frames: a registered drawer of its class, else the class's ``draw_frame``.
    TypeError naming both ways to give one when there is none (check before playing an episode to draw)."""
    draw = next((d for cls, d in _DRAWERS.items() if isinstance(env, cls)), getattr(type(env), "draw_frame", None))
    if draw is None:
        raise TypeError(f"no drawer for {type(env).__name__}: give the class a draw_frame(ax, env, frames, t) "
                        f"static method (docs/custom_env.md), or call gpurl.render.register_drawer(env_class, draw)")
    return draw


def snapshot(env, reward: torch.Tensor | None = None) -> Frame:
    """Env 0's state (every field of ``env.state``) and its agents' ``reward`` [N], copied to the host."""
    frame = {f.name: getattr(env.state, f.name)[0].detach().cpu().numpy().copy()
             for f in dataclasses.fields(env.state)}
    if reward is not None:
        frame["reward"] = reward[0].detach().cpu().numpy().copy()
    return frame


def record_episode(env, step: Callable[[], tuple[torch.Tensor, ...]], max_steps: int = 10_000) -> list[Frame]:
    """Frames of env 0 from its current state until its episode ends (or ``max_steps``).

    ``step()`` advances the env one step and returns ``(obs, reward, terminated, truncated, ...)`` as
    ``env.step`` does; the env should have ``autoreset=False`` so that the last frame is the end state.
    """
    frames = [snapshot(env)]
    for _ in range(max_steps):
        _, reward, terminated, truncated, *_ = step()
        frames.append(snapshot(env, reward))
        if bool(terminated[0]) or bool(truncated[0]):  # host-ok: a viewer
            break
    return frames


def render_random_episode(name: str, path: str | Path, seed: int = 0, fps: int = 10, **env_params) -> Path:
    """One episode of env ``name`` with uniformly random actions, saved to ``path`` (.gif or .mp4)."""
    env = make(name, num_envs=1, device="cpu", seed=seed, autoreset=False, **env_params)
    generator = torch.Generator().manual_seed(seed)
    env.reset()
    draws = {name: RandomActions(g.action_space, env.device) for name, g in env.groups.items()}

    def step():
        actions = torch.cat([draws[name]((1, len(range(env.num_agents)[g.agents]), action_columns(g.action_space)),
                                         generator) for name, g in env.groups.items()], dim=1)
        return env.step(actions)

    return save_animation(env, record_episode(env, step), path, fps=fps, title=f"{name}, random policy")


def save_animation(env, frames: list[Frame], path: str | Path, fps: int = 10, title: str = "",
                   size_inches: float = 3.6, dpi: int = 64) -> Path:
    """Draw ``frames`` (from :func:`record_episode`) of ``env``'s kind into ``path``: GIF, or MP4 with ffmpeg.

    Written to a temporary name and renamed, so ``path`` is never a half-written file.
    """
    path = Path(path)
    draw = drawer_for(env)
    if path.suffix not in (".gif", ".mp4"):
        raise ValueError(f"animation path must end in .gif or .mp4, got {path}")
    if path.suffix == ".mp4" and shutil.which("ffmpeg") is None:
        raise RuntimeError(f"writing {path} needs ffmpeg on the PATH; save a .gif instead")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.animation import FFMpegWriter, FuncAnimation, PillowWriter

    fig, ax = plt.subplots(figsize=(size_inches, size_inches), dpi=dpi)

    def update(t):
        ax.clear()
        draw(ax, env, frames, t)
        ax.set_title(f"{title}\nstep {t}/{len(frames) - 1}" if title else f"step {t}/{len(frames) - 1}", fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])

    animation = FuncAnimation(fig, update, frames=len(frames), interval=1000 / fps)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    writer = PillowWriter(fps=fps) if path.suffix == ".gif" else FFMpegWriter(fps=fps)
    try:
        animation.save(str(tmp), writer=writer)
        tmp.replace(path)
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)
    return path
