"""How :mod:`gpurl.render` draws a ``tag_gridworld`` frame (matplotlib axes, host copies of env 0's state)."""
from __future__ import annotations


def draw_frame(ax, env, frames, t):
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
