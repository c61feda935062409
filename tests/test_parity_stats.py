"""bench/peers_lib/parity_stats.py, the arithmetic of bench/learning_parity.py's verdicts, against hand-computed
cases (the bench itself needs the peers extra and minutes per run)."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from peers_lib.parity_stats import final_return, mean_ci, on_grid, t975, window_return  # noqa: E402

pytestmark = pytest.mark.cpu


def test_the_interval_is_students_t_over_seeds():
    mean, half = mean_ci([1.0, 2.0, 3.0])  # sd 1, n 3, t(2) = 4.303
    assert mean == 2.0 and half == pytest.approx(4.303 / math.sqrt(3))
    assert t975(4) == 2.776 and t975(11) == 2.228 and t975(100) == 1.96
    with pytest.raises(ValueError, match="at least 2 seeds"):
        mean_ci([1.0])


def test_returns_are_weighted_by_episodes_and_windows_exclude_steps_past_the_budget():
    steps, returns, episodes = [100, 200, 300, 400], [-10.0, -6.0, -2.0, 50.0], [1, 3, 0, 4]
    # (100, 400]: iterations 200 (3 episodes of -6) and 400 (4 of 50); 300 ended none
    assert window_return(steps, returns, episodes, 100, 400) == pytest.approx((3 * -6 + 4 * 50) / 7)
    # the last quarter of a 300-step budget: only iteration 300, which ended no episode
    assert math.isnan(final_return(steps, returns, episodes, 300, 0.25))
    assert final_return(steps, returns, episodes, 300, 0.5) == pytest.approx(-6.0)
    grid = on_grid(steps, returns, episodes, 400, 2)  # windows (0, 200], (200, 400]
    np.testing.assert_allclose(grid, [(-10 + 3 * -6) / 4, 50.0])


def test_every_pair_is_a_valid_configuration_of_its_algorithm_beside_a_known_reference():
    """A pair whose preset a config refuses, or whose reference names no module function, would only fail
    minutes into the bench (the references' modules need JAX, so their factories are found in the source)."""
    import ast

    from learning_parity import PAIRS, REFERENCES, gpurl_config

    bench = Path(__file__).resolve().parent.parent / "bench" / "peers_lib"
    for pair in PAIRS.values():
        cfg = gpurl_config(pair, 1_280_000)
        assert cfg.algo == {"ippo": "ppo"}.get(pair.algo, pair.algo), pair.name
        assert cfg.env == pair.scenario, pair.name
        _, module, config, factory = REFERENCES[pair.reference]
        tree = ast.parse((bench / f"{module}.py").read_text())
        names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
        assert {factory, config} <= names, (pair.name, module)


def test_every_config_field_either_decides_learning_or_is_run_bookkeeping():
    """A saved gpurl run is reused only where LEARNING_FIELDS match, so a new config value (a run field, or a
    parameter of any algorithm) must be sorted into one of the two lists (left out, a change of it would silently
    reuse runs made without it)."""
    from gpurl.algos import ALGORITHMS, BUILT_IN
    from gpurl.algos.params import param_fields
    from gpurl.train.config import RUN_FIELDS as CONFIG_RUN_FIELDS
    from learning_parity import LEARNING_FIELDS, RUN_FIELDS

    assert not set(LEARNING_FIELDS) & set(RUN_FIELDS)
    # the built-in algorithms' parameters (tests may register more: tests/reinforce_algo.py)
    every = set(CONFIG_RUN_FIELDS).union(*(param_fields(ALGORITHMS[name].params_type) for name in BUILT_IN))
    assert set(LEARNING_FIELDS) | set(RUN_FIELDS) == every
