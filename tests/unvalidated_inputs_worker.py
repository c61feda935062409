"""Bad inputs for one built-in env, run in a child process by tests/test_unvalidated_inputs.py.

Before issue 21 some of these killed the process (SIGSEGV in tag_continuous on a wrong action shape or an
action of 2**40), so they run where a crash fails one test instead of ending pytest. Usage:

    python tests/unvalidated_inputs_worker.py <env name>

Every check is an ``assert``; the last line printed is ``PASS <env name>``. What is checked (the rules of
docs/specs/API.md, "Errors"):

- wrong action / out= / mask metadata (shape, dtype, device, layout) raises, with ``validate=True`` and
  with ``validate=False``, before anything changes;
- with ``validate=False``, out-of-range discrete actions (int64 and int32 extremes) step exactly like the
  same actions clamped into 0..n-1 of each dimension: every state field and output equal bit for bit;
- with ``validate=True`` the same actions raise;
- simple_tag's Box actions with ``validate=False``: NaN / infinite / huge components step like the same
  actions clipped into [0, 1] on the host (NaN acting as 0).
"""
from __future__ import annotations

import sys

import numpy as np
import torch

import gpurl
from gpurl.envs import StepOutputs

# Small worlds (tag_continuous: 6 agents, the case; the others alike) with short episodes, so that a
# few steps cross autoresets.
PARAMS = {
    "tag_continuous": dict(num_taggers=2, num_runners=4, grid_length=4.0, episode_length=3,
                           tagging_distance=0.2),
    "simple_tag": dict(num_adversaries=3, num_good=2, num_obstacles=1, max_cycles=3),
    "tag_gridworld": dict(num_taggers=5, grid_length=3, episode_length=3),
}
E = 8
OUTPUTS = ("obs", "final_obs", "reward", "terminated", "truncated")


def make(name, validate, seed=5):
    return gpurl.make(name, num_envs=E, device="cpu", seed=seed, validate=validate, **PARAMS[name])


def snapshot(env) -> dict[str, np.ndarray]:
    snap = {f"state.{k}": v.numpy().copy() for k, v in vars(env.state).items()}
    snap.update({k: getattr(env, k).numpy().copy() for k in OUTPUTS})
    snap.update({f"_tensors.{k}": v.numpy().copy() for k, v in env._tensors.items()})
    return snap


def assert_same(a: dict, b: dict, where: str) -> None:
    assert a.keys() == b.keys(), where
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, f"{where}: {k}"
        # bit for bit (NaN-safe): compare the bytes
        assert a[k].tobytes() == b[k].tobytes(), f"{where}: {k} differs"


def expect(exc, call, *must_contain) -> str:
    try:
        call()
    except exc as err:
        msg = str(err)
        for part in must_contain:
            assert part in msg, f"{part!r} not in {msg!r}"
        return msg
    raise AssertionError(f"{call} raised no {exc.__name__}")


def check_metadata(name: str, validate: bool) -> None:
    env = make(name, validate)
    env.reset()
    N, D = env.num_agents, env.action_dims
    good = torch.zeros((E, N, D), dtype=env.action_dtype)
    env.step(good)
    before = snapshot(env)
    shape_text = f"({E}, {N}, {D})"
    wrong_shapes = [(E, 3, D), (E + 1, N, D), (E - 1, N, D), (E, N, D + 1), (E * N * D,), (E, N, D, 1),
                    (1, N, D), (0, N, D)]
    if D > 1:
        wrong_shapes.append((E, N))
    for shape in wrong_shapes:
        expect(ValueError, lambda: env.step(torch.zeros(shape, dtype=env.action_dtype)),
               "actions must have shape", shape_text, str(shape))
    if name == "tag_continuous":  # the case: [8, 3, 2] for 6 agents
        expect(ValueError, lambda: env.step(torch.zeros((8, 3, 2), dtype=torch.int64)), "got (8, 3, 2)")
    wrong_dtypes = [torch.float32, torch.float64, torch.int16, torch.uint8, torch.bool] if env._discrete else \
        [torch.int64, torch.float64, torch.float16]
    for dtype in wrong_dtypes:
        expect(TypeError, lambda: env.step(torch.zeros((E, N, D), dtype=dtype)), "actions must have dtype",
               str(dtype))
    expect(TypeError, lambda: env.step(good.numpy()), "actions must be a torch.Tensor", "ndarray")
    expect(ValueError, lambda: env.step(good.to("meta")), "actions must be on cpu", "meta")
    expect(ValueError, lambda: env.step(good.to_sparse()), "actions must")
    # A non-contiguous view of the right shape is fine (stepped as its contiguous copy).
    out = StepOutputs(**{k: torch.zeros_like(getattr(env, k)) for k in OUTPUTS})
    bad_outs = {
        "obs": torch.zeros((E, N + 1, env.obs_dim)), "reward": torch.zeros((E, N), dtype=torch.float64),
        "terminated": torch.zeros(E + 1, dtype=torch.bool), "truncated": torch.zeros(E, dtype=torch.uint8),
        "final_obs": torch.zeros((E, env.obs_dim, N)).transpose(1, 2),  # right shape, not contiguous
    }
    for field, tensor in bad_outs.items():
        expect((ValueError, TypeError), lambda: env.step(good, out=out._replace(**{field: tensor})), f"out.{field}")
    expect(ValueError, lambda: env.step(good, out=out._replace(obs=out.obs.to("meta"))), "out.obs must be on cpu")
    expect(TypeError, lambda: env.step(good, out=tuple(out)), "out must be a gpurl.envs.StepOutputs")
    for mask in (torch.ones(E + 1, dtype=torch.bool), torch.ones(E, dtype=torch.int64), torch.ones(E, 1).bool(),
                 [True] * E):
        expect((ValueError, TypeError), lambda: env.reset(mask=mask), "mask")
    assert_same(before, snapshot(env), f"{name} validate={validate}: a rejected call changed the env")


def clamped(env, actions: torch.Tensor) -> torch.Tensor:
    high = env._action_high  # [N, D] exclusive bounds
    return torch.minimum(torch.maximum(actions, torch.zeros_like(actions)), (high - 1).to(actions.dtype))


def out_of_range_actions(env, dtype, gen) -> torch.Tensor:
    """Valid actions with the extremes of ``dtype`` and values just outside each bound mixed in."""
    info = torch.iinfo(dtype)
    high = env._action_high
    extremes = [info.min, info.max, -1, -(2**31) if dtype == torch.int64 else -7, 10**6]
    if dtype == torch.int64:
        extremes += [2**40, -(2**40), 2**32, 2**32 + 1]
    valid = (torch.rand((E, env.num_agents, env.action_dims), generator=gen) * high).long().clamp_max(high - 1)
    actions = valid.to(dtype)
    pick = torch.rand(actions.shape, generator=gen) < 0.5
    values = torch.tensor(extremes, dtype=dtype)[torch.randint(len(extremes), actions.shape, generator=gen)]
    actions = torch.where(pick, values, actions)
    actions[0] = -1  # just below every bound
    actions[1] = high.to(dtype)  # just past every bound
    return actions


def check_clamp(name: str) -> None:
    raw_env, twin = make(name, validate=False), make(name, validate=False)
    raw_env.reset()
    twin.reset()
    gen = torch.Generator().manual_seed(11)
    dtypes = (torch.int64, torch.int32)  # int32 ones reach the kernel widened to int64: no second build
    for t in range(7):  # episodes of 3 steps: autoresets on the way
        dtype = dtypes[t % len(dtypes)]
        actions = out_of_range_actions(raw_env, dtype, gen)
        assert bool(((actions < 0) | (actions >= raw_env._action_high)).any())
        raw_env.step(actions)
        twin.step(clamped(twin, actions))
        assert_same(snapshot(twin), snapshot(raw_env), f"{name} step {t} ({dtype})")
    checked = make(name, validate=True)
    checked.reset()
    expect(ValueError, lambda: checked.step(out_of_range_actions(checked, torch.int64, gen)), "is out of range")


def box_clipped(actions: torch.Tensor) -> torch.Tensor:
    """simple_tag's Box rule on the host: clip into [0, 1], NaN -> 0."""
    return torch.nan_to_num(actions, nan=0.0).clamp(0.0, 1.0)


def check_box_clip() -> None:
    """simple_tag with Box actions and validate=False: NaN, infinities and huge values step like the same
    actions clipped on the host (NaN acting as 0); validate=True rejects NaN."""
    kw = dict(continuous_actions=True)
    raw_env, twin = (gpurl.make("simple_tag", num_envs=E, device="cpu", seed=5, validate=False,
                                **PARAMS["simple_tag"], **kw) for _ in range(2))
    raw_env.reset()
    twin.reset()
    gen = torch.Generator().manual_seed(3)
    special = torch.tensor([float("nan"), float("inf"), -float("inf"), 1e30, -1e30, -0.5, 1.5, 0.25])
    for t in range(5):
        actions = torch.rand((E, raw_env.num_agents, 5), generator=gen)
        pick = torch.rand(actions.shape, generator=gen) < 0.5
        actions = torch.where(pick, special[torch.randint(len(special), actions.shape, generator=gen)], actions)
        raw_env.step(actions)
        twin.step(box_clipped(actions))
        assert_same(snapshot(twin), snapshot(raw_env), f"simple_tag Box step {t}")
        assert not any(np.isnan(v).any() for k, v in snapshot(raw_env).items() if v.dtype.kind == "f")
    checked = gpurl.make("simple_tag", num_envs=E, device="cpu", seed=5, **PARAMS["simple_tag"], **kw)
    checked.reset()
    expect(ValueError, lambda: checked.step(torch.full((E, checked.num_agents, 5), float("nan"))), "is NaN")


def main(name: str) -> None:
    torch.set_num_threads(1)
    for validate in (True, False):
        check_metadata(name, validate)
    check_clamp(name)
    if name == "simple_tag":
        check_box_clip()
    print(f"PASS {name}")


if __name__ == "__main__":
    main(sys.argv[1])
