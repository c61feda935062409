"""How :mod:`gpurl.render` draws a ``simple_tag`` frame (matplotlib axes, host copies of env 0's state)."""
from __future__ import annotations

import numpy as np

from .params import ADVERSARY_SIZE, GOOD_SIZE, OBSTACLE_SIZE


def draw_frame(ax, env, frames, t):
    """MPE colours: adversaries red, good agents green, obstacles grey; a caught good agent is ringed."""
    from matplotlib.patches import Circle

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
