"""Property-based search over what a user can pass to gpurl (run by tests/test_property_inputs.py).

``python tests/property_inputs.py --modes on,off --examples N --seed S`` draws, with Hypothesis, for
every built-in env and each validation mode (one process, so each env compiles once):
- action tensors: right and wrong shapes, every common dtype, contiguous / strided / transposed /
  broadcast layouts, the meta device, in-range values mixed with extremes (-1, n, 2**31 - 1, 2**40,
  nan, inf, ...), passed to ``env.step``, with or without ``out=`` buffers of drawn shape, dtype and
  layout;
- reset masks of drawn shape, dtype, device and values;
- env parameters from their declared ranges: at a bound, beyond it, non-finite, of the wrong type;
and config values of ``gpurl.train.config.TrainConfig`` the same way.

Each drawn case must either run or raise a gpurl error (ValueError or TypeError, which gpurl's own
errors subclass). A raised error must leave ``env.state`` and the env's outputs bit-identical (the
issue asks it with validation on; the metadata checks of both modes raise before anything changes). Anything else, a crash of the process included, is a failure: this program
then exits non-zero (a crash kills it, not the pytest run that started it). The last line is
``SUMMARY {json}``: cases drawn, run and raised (by error type), per kind of input.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import math
import sys

import torch
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import gpurl
from gpurl.envs.params import declared_range, field_kind
from gpurl.envs.random_actions import RandomActions, action_columns
from gpurl.envs.base import StepOutputs

GPURL_ERRORS = (ValueError, TypeError)
NUM_ENVS = 3
DTYPES = [torch.int64, torch.int32, torch.int16, torch.uint8, torch.bool, torch.float32, torch.float64]
INT_EXTREMES = [-1, -(2**31), 2**31 - 1, 2**40, -(2**40), 10**6, 2**63 - 1]
FLOAT_EXTREMES = [math.nan, math.inf, -math.inf, 1e30, -1e30, 0.5, -0.5]
SHAPE_CHANGES = ["same", "drop_last", "extra_dim", "envs+1", "envs-1", "agents+1", "agents-1", "columns+1",
                 "no_envs"]
LAYOUTS = ["contiguous", "strided", "transposed", "broadcast"]

counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)


def small_env(name: str, validate: bool, **params):
    return gpurl.make(name, num_envs=NUM_ENVS, device="cpu", seed=1, validate=validate, **params)


def state_snapshot(env) -> dict[str, torch.Tensor]:
    state = {f.name: getattr(env.state, f.name).clone() for f in dataclasses.fields(env.state)}
    return {**state, **{f"out.{k}": v.clone() for k, v in
                        (("obs", env.obs), ("reward", env.reward), ("terminated", env.terminated),
                         ("truncated", env.truncated))}}


def assert_unchanged(env, before: dict[str, torch.Tensor], what: str) -> None:
    after = state_snapshot(env)
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert not changed, f"{what}: raised, but changed {changed}"


def valid_actions(env, generator: torch.Generator) -> torch.Tensor:
    """int64 (or float32 for Box) [E, N, columns]: every group's uniformly random actions."""
    columns = max(action_columns(g.action_space) for g in env.groups.values())
    parts = []
    for group in env.groups.values():
        n = group.agents.stop - group.agents.start
        a = RandomActions(group.action_space, env.device)(torch.Size([env.num_envs, n, columns]), generator)
        parts.append(a)
    return torch.cat(parts, dim=1)


def reshaped(a: torch.Tensor, change: str) -> torch.Tensor:
    E, N, C = a.shape
    if change == "drop_last":
        return a[..., 0]
    if change == "extra_dim":
        return a.unsqueeze(-1)
    sizes = {"envs+1": (E + 1, N, C), "envs-1": (E - 1, N, C), "agents+1": (E, N + 1, C),
             "agents-1": (E, N - 1, C), "columns+1": (E, N, C + 1), "no_envs": (0, N, C)}.get(change)
    if sizes is None:
        return a
    out = torch.zeros(sizes, dtype=a.dtype)
    e, n, c = (min(x, y) for x, y in zip(sizes, a.shape))
    out[:e, :n, :c] = a[:e, :n, :c]
    return out


def laid_out(a: torch.Tensor, layout: str) -> torch.Tensor:
    if layout == "strided" and a.ndim >= 1 and a.shape[-1] > 0:
        wide = torch.zeros(*a.shape[:-1], 2 * a.shape[-1], dtype=a.dtype)
        wide[..., ::2] = a
        return wide[..., ::2]
    if layout == "transposed" and a.ndim >= 2:
        return a.transpose(0, 1).contiguous().transpose(0, 1)
    if layout == "broadcast" and a.ndim >= 1 and a.shape[0] > 0:
        return a[:1].expand(a.shape)
    return a


@st.composite
def action_cases(draw, env):
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    a = valid_actions(env, gen)
    # Half the draws keep the right shape and an integer dtype, so that valid inputs run often enough.
    change = draw(st.sampled_from(["same"] * len(SHAPE_CHANGES) + SHAPE_CHANGES))
    layout = draw(st.sampled_from(LAYOUTS))
    dtype = draw(st.sampled_from([torch.int64, torch.int32] * 3 + DTYPES))
    extremes = draw(st.lists(st.sampled_from(INT_EXTREMES + FLOAT_EXTREMES), max_size=3))
    flat = a.to(torch.float64).flatten()
    for value in extremes:
        if flat.numel():
            flat[draw(st.integers(0, flat.numel() - 1))] = value
    a = flat.view(a.shape)
    with_nonfinite_as_int = not dtype.is_floating_point and not torch.isfinite(a).all()
    a = reshaped(a.nan_to_num(0.0) if with_nonfinite_as_int else a, change)
    if dtype.is_floating_point:
        a = a.to(dtype)
    else:  # through int64, so values beyond the target type wrap as a user's cast would
        a = a.clamp(-(2**63), 2**63 - 1).to(torch.int64).to(dtype)
    a = laid_out(a, layout)
    if draw(st.booleans()) and draw(st.integers(0, 9)) == 0:
        a = torch.empty(a.shape, dtype=a.dtype, device="meta")
    return f"{change}/{layout}/{dtype}/{extremes}", a


@st.composite
def output_cases(draw, env):
    """None (the env's own buffers) or StepOutputs, right or with one tensor drawn wrong."""
    if draw(st.integers(0, 2)):
        return None
    E, N, D = env.num_envs, env.num_agents, env.obs_dim
    good = dict(obs=torch.zeros(E, N, D), reward=torch.zeros(E, N), terminated=torch.zeros(E, dtype=torch.bool),
                truncated=torch.zeros(E, dtype=torch.bool), final_obs=torch.zeros(E, N, D))
    name = draw(st.sampled_from([None, *good]))
    if name is not None:
        t = good[name]
        wrong = draw(st.sampled_from(["shape", "dtype", "strided", "meta"]))
        if wrong == "shape":
            t = torch.zeros(t.shape[0] + 1, *t.shape[1:], dtype=t.dtype)
        elif wrong == "dtype":
            t = t.to(torch.float64 if t.dtype != torch.float64 else torch.float32)
        elif wrong == "strided":
            t = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)[..., ::2]
        else:
            t = torch.empty(t.shape, dtype=t.dtype, device="meta")
        good[name] = t
    return StepOutputs(**good)


@st.composite
def mask_cases(draw):
    # Half the draws of each have the right shape and dtype, so that valid masks run often enough.
    shape = draw(st.sampled_from([(NUM_ENVS,)] * 4 + [(NUM_ENVS, 1), (NUM_ENVS + 1,), (), (0,)]))
    dtype = draw(st.sampled_from([torch.bool] * 3 + [torch.int64, torch.float32, torch.uint8]))
    values = torch.tensor(draw(st.lists(st.integers(-2, 3), min_size=max(1, math.prod(shape)),
                                        max_size=max(1, math.prod(shape)))))
    mask = values[:math.prod(shape)].reshape(shape).to(dtype)
    if draw(st.integers(0, 9)) == 0:
        mask = torch.empty(mask.shape, dtype=dtype, device="meta")
    return mask


def value_around(draw, kind: str, allowed, default) -> object:
    """A value for a field of ``kind`` with range ``allowed``: its default (a third of the draws), a
    bound, just beyond one, far beyond, non-finite, of the wrong type, or ordinary."""
    if draw(st.integers(0, 2)) == 0:
        return default
    bounds = [b for b in (allowed.low, allowed.high) if b is not None] if allowed else []
    step = 1 if kind == "int" else 1e-3
    candidates = [0, 1, -1, 2**31, 10**9]
    for b in bounds:
        candidates += [b, b - step, b + step]
    if kind == "float":
        candidates += [math.nan, math.inf, -math.inf, 1e39]
    candidates += ["1", None, True]
    value = draw(st.sampled_from(candidates))
    if kind == "int" and isinstance(value, float) and math.isfinite(value) and value == int(value):
        value = int(value)
    return value


def numeric_fields(cls) -> list:
    return [f for f in dataclasses.fields(cls) if field_kind(f)[0] in ("int", "float")]


@st.composite
def param_cases(draw, params_type):
    f = draw(st.sampled_from(numeric_fields(params_type)))
    kind, _ = field_kind(f)
    return {f.name: value_around(draw, kind, declared_range(f), f.default)}


def tried(tally: collections.Counter, case, env=None, what: str = "") -> None:
    """Run ``case()``: it runs, or raises a gpurl error that leaves ``env`` (when given) unchanged.
    Counts the outcome in ``tally``; any other exception propagates (Hypothesis reports the case)."""
    before = state_snapshot(env) if env is not None else None
    tally["drawn"] += 1
    try:
        case()
        tally["ran"] += 1
    except GPURL_ERRORS as err:
        tally[f"raised {type(err).__name__}"] += 1
        if env is not None:
            assert_unchanged(env, before, what)


def search(strategy, examples: int, seed_value: int):
    """Decorator: run the decorated check on ``examples`` draws of ``strategy``, from ``seed_value``."""
    def run(check):
        @seed(seed_value)
        @settings(max_examples=max(1, examples), deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(strategy)
        def each(drawn):
            check(drawn)

        each()
        return check
    return run


def run_env_cases(name: str, validate: bool, examples: int, seed_value: int) -> None:
    env = small_env(name, validate)
    env.reset()
    mode = "validate on" if validate else "validate off"

    @search(st.tuples(action_cases(env), output_cases(env)), examples, seed_value)
    def step_case(drawn):
        (what, actions), out = drawn
        tried(counts[f"{mode}: {name} actions"], lambda: env.step(actions, out=out), env,
              f"{name}.step({what}, out={'given' if out else None})")

    @search(mask_cases(), examples // 4, seed_value + 1)
    def reset_case(mask):
        tried(counts[f"{mode}: {name} masks"], lambda: env.reset(mask=mask), env,
              f"{name}.reset(mask={mask.dtype} {tuple(mask.shape)})")

    def make_and_step(kwargs):
        made = small_env(name, validate, **kwargs)
        # Made: it must also reset and step (small worlds only: a huge valid world is slow, not wrong).
        if made.num_agents <= 64 and made.obs_dim <= 4096:
            made.reset()
            made.step(valid_actions(made, torch.Generator().manual_seed(0)))

    @search(param_cases(env.params_type), examples // 2, seed_value + 2)
    def param_case(kwargs):
        tried(counts[f"{mode}: {name} params"], lambda: make_and_step(kwargs))


def run_config_cases(examples: int, seed_value: int) -> None:
    from gpurl.train.config import TrainConfig

    from gpurl.algos import MAPPOParams, QParams

    for algo, params_type in (("mappo", MAPPOParams), ("iql", QParams)):
        base = TrainConfig(iters=1, algo=algo, algo_params=params_type())  # runnable; each case changes one field

        @search(param_cases(TrainConfig), examples // 2, seed_value + 3)
        def config_case(kwargs):
            tried(counts["config"], lambda: dataclasses.replace(base, **kwargs).validated())

        @search(param_cases(params_type), examples // 2, seed_value + 4)
        def params_case(kwargs):
            params = dataclasses.replace(base.algo_params, **kwargs)
            tried(counts["config"], lambda: dataclasses.replace(base, algo_params=params).validated())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="on,off", help="validation modes to search, of on,off")
    parser.add_argument("--examples", type=int, default=40, help="action cases per env (masks: 1/4, params: 1/2)")
    parser.add_argument("--seed", type=int, default=20261126)
    parser.add_argument("--envs", default=",".join(sorted(gpurl.registered())))
    args = parser.parse_args()
    modes = args.modes.split(",")
    if not modes or set(modes) - {"on", "off"}:
        parser.error(f"--modes takes on, off or on,off; got {args.modes!r}")
    for mode in modes:
        for name in args.envs.split(","):
            run_env_cases(name, mode == "on", args.examples, args.seed)
    run_config_cases(args.examples, args.seed)
    print("SUMMARY " + json.dumps({"modes": modes, "examples": args.examples, "seed": args.seed,
                                   "cases": {k: dict(v) for k, v in counts.items()}}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
