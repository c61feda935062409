"""bench/peers.py's curve comparison (bench/peers_lib/train.py: compare_curves): hand-computed cases for one
seed (standard error over the run's last-third iterations) and several (over the seeds' means)."""
from __future__ import annotations

import math

import pytest

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from peers_lib.train import compare_curves  # noqa: E402

pytestmark = pytest.mark.cpu


def run(gpurl: list[float], jax: list[float]) -> dict:
    rows = lambda ys: [{"adversary": y, "good": None if y is None else -y} for y in ys]  # noqa: E731
    return {"gpurl": rows(gpurl), "jax_ippo": rows(jax)}


def test_one_seed_uses_the_scatter_of_its_last_third():
    # Last third of 6 iterations: the last 2. gpurl [4, 6] (mean 5, var 2), JAX [6, 8] (mean 7, var 2).
    res = compare_curves([run([0, 0, 0, 0, 4, 6], [0, 0, 0, 0, 6, 8])])["adversary"]
    se = math.sqrt(2 / 2 + 2 / 2)
    assert res["difference_gpurl_minus_jax"] == pytest.approx(-2.0)
    assert res["two_standard_errors"] == pytest.approx(2 * se)
    assert res["standard_error_over"] == "iterations"
    assert res["gpurl_no_worse"] is True  # -2 >= -2.83
    assert res["gpurl"]["mean_over_run"] == pytest.approx(10 / 6)


def test_several_seeds_use_the_scatter_of_the_seed_means():
    # Three seeds, three iterations each (last third = last one): gpurl 1, 2, 3; JAX 4, 4, 4.
    runs = [run([0, 0, g], [0, 0, 4]) for g in (1, 2, 3)]
    res = compare_curves(runs)
    adv, good = res["adversary"], res["good"]
    assert adv["gpurl"]["last_third_mean_per_seed"] == [1.0, 2.0, 3.0]
    assert adv["difference_gpurl_minus_jax"] == pytest.approx(-2.0)
    assert adv["two_standard_errors"] == pytest.approx(2 * math.sqrt(1 / 3))  # var 1 over 3 seeds; JAX 0
    assert adv["standard_error_over"] == "seeds"
    assert adv["gpurl_no_worse"] is False
    assert good["gpurl_no_worse"] is True  # the good group's returns are the negatives: gpurl better


def test_iterations_without_finished_episodes_are_skipped():
    runs = [run([None, 2, 4], [None, 4, 4])]
    res = compare_curves(runs)["adversary"]
    assert res["gpurl"]["mean_over_run"] == pytest.approx(3.0)
    assert res["gpurl"]["last_third_mean"] == pytest.approx(4.0)
