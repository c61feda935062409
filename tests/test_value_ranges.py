"""Every value is checked where it enters (issue 21): the ranges that env parameters and train config
fields declare beside their defaults, the refusal of buffers that would not fit, the adapters' own checks.

The bound tests iterate over the declarations, so a new field is covered as soon as it declares its range
(and test_every_number_declares_a_range fails until it does).
"""
from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest
import torch

import gpurl
from gpurl.storage import Field as RolloutField
from gpurl.envs import KernelEnv, memory
from gpurl.envs.adapters import GymVectorEnv, gym_vector_env, parallel_env
from gpurl.envs.memory import InsufficientMemory
from gpurl.envs.params import ParameterError, check_fields, declared_range, field_kind
from gpurl.envs.mpe.simple_tag import SimpleTagParams
from gpurl.envs.tag_continuous.params import TagContinuousParams
from gpurl.envs.tag_gridworld.params import TagGridworldParams
from gpurl.kernels.fields import Field
from gpurl.storage import rollout as storage
from gpurl.train import launch
from gpurl.algos import ALGORITHMS, BUILT_IN
from gpurl.train.cli import config_from_args
from gpurl.train.cli import main as cli_main
from gpurl.train.config import TrainConfig, build_config

pytestmark = pytest.mark.cpu

#: Every built-in algorithm's parameters, in a fixed order (pytest-xdist's workers must collect the same ids).
BUILT_IN_PARAMS = sorted({ALGORITHMS[name].params_type for name in BUILT_IN}, key=lambda cls: cls.__name__)
#: (owner: the name errors start with, dataclass whose fields declare ranges): the envs' parameters, the run's
#: config and every algorithm's parameters (whose errors also start with "config").
DECLARING = [("simple_tag", SimpleTagParams), ("tag_continuous", TagContinuousParams),
             ("tag_gridworld", TagGridworldParams), ("config", TrainConfig),
             *(("config", cls) for cls in BUILT_IN_PARAMS)]
ENV_OWNERS = {"simple_tag", "tag_continuous", "tag_gridworld"}


def numeric_fields():
    """(owner, class, field, kind) of every int or float field of every declaring class."""
    for owner, cls in DECLARING:
        for f in dataclasses.fields(cls):
            kind, _ = field_kind(f)
            if kind in ("int", "float"):
                yield owner, cls, f, kind


def check(owner: str, obj) -> None:
    """What ``make`` (env params: float32 constants) and ``TrainConfig.validated`` run on each field."""
    check_fields(obj, owner, float32=owner in ENV_OWNERS)


def with_value(cls, name: str, value):
    return dataclasses.replace(cls(), **{name: value})


# ---- the cases the issue quotes -------------------------------------------------------------------


@pytest.mark.parametrize("flags, message", [
    (["--lr", "inf"], "config: lr=inf is not finite; allowed: a finite number > 0"),
    (["--dist-timeout", "nan"], "config: dist_timeout=nan is not finite; allowed: a finite number > 0"),
    (["--dist-timeout", "inf"], "config: dist_timeout=inf is not finite; allowed: a finite number > 0"),
])
def test_quoted_flags_are_refused_with_their_range(flags, message, capsys):
    with pytest.raises(SystemExit):
        config_from_args(["--iters", "1", "--device", "cpu", *flags])
    assert message in capsys.readouterr().err
    with pytest.raises(ValueError) as err:  # the same through the Python API
        build_config(iters=1, **{flags[0][2:].replace("-", "_"): float(flags[1])})
    assert str(err.value) == message


@pytest.mark.parametrize("params, message", [
    (dict(max_speed=-1.0), "tag_continuous: max_speed=-1.0 is out of range; allowed: > 0"),
    (dict(min_acceleration=2.0, max_acceleration=1.0),
     "tag_continuous: min_acceleration=2.0 is out of range; allowed: <= max_acceleration=1.0"),
    (dict(num_acceleration_levels=10**9),
     "tag_continuous: num_acceleration_levels=1000000000 is out of range; allowed: in [1, 2**16]"),
])
def test_quoted_env_params_are_refused_with_their_range(params, message):
    with pytest.raises(ValueError) as err:
        gpurl.make("tag_continuous", num_envs=2, device="cpu", **params)
    assert str(err.value) == message


# ---- every declared range, from the declarations ---------------------------------------------------


def test_every_number_declares_a_range():
    missing = [f"{owner}.{f.name}" for owner, _, f, _ in numeric_fields() if declared_range(f) is None]
    assert not missing, f"declare these fields' ranges beside their defaults (ranged / _doc(ge=...)): {missing}"


def _beyond(kind: str, value, direction: int):
    """The next value after ``value`` towards ``direction`` (+1 up, -1 down): an int step, or a float ulp."""
    return value + direction if kind == "int" else math.nextafter(float(value), direction * math.inf)


def declared_bounds():
    for owner, cls, f, kind in numeric_fields():
        allowed = declared_range(f)
        for side, bound in (("low", allowed.low), ("high", allowed.high)):
            if bound is not None:
                yield pytest.param(owner, cls, f.name, kind, allowed, side, id=f"{cls.__name__}.{f.name}.{side}")


@pytest.mark.parametrize("owner, cls, name, kind, allowed, side", list(declared_bounds()))
def test_declared_bound_accepts_its_edge_and_refuses_beyond(owner, cls, name, kind, allowed, side):
    bound, is_open = (allowed.low, allowed.low_open) if side == "low" else (allowed.high, allowed.high_open)
    outward = -1 if side == "low" else 1
    inside = _beyond(kind, bound, -outward) if is_open else bound
    outside = bound if is_open else _beyond(kind, bound, outward)
    if kind == "float":
        inside, outside = float(inside), float(outside)
    check(owner, with_value(cls, name, inside))
    with pytest.raises(ValueError) as err:
        check(owner, with_value(cls, name, outside))
    assert str(err.value) == f"{owner}: {name}={outside!r} is out of range; allowed: {allowed}"


def float_fields():
    return [pytest.param(owner, cls, f.name, id=f"{cls.__name__}.{f.name}") for owner, cls, f, kind in numeric_fields()
            if kind == "float"]


@pytest.mark.parametrize("owner, cls, name", float_fields())
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
def test_non_finite_floats_are_refused(owner, cls, name, value):
    expected = f"{owner}: {name}={value!r} is not finite; allowed: a finite number"
    with pytest.raises(ValueError, match=re.escape(expected)):
        check(owner, with_value(cls, name, value))


@pytest.mark.parametrize("owner, cls, name", [p for p in float_fields() if p.values[0] in ENV_OWNERS])
def test_env_floats_must_fit_float32(owner, cls, name):
    allowed = declared_range(next(f for f in dataclasses.fields(cls) if f.name == name))
    if allowed.low is not None and allowed.high is not None:
        pytest.skip("bounded on both sides: the range refuses a float32 overflow first")
    huge = -1e39 if allowed.high is not None else 1e39  # inside the declared range, beyond float32
    with pytest.raises(ValueError, match=re.escape(f"{owner}: {name}={huge!r} is out of range") + ".*float32"):
        check(owner, with_value(cls, name, huge))
    check(owner, with_value(cls, name, math.copysign(float(np.finfo(np.float32).max), huge)))


@pytest.mark.parametrize("owner, cls, name, kind", [
    pytest.param(owner, cls, f.name, kind, id=f"{owner}.{f.name}") for owner, cls, f, kind in numeric_fields()])
def test_wrong_types_are_refused(owner, cls, name, kind):
    wrong = [True, "1", None] + ([2.0] if kind == "int" else [])
    for value in wrong:
        with pytest.raises(ValueError, match=re.escape(f"{owner}: {name}={value!r} is not")):
            check(owner, with_value(cls, name, value))


def test_bool_fields_take_only_bools():
    for owner, cls in DECLARING:
        for f in dataclasses.fields(cls):
            if field_kind(f)[0] == "bool":
                with pytest.raises(ValueError, match=re.escape(f"{owner}: {f.name}=1 is not a bool")):
                    check(owner, with_value(cls, f.name, 1))


@pytest.mark.parametrize("env, params, message", [
    ("tag_continuous", dict(min_turn=1.0, max_turn=0.5), "min_turn=1.0 is out of range; allowed: <= max_turn=0.5"),
    ("tag_continuous", dict(num_other_agents_observed=12),
     "num_other_agents_observed=12 is out of range; allowed: in [1, num_agents=11]"),
    ("tag_continuous", dict(num_taggers=2**19, num_runners=2**19 + 1), "num_runners=524289 is out of range"),
    ("simple_tag", dict(num_good=2**20 - 3, num_obstacles=1), "num_obstacles=1 is out of range; allowed: <= 0"),
])
def test_rules_between_parameters(env, params, message):
    with pytest.raises(ValueError, match=re.escape(f"{env}: {message}")):
        gpurl.make(env, num_envs=1, device="cpu", **params)


def test_equal_action_bounds_are_allowed():
    assert TagContinuousParams.from_kwargs(min_acceleration=0.5, max_acceleration=0.5).min_acceleration == 0.5


# ---- buffers that would not fit ----------------------------------------------------------------------


@pytest.mark.parametrize("name, params", [("tag_continuous", dict(use_full_observation=False, num_runners=6)),
                                          ("tag_continuous", {}), ("simple_tag", {}), ("tag_gridworld", {})])
def test_env_estimate_is_what_the_env_allocates(name, params):
    env = gpurl.make(name, num_envs=300, device="cpu", **params)
    tables = set(type(env).tables(env))
    allocated = [t for n, t in env._tensors.items() if n not in tables]
    allocated += [env.obs, env.final_obs, env.reward, env.terminated, env.truncated, env._reset_all, env.global_state,
                  env.final_global_state]
    assert memory.env_bytes(env) == sum(t.numel() * t.element_size() for t in allocated)


def test_env_too_large_is_refused_before_allocating(monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda device: 10_000)
    allocations = []
    monkeypatch.setattr(Field, "allocate", lambda self, shape, device: allocations.append(shape))
    monkeypatch.setattr(KernelEnv, "_setup_outputs", lambda self, *args: allocations.append("outputs"))
    with pytest.raises(ValueError) as err:
        gpurl.make("tag_continuous", num_envs=1000, device="cpu")
    message = str(err.value)
    assert message.startswith("tag_continuous: num_envs=1000 ") and "lower num_envs (--num-envs)" in message
    needed = int(re.search(r"needs [\d.]+ \w+ \((\d+) bytes\)", message).group(1))
    assert needed > 10_000 and "only 9.8 KiB (10000 bytes) is available" in message
    assert allocations == []


def test_absurd_num_envs_is_refused_by_the_real_check():
    with pytest.raises(ValueError, match=r"num_envs=1000000000 .*needs .* TiB .*--num-envs"):
        gpurl.make("tag_continuous", num_envs=10**9, device="cpu")


def test_rollout_storage_too_large_is_refused_before_allocating(monkeypatch):
    fields = {"logp": RolloutField(), "value": RolloutField(extra_steps=1)}
    small = storage.RolloutStorage(5, 7, 3, 11, 2, torch.int64, 1, torch.device("cpu"), fields)
    assert storage.rollout_bytes(5, 7, 3, 11, 2, torch.int64, 1, fields) == sum(
        t.numel() * t.element_size() for t in small.buffers().values())
    monkeypatch.setattr(memory, "available_bytes", lambda device: 1000)
    monkeypatch.setattr(torch, "zeros", lambda *a, **k: pytest.fail("allocated before the memory check"))
    with pytest.raises(ValueError, match=r"rollout storage of num_envs=7 x rollout_len=5 steps .*needs .*\(\d+ bytes\)"
                                         r".*\(1000 bytes\) is available; lower num_envs \(--num-envs\) or "
                                         r"rollout_len \(--rollout-len\)"):
        storage.RolloutStorage(5, 7, 3, 11, 2, torch.int64, 1, torch.device("cpu"), fields)


def test_available_memory_is_known_on_cpu_and_read_on_cuda(monkeypatch):
    assert memory.available_bytes("cpu") > 0
    assert memory.available_bytes("meta") is None
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (1000, 5000))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device: 300)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device: 100)
    assert memory.available_bytes("cuda:0") == 1200  # free + cached but unused


@pytest.mark.parametrize("error", [ParameterError("tag_continuous: max_speed=-1 is out of range; allowed: > 0"),
                                   InsufficientMemory("tag_continuous: num_envs=1000000000 needs 1.5 TiB ...; "
                                                      "lower num_envs (--num-envs)")],
                         ids=["env_param", "memory"])
def test_cli_reports_refusals_found_while_making_the_env_as_usage_errors(error, monkeypatch, capsys):
    def refuse(cfg):
        raise error

    monkeypatch.setattr(launch, "run", refuse)
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["--device", "cpu", "--iters", "1"], prog="gpurl train")
    assert exit_info.value.code == 2
    assert f"gpurl train: error: {error}" in capsys.readouterr().err


def test_refusals_are_value_errors():
    assert issubclass(ParameterError, ValueError) and issubclass(InsufficientMemory, ValueError)


# ---- adapters ------------------------------------------------------------------------------------------


def _vector(**kw) -> GymVectorEnv:
    return gym_vector_env("tag_gridworld", num_envs=2, group="tagger", device="cpu", num_taggers=2, **kw)


def _parallel(**kw):
    return parallel_env("tag_gridworld", num_taggers=2, **kw)


def test_adapters_refuse_calls_after_close():
    venv = _vector()
    venv.reset(seed=1)
    venv.close()
    for call in (venv.reset, lambda: venv.step(np.zeros(venv.num_envs, np.int64))):
        with pytest.raises(RuntimeError, match="this GymVectorEnv is closed"):
            call()
    penv = _parallel()
    penv.reset(seed=1)
    penv.close()
    for call in (penv.reset, lambda: penv.step({})):
        with pytest.raises(RuntimeError, match="this ParallelEnv is closed"):
            call()


def test_adapters_refuse_a_clashing_autoreset():
    with pytest.raises(ValueError, match=r"gym_vector_env makes its env with autoreset=True .* autoreset=False "
                                         "clashes with it: leave autoreset out"):
        _vector(autoreset=False)
    with pytest.raises(ValueError, match=r"parallel_env makes its env with autoreset=False .* autoreset=True clashes"):
        _parallel(autoreset=True)
    with pytest.raises(ValueError, match=r"parallel_env makes its env with num_envs=1 .* num_envs=4 clashes"):
        _parallel(num_envs=4)
    assert _vector(autoreset=True).env.autoreset and not _parallel(autoreset=False).env.autoreset  # no clash


@pytest.mark.parametrize("seed", [-1, 2**64])
def test_adapters_refuse_seeds_outside_uint64(seed):
    message = re.escape(f"seed must be in [0, 2**64), got {seed}")
    venv, penv = _vector(), _parallel()
    for reset in (venv.reset, penv.reset):
        with pytest.raises(ValueError, match=message):
            reset(seed=seed)
    for make_adapter in (_vector, _parallel):
        with pytest.raises(ValueError, match=message):
            make_adapter(seed=seed)
    venv.reset(seed=2**64 - 1)
    penv.reset(seed=2**64 - 1)


@pytest.mark.parametrize("name, value", [("validate", "no"), ("validate", 0), ("autoreset", "yes"), ("autoreset", 1),
                                         ("global_state", None)])
def test_make_refuses_on_off_arguments_that_are_not_bools(name, value):
    """A string "no" or an int 0 would read as a truth value (validation left on by validate="no")."""
    message = f"^{name} must be True or False, got {type(value).__name__} {re.escape(repr(value))}$"
    with pytest.raises(TypeError, match=message):
        gpurl.make("simple", num_envs=2, device="cpu", **{name: value})
    env = gpurl.make("simple", num_envs=2, device="cpu", **{name: np.bool_(False)})  # NumPy's bools are bools
    assert getattr(env, "writes_global_state" if name == "global_state" else name) is False


def test_the_largest_seed_trains_and_evaluates(tmp_path):
    """Seeds derived from the run's (the evaluations', each rank's sampling stream) wrap modulo 2**64, so the
    top of the documented range works (it overflowed ``seed + 1000003`` before)."""
    from gpurl.envs.checks import derived_seed

    assert derived_seed(2**64 - 1, 1) == 0 and derived_seed(5, 1_000_003) == 1_000_008
    result = cli_main(["--env", "simple", "--num-envs", "2", "--rollout-len", "4", "--iters", "1", "--epochs", "1",
                       "--minibatches", "1", "--eval-episodes", "2", "--seed", str(2**64 - 1), "--device", "cpu",
                       "--policy-backend", "eager", "--learner-backend", "eager", "--no-progress",
                       "--log-dir", str(tmp_path / "run")])
    assert result["seed"] == 2**64 - 1 and result["iterations"] == 1
    # Both evaluations ran, on seeds 2**64 - 1 + 1 and + 2, wrapped to 0 and 1.
    assert result["return_agent_random"] is not None and result["return_agent_final"] is not None
