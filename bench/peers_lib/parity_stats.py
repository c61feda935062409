"""Learning curves side by side: per-seed curves on one env-step grid, the final return, mean and 95%
confidence interval over seeds, and the plot. (Part of a library: bench/learning_parity.py prints the RESULT
line.) NumPy only; matplotlib is imported by :func:`plot_pair` alone.

A curve is what one run reports per iteration (update): ``env_steps`` [U] at the end of each iteration and,
per group, the mean return of the episodes that ended in it with their count (``returns`` [U], ``episodes``
[U]); an iteration where none ended has count 0.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

#: Student's t, two-sided 95% (0.975 quantile), by degrees of freedom; 1.96 beyond.
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
         12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}


def t975(dof: int) -> float:
    """The 0.975 quantile of Student's t with ``dof`` degrees of freedom (the next smaller tabulated dof)."""
    if dof < 1:
        raise ValueError(f"a confidence interval needs at least 2 seeds (dof {dof})")
    known = [d for d in _T975 if d <= dof]
    return _T975[max(known)] if dof <= 30 else 1.96


def mean_ci(values) -> tuple[float, float]:
    """Mean and the half-width of its 95% confidence interval (t over seeds): ``mean +- half``."""
    x = np.asarray(values, dtype=np.float64)
    if x.size < 2:
        raise ValueError(f"a confidence interval needs at least 2 seeds, got {x.size}")
    return float(x.mean()), float(t975(x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))


def window_return(env_steps, returns, episodes, lo: float, hi: float) -> float:
    """Episode-weighted mean return of the iterations that end in (lo, hi] env steps (NaN when no episode
    ended there)."""
    steps, r, n = (np.asarray(a, dtype=np.float64) for a in (env_steps, returns, episodes))
    inside = (steps > lo) & (steps <= hi) & (n > 0)
    return float((r[inside] * n[inside]).sum() / n[inside].sum()) if inside.any() else float("nan")


def final_return(env_steps, returns, episodes, budget: int, tail: float) -> float:
    """The return over the last ``tail`` fraction of the ``budget`` (episode-weighted)."""
    return window_return(env_steps, returns, episodes, budget * (1.0 - tail), budget)


def on_grid(env_steps, returns, episodes, budget: int, points: int) -> np.ndarray:
    """float64 [points]: the curve averaged over ``points`` equal windows of the budget (one run's curve on the
    grid every run shares, whatever its iteration size)."""
    edges = np.linspace(0, budget, points + 1)
    return np.array([window_return(env_steps, returns, episodes, a, b) for a, b in zip(edges[:-1], edges[1:])])


def band(curves: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Mean and 95% half-width, per grid point, over seeds' curves [points] each."""
    stack = np.stack(curves)
    with warnings.catch_warnings():  # a window where no run's episode ended is NaN, as it should plot
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(stack, 0)
        half = t975(len(curves) - 1) * np.nanstd(stack, 0, ddof=1) / math.sqrt(len(curves))
    return mean, half


def plot_pair(path, title: str, budget: int, series: dict[str, list[np.ndarray]], ylabel: str) -> None:
    """One PNG: each implementation's mean curve over seeds with its 95% band. ``series``: label -> the seeds'
    curves on the shared grid."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.2, 3.4), dpi=100)
    for label, curves in series.items():
        mean, half = band(curves)
        x = (np.arange(len(mean)) + 0.5) * budget / len(mean)
        seen = np.isfinite(mean)  # windows where some episode ended; the line joins them
        ax.plot(x[seen], mean[seen], marker=".", label=f"{label} ({len(curves)} seeds)")
        ax.fill_between(x[seen], (mean - half)[seen], (mean + half)[seen], alpha=0.25)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("env steps")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
