"""How :mod:`gpurl.render` draws a ``tag_continuous`` frame (matplotlib axes, host copies of env 0's state)."""
from __future__ import annotations

import numpy as np


def draw_frame(ax, env, frames, t):
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
