"""Property-based CLI flags (Hypothesis, issue 40): every ``gpurl train`` flag drawn with values a user might
type, type mistakes included (words for numbers, floats for ints, 10**25, nan, empty strings, ``--flag=yes``
for an on/off flag), either gives a validated config or is a usage error: exit status 2 and one error line,
never a traceback. A drawn flag alone on top of a preset that is an error names that flag's field.

Parsing and validation only (``gpurl.train.cli.config_from_args``): nothing is built or written. The flags
that name files (``--resume``, ``--log-dir``, ``--env-module``) and ``--seeds`` (a sweep) are not drawn.
"""
from __future__ import annotations

import contextlib
import io

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from gpurl.algos import ALGORITHMS
from gpurl.envs import registered
from gpurl.train.cli import config_from_args, flag_fields
from gpurl.train.config import TrainConfig
from gpurl.train.presets import PRESETS

pytestmark = pytest.mark.cpu

BASE = ["--preset", "simple-tag"]
NOT_DRAWN = {"resume", "log_dir", "env_modules", "env_params"}
WORDS = ["", "abc", "none", "None", "1.5", "1e3", "-1", "0", "1", "2", "0x10", "nan", "inf", "-inf", "1e400",
         str(2**64), str(10**25), "-0", " 3", "yes", "no", "True", "4,4", "64,64", ",", "cpu", "cuda", "gpu0"]
CHOICES = {"env": registered(), "algo": sorted(ALGORITHMS), "preset": sorted(PRESETS), "activation": ["tanh", "relu"],
           "recurrent": ["none", "gru", "lstm"], "policy_backend": ["auto", "eager", "compiled", "triton"],
           "learner_backend": ["auto", "eager", "compiled"], "dist": ["auto", "single", "data_parallel", "ring"],
           "wandb_mode": ["auto", "offline", "online", "sideways"], "checkpoint_every": ["10", "90s", "1.5h", "0s", "5x"],
           "train_groups": ["adversary", "good", "adversary,good", "nope"], "device": ["cpu", "cuda:0", "gpu0"]}
FIELDS = [f for f, _ in flag_fields() if f.name not in NOT_DRAWN]
EXAMPLES = 150


def flag_of(name: str) -> str:
    return "--" + name.replace("_", "-")


def value_text(name: str, kind: str):
    numbers = st.one_of(st.integers(-3, 300).map(str), st.integers(-10**30, 10**30).map(str),
                        st.floats(allow_nan=True, allow_infinity=True).map(repr))
    return st.one_of(st.sampled_from(WORDS), st.sampled_from(CHOICES.get(name, WORDS)), numbers,
                     st.text(max_size=6)) if kind not in ("bool", "bool | None") else st.nothing()


@st.composite
def one_flag(draw, f=None):
    """A flag of ``f`` (drawn when None) as the user might type it: ``[--flag, value]``, or for an on/off
    flag ``--flag``, ``--no-flag`` or the mistake ``--flag=VALUE``."""
    f = f or draw(st.sampled_from(FIELDS))
    flag = flag_of(f.name)
    if f.type in ("bool", "bool | None"):
        return f, draw(st.sampled_from([[flag], ["--no-" + flag[2:]], [f"{flag}=yes"], [f"{flag}=0"]]))
    return f, [flag, draw(value_text(f.name, f.type))]


def outcome(argv: list[str]) -> tuple[TrainConfig | None, int | None, str]:
    """``(config, None, "")`` when ``argv`` validates; ``(None, exit status, stderr)`` when it does not."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            return config_from_args(argv), None, ""
        except SystemExit as stop:
            return None, stop.code, err.getvalue()


def assert_usage_error(code, err: str) -> list[str]:
    assert code == 2, err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert len(lines) == 1, err
    return lines


@seed(20261129)
@settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_a_flag_alone_gives_a_config_or_a_usage_error_naming_it(data):
    f, flag = data.draw(one_flag())
    cfg, code, err = outcome([*BASE, *flag])
    if cfg is None:
        (line,) = assert_usage_error(code, err)
        assert f.name in line or flag_of(f.name) in line or (f.name == "preset" and "--preset" in line), line


@seed(20261130)
@settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.lists(one_flag(), min_size=2, max_size=5))
def test_flags_together_give_a_config_or_one_usage_error(drawn):
    argv = [*BASE, *(part for _, flag in drawn for part in flag)]
    cfg, code, err = outcome(argv)
    if cfg is None:
        assert_usage_error(code, err)
    else:
        assert cfg.validated() == cfg  # what the CLI returns is a fixed point of validation
