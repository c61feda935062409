"""Episodes of the built-in 2-D envs as animated GIFs (or MP4s): who is where, and every tag marked.

    from gpurl.render import render_random_episode
    render_random_episode("tag_continuous", "tag.gif", num_taggers=2, num_runners=4)

``bench/tag_ppo.py --render-final`` saves one episode of the trained policies into the log dir
(``Trainer.record_episode`` plays it, :func:`save_animation` draws it). Rendering reads env 0's state
back to the host after every step: it is a viewer, not part of any training loop.

A custom env draws itself by :func:`register_drawer` (``draw(ax, env, frames, t)``, matplotlib).
matplotlib (the ``train`` extra) and Pillow write GIFs; MP4 needs ffmpeg on the PATH.
"""
from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Callable

import numpy as np
import torch

#: A frame: env 0's state fields (host copies) after a step, plus ``reward`` [N] of that step.
Frame = dict[str, np.ndarray]
Drawer = Callable[["object", "object", list[Frame], int], None]

_DRAWERS: dict[type, Drawer] = {}


def register_drawer(env_class: type, draw: Drawer) -> None:
    """Teach :func:`save_animation` to draw ``env_class``: ``draw(ax, env, frames, t)`` draws frame t."""
    _DRAWERS[env_class] = draw


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
    from .envs import make
    from .train.random_policy import RandomPolicy

    env = make(name, num_envs=1, device="cpu", seed=seed, autoreset=False, **env_params)
    generator = torch.Generator().manual_seed(seed)
    env.reset()
    policies = {name: RandomPolicy(g.action_space, env.device) for name, g in env.groups.items()}

    def step():
        actions = torch.cat([policies[name]((1, len(range(env.num_agents)[g.agents]), _action_dims(g.action_space)),
                                            generator) for name, g in env.groups.items()], dim=1)
        return env.step(actions)

    return save_animation(env, record_episode(env, step), path, fps=fps, title=f"{name}, random policy")


def save_animation(env, frames: list[Frame], path: str | Path, fps: int = 10, title: str = "",
                   size_inches: float = 3.6, dpi: int = 64) -> Path:
    """Draw ``frames`` (from :func:`record_episode`) of ``env``'s kind into ``path``: GIF, or MP4 with ffmpeg.

    Written to a temporary name and renamed, so ``path`` is never a half-written file.
    """
    path = Path(path)
    draw = next((d for cls, d in _DRAWERS.items() if isinstance(env, cls)), None)
    if draw is None:
        raise TypeError(f"no drawer for {type(env).__name__}; gpurl.render.register_drawer(env_class, draw) adds one")
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


# ---- built-in drawers ------------------------------------------------------------------------------

def _tag_continuous(ax, env, frames, t):
    """Taggers red, runners blue; a runner tagged in this step or the last few is a black cross."""
    p, f = env.params, frames[t]
    T = p.num_taggers
    alive = f["alive"].astype(bool)
    ax.set_xlim(0, p.grid_length)
    ax.set_ylim(0, p.grid_length)
    ax.set_aspect("equal")
    runners = np.arange(T, p.num_agents)
    live = runners[alive[T:]]
    trail = frames[max(0, t - 8):t + 1]  # the last few positions show who chases whom
    for i in [*range(T), *live]:
        ax.plot([fr["x"][i] for fr in trail], [fr["y"][i] for fr in trail], lw=0.8, alpha=0.4,
                c="tab:red" if i < T else "tab:blue")
    ax.scatter(f["x"][live], f["y"][live], s=18, c="tab:blue", label="runner")
    ax.scatter(f["x"][:T], f["y"][:T], s=30, c="tab:red", marker="^", label="tagger")
    recent = [i for i in runners[~alive[T:]] if any(frames[u]["alive"][i] for u in range(max(0, t - 5), t))]
    if recent:
        ax.scatter(f["x"][recent], f["y"][recent], s=90, c="black", marker="x", label="tagged")
    ax.legend(loc="upper right", fontsize=6, markerscale=0.6)


def _simple_tag(ax, env, frames, t):
    """MPE colours: adversaries red, good agents green, obstacles grey; a caught good agent is ringed."""
    from matplotlib.patches import Circle

    from .envs.simple_tag.params import ADVERSARY_SIZE, GOOD_SIZE, OBSTACLE_SIZE

    p, f = env.params, frames[t]
    A = p.num_adversaries
    extent = max(1.2, max(np.abs(fr["pos"]).max() for fr in frames) + 0.1)
    ax.set_xlim(-extent, extent)
    ax.set_ylim(-extent, extent)
    ax.set_aspect("equal")
    for q in f["landmark_pos"]:
        ax.add_patch(Circle(q, OBSTACLE_SIZE, color="0.6"))
    for i, q in enumerate(f["pos"]):
        ax.add_patch(Circle(q, ADVERSARY_SIZE if i < A else GOOD_SIZE, color="tab:red" if i < A else "tab:green"))
    for g in range(A, len(f["pos"])):
        if (np.linalg.norm(f["pos"][:A] - f["pos"][g], axis=1) < ADVERSARY_SIZE + GOOD_SIZE).any():
            ax.add_patch(Circle(f["pos"][g], 2.5 * GOOD_SIZE, fill=False, color="black", lw=1.5))


def _tag_gridworld(ax, env, frames, t):
    """Taggers red squares, the runner a blue dot; a tag (a tagger on the runner's cell) is a black cross."""
    p, f = env.params, frames[t]
    T, L = p.num_taggers, p.grid_length
    ax.set_xlim(-0.5, L + 0.5)
    ax.set_ylim(-0.5, L + 0.5)
    ax.set_aspect("equal")
    ax.scatter(f["x"][:T], f["y"][:T], s=24, c="tab:red", marker="s", label="tagger")
    ax.scatter(f["x"][T], f["y"][T], s=24, c="tab:blue", label="runner")
    if ((f["x"][:T] == f["x"][T]) & (f["y"][:T] == f["y"][T])).any():
        ax.scatter([f["x"][T]], [f["y"][T]], s=120, c="black", marker="x", label="tagged")
    ax.legend(loc="upper right", fontsize=6, markerscale=0.6)


def _action_dims(space) -> int:
    """Columns of one agent's action: 1 for Discrete, one per head or Box dimension otherwise."""
    return int(np.prod(space.shape)) if space.shape else 1


def _register_builtins() -> None:
    from .envs.simple_tag import SimpleTag
    from .envs.tag_continuous import TagContinuous
    from .envs.tag_gridworld import TagGridworld

    register_drawer(TagContinuous, _tag_continuous)
    register_drawer(SimpleTag, _simple_tag)
    register_drawer(TagGridworld, _tag_gridworld)


_register_builtins()
