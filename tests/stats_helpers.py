"""Statistics for the tests' checks of random draws (uniform sampling, epsilon-greedy exploration)."""
from __future__ import annotations

import math

import torch


def chi_square(counts: torch.Tensor) -> float:
    """Pearson's statistic of ``counts`` against equal expected counts."""
    expected = counts.sum().item() / counts.numel()
    return float(((counts - expected) ** 2).sum() / expected)


def chi2_critical(df: int, p: float = 1e-6) -> float:
    """The value c with P(X > c) = ``p`` for a chi-square X of even ``df`` (default: a false failure once in a
    million runs), from the closed form of the survival function: exp(-c/2) * sum_{i<df/2} (c/2)^i / i!."""
    if df % 2:
        raise ValueError(f"chi2_critical takes an even df, got {df}")
    lo, hi = 0.0, 500.0
    for _ in range(200):
        mid = (lo + hi) / 2
        sf = math.exp(-mid / 2) * sum((mid / 2) ** i / math.factorial(i) for i in range(df // 2))
        lo, hi = (mid, hi) if sf > p else (lo, mid)
    return hi
