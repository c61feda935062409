#!/usr/bin/env python
"""Acting backends side by side (eager torch, torch.compile, the fused Triton kernel: MLP + heads +
sampling + log-prob + value), the same for the value-based algorithms' epsilon-greedy acting (Q-network +
argmax + explore draws), the off-policy Box algorithms' acting (``box_*``: ``BoxActor``, a deterministic
policy + exploration noise and a squashed Gaussian's sample, the same input and widths, a
Box(0, 1, (``--box-actions``,))) and GAE (torch loop vs fused scan), at batch sizes from 1e3 to 1e6 agents.

    python bench/kernels.py                      # on a GPU: timings; without one: interpreter check
    python bench/kernels.py --sizes 1000,100000 --obs-dim 142 --hidden 64,64 --heads 21,21

On a GPU each op is timed with triton.testing.do_bench (CUDA events, median) side by side in one run:
``eager`` is ``ActorCritic.act`` as written (the one definition), ``compiled`` the same through
torch.compile, ``fused`` the Triton kernel (``q_*``: ``QActor`` with ``QNetwork.act`` as the definition, a
Discrete(``--q-actions``) Q-network of the same input and widths); GAE compares the torch reference's loop over T with the fused
reverse scan. Without a GPU it says so and runs the Triton interpreter on small shapes instead,
checking the kernels against their definitions (a correctness check, not a timing), then times what runs
on a CPU: ``eager`` against ``compiled`` for every kind of acting (best of ``--repeats`` timed loops,
alternating, at ``--cpu-sizes`` agents). Ends with ``RESULT {json}``.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:  # must be set before any Triton kernel is defined
    os.environ["TRITON_INTERPRET"] = "1"

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gymnasium  # noqa: E402
from _common import describe_machine, print_result  # noqa: E402

from gpurl.algos.acting import Acting  # noqa: E402
from gpurl.algos.box_acting import BoxActor  # noqa: E402
from gpurl.algos.box_nets import DeterministicActor, SquashedGaussianActor  # noqa: E402
from gpurl.algos.nets import ActorCritic  # noqa: E402
from gpurl.algos.q_acting import QActor  # noqa: E402
from gpurl.algos.q_nets import QNetwork  # noqa: E402
from gpurl.fusion import gae_ref, gae_triton  # noqa: E402
from gpurl.fusion.counter_rng import seed_tensor  # noqa: E402


def make_inputs(rows: int, obs_dim: int, hidden, heads, device):
    policy = ActorCritic(obs_dim, gymnasium.spaces.MultiDiscrete(list(heads)), hidden, "tanh",
                         generator=torch.Generator().manual_seed(0)).to(device)
    policy.obs_norm.update(torch.randn(4096, obs_dim, device=device) * 2 + 0.5)
    x = torch.randn(rows, 1, obs_dim, device=device)
    outs = (torch.zeros(rows, 1, len(heads), dtype=torch.int64, device=device),
            torch.zeros(rows, 1, device=device), torch.zeros(rows, 1, device=device))
    return policy, x, outs


def q_acting(rows: int, obs_dim: int, hidden, actions: int, device):
    """act(backend): ``QActor`` by ``backend`` writing the epsilon-greedy actions of ``rows`` agents (one
    group, epsilon 0.3) into an action buffer [1, rows, 1, 1]; returns (act, that buffer)."""
    from types import SimpleNamespace

    net = QNetwork(obs_dim, gymnasium.spaces.Discrete(actions), hidden, "tanh", torch.Generator().manual_seed(0))
    x = torch.randn(rows, 1, obs_dim, device=device)
    storage = SimpleNamespace(actions=torch.zeros(1, rows, 1, 1, dtype=torch.int64, device=device),
                              policy_input=lambda t0, t1, agents, dim: x[None],
                              frame_views=lambda t0, t1, agents, dim: ((x[None],), ()))  # QActor reads frame views
    groups = {"g": SimpleNamespace(agents=slice(0, 1), obs_dim=obs_dim)}
    spec = SimpleNamespace(device=device, env_offset=0, num_agents=1)
    nets = torch.nn.ModuleDict({"g": net}).to(device)
    step = torch.tensor([300], device=device)  # epsilon 1.0 -> 0.0 over 1000 steps: 0.7 at step 300
    backends = ("eager", "compiled", "triton")
    actors = {b: QActor(groups, nets, spec, seed_tensor(3, device), 1.0, 0.0, 1000, b, "tanh") for b in backends}
    return (lambda backend: actors[backend].run(storage, 0, step)), storage.actions


BOX_KINDS = {"deterministic": DeterministicActor, "squashed": SquashedGaussianActor}


def box_acting(rows: int, obs_dim: int, hidden, dims: int, kind: str, device):
    """act(backend): ``BoxActor`` by ``backend`` writing the actions of ``rows`` agents of a ``kind`` Box policy
    ("deterministic": exploration std 0.1; "squashed": a sample) in Box(0, 1, (dims,)) into an action buffer
    [1, rows, 1, dims]; returns (act, that buffer)."""
    from types import SimpleNamespace

    actor = BOX_KINDS[kind](obs_dim, gymnasium.spaces.Box(0.0, 1.0, (dims,)), hidden, "tanh",
                            torch.Generator().manual_seed(0))
    x = torch.randn(rows, 1, obs_dim, device=device)
    storage = SimpleNamespace(actions=torch.zeros(1, rows, 1, dims, device=device),
                              frame_views=lambda t0, t1, agents, dim: ((x[None],), ()))
    groups = {"g": SimpleNamespace(agents=slice(0, 1), obs_dim=obs_dim)}
    spec = SimpleNamespace(device=device, env_offset=0, num_agents=1)
    actors = torch.nn.ModuleDict({"g": actor}).to(device)
    step = torch.tensor([300], device=device)
    backends = ("eager", "compiled", "triton") if device.type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1" \
        else ("eager", "compiled")
    by_backend = {b: BoxActor(groups, actors, spec, seed_tensor(3, device), 0.1, b, "tanh") for b in backends}
    return (lambda backend: by_backend[backend].run(storage, 0, step)), storage.actions


def gae_inputs(T: int, columns: int, device):
    g = torch.Generator(device=device).manual_seed(1)
    E = max(1, columns // 10)
    N = columns // E
    r = torch.randn(T, E, N, device=device, generator=g)
    v = torch.randn(T + 1, E, N, device=device, generator=g)
    fv = torch.randn(T, E, N, device=device, generator=g)
    ends = torch.rand(T, E, device=device, generator=g)
    return r, v, fv, ends < 0.01, (ends >= 0.01) & (ends < 0.02)


def time_gpu(args) -> dict:
    from triton.testing import do_bench

    device = torch.device("cuda")
    rows_out = []
    for rows in args.sizes:
        policy, x, (a, lp, v) = make_inputs(rows, args.obs_dim, args.hidden, args.heads, device)
        step = torch.zeros(1, dtype=torch.int64, device=device)
        seed = seed_tensor(0, device)
        actors = {b: Acting({"g": policy}, {"g": 0}, b, seed, 0, 1) for b in ("eager", "compiled", "triton")}
        t_eager = do_bench(lambda: actors["eager"]({"g": x}, step, {"g": (a, lp, v)}))
        t_ref = do_bench(lambda: actors["compiled"]({"g": x}, step, {"g": (a, lp, v)}))
        t_fused = do_bench(lambda: actors["triton"]({"g": x}, step, {"g": (a, lp, v)}))
        q_act, _ = q_acting(rows, args.obs_dim, args.hidden, args.q_actions, device)
        t_q = {b: do_bench(lambda b=b: q_act(b)) for b in ("eager", "compiled", "triton")}
        t_box = {}
        for kind in BOX_KINDS:
            box_act, _ = box_acting(rows, args.obs_dim, args.hidden, args.box_actions, kind, device)
            t_box.update({f"box_{kind}_{b}_ms": do_bench(lambda b=b, act=box_act: act(b))
                          for b in ("eager", "compiled", "triton")})
        gae_args = gae_inputs(args.rollout_len, rows, device)
        t_gae_ref = do_bench(lambda: gae_ref(*gae_args, 0.99, 0.95))
        t_gae = do_bench(lambda: gae_triton(*gae_args, 0.99, 0.95))
        row = dict(agents=rows, actor_eager_ms=t_eager, actor_compiled_ms=t_ref, actor_fused_ms=t_fused,
                   actor_speedup_vs_eager=t_eager / t_fused, q_eager_ms=t_q["eager"], q_compiled_ms=t_q["compiled"],
                   q_fused_ms=t_q["triton"], q_speedup_vs_eager=t_q["eager"] / t_q["triton"], gae_reference_ms=t_gae_ref, gae_fused_ms=t_gae,
                   gae_speedup=t_gae_ref / t_gae, **t_box)
        print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
        rows_out.append(row)
    return {"mode": "gpu-timing", "rows": rows_out}


def interpreter_check(args) -> dict:
    """Triton interpreter on CPU tensors: the kernels against their torch references (small shapes)."""
    device = torch.device("cpu")
    rows = 1823
    policy, x, (a, lp, v) = make_inputs(rows, args.obs_dim, args.hidden, args.heads, device)
    a2, lp2, v2 = a.clone(), lp.clone(), v.clone()
    step = torch.tensor([123], dtype=torch.int64)
    seed = seed_tensor(7, device)
    Acting({"g": policy}, {"g": 0}, "triton", seed, 0, 1)({"g": x}, step, {"g": (a, lp, v)})
    Acting({"g": policy}, {"g": 0}, "eager", seed, 0, 1)({"g": x}, step, {"g": (a2, lp2, v2)})
    q_act, q_actions = q_acting(rows, args.obs_dim, args.hidden, args.q_actions, device)
    q_act("triton")
    fused_q = q_actions.clone()
    q_act("eager")
    box_diffs = {}
    for kind in BOX_KINDS:
        box_act, box_actions = box_acting(rows, args.obs_dim, args.hidden, args.box_actions, kind, device)
        box_act("triton")
        fused_box = box_actions.clone()
        box_act("eager")
        box_diffs[f"box_{kind}_actions_max_abs_diff"] = float((fused_box - box_actions).abs().max())
    gae_args = gae_inputs(17, 700, device)
    adv, ret = gae_triton(*gae_args, 0.99, 0.95)
    adv_ref, ret_ref = gae_ref(*gae_args, 0.99, 0.95)
    result = dict(mode="interpreter-check", actor_rows=rows, actions_identical=bool(torch.equal(a, a2)),
                  actor_log_prob_max_abs_diff=float((lp - lp2).abs().max()),
                  actor_value_max_abs_diff=float((v - v2).abs().max()),
                  q_actions_identical=bool(torch.equal(fused_q, q_actions)),
                  gae_shape=list(gae_args[0].shape), gae_max_abs_diff=float((adv - adv_ref).abs().max()),
                  returns_max_abs_diff=float((ret - ret_ref).abs().max()), **box_diffs)
    for k, val in result.items():
        print(f"{k}: {val}")
    return result


def time_cpu(args) -> list[dict]:
    """Eager against compiled acting on the CPU (PPO's ActorCritic.act, QActor's QNetwork.act and BoxActor's Box
    policies), in ms per call: the best of ``args.repeats`` loops of 20 calls, the backends alternating."""
    import time

    device = torch.device("cpu")
    step = torch.zeros(1, dtype=torch.int64)
    out = []
    for rows in args.cpu_sizes:
        policy, x, (a, lp, v) = make_inputs(rows, args.obs_dim, args.hidden, args.heads, device)
        actors = {b: Acting({"g": policy}, {"g": 0}, b, seed_tensor(0, device), 0, 1) for b in ("eager", "compiled")}
        q_act, _ = q_acting(rows, args.obs_dim, args.hidden, args.q_actions, device)
        calls = {f"actor_{b}_ms": (lambda b=b: actors[b]({"g": x}, step, {"g": (a, lp, v)})) for b in actors}
        calls.update({f"q_{b}_ms": (lambda b=b: q_act(b)) for b in ("eager", "compiled")})
        for kind in BOX_KINDS:
            box_act, _ = box_acting(rows, args.obs_dim, args.hidden, args.box_actions, kind, device)
            calls.update({f"box_{kind}_{b}_ms": (lambda b=b, act=box_act: act(b)) for b in ("eager", "compiled")})
        best = {name: float("inf") for name in calls}
        for name, call in calls.items():  # warm-up: the compiles
            call()
        for _ in range(args.repeats):
            for name, call in calls.items():
                t0 = time.perf_counter()
                for _ in range(20):
                    call()
                best[name] = min(best[name], (time.perf_counter() - t0) / 20 * 1e3)
        row = dict(agents=rows, **best, actor_compiled_speedup=best["actor_eager_ms"] / best["actor_compiled_ms"],
                   q_compiled_speedup=best["q_eager_ms"] / best["q_compiled_ms"],
                   **{f"box_{kind}_compiled_speedup": best[f"box_{kind}_eager_ms"] / best[f"box_{kind}_compiled_ms"]
                      for kind in BOX_KINDS})
        print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
        out.append(row)
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000,1000000",
                        type=lambda s: [int(v) for v in s.split(",")], help="agents per batch (GPU timing)")
    parser.add_argument("--obs-dim", type=int, default=142, help="policy input (tag-10v100 x 2 frames = 142)")
    parser.add_argument("--hidden", default="64,64", type=lambda s: tuple(int(v) for v in s.split(",")))
    parser.add_argument("--heads", default="21,21", type=lambda s: tuple(int(v) for v in s.split(",")))
    parser.add_argument("--cpu-sizes", default="1000,12288,100000",
                        type=lambda s: [int(v) for v in s.split(",")], help="agents per batch (CPU timing)")
    parser.add_argument("--repeats", type=int, default=5, help="timed loops per backend (CPU timing)")
    parser.add_argument("--q-actions", type=int, default=5, help="Discrete actions of the Q-network")
    parser.add_argument("--box-actions", type=int, default=5, help="dimensions of the Box policies' actions")
    parser.add_argument("--rollout-len", type=int, default=64, help="T of the GAE scan")
    args = parser.parse_args(argv)
    device = torch.device("cuda" if HAS_CUDA else "cpu")
    print(f"machine: {describe_machine(device)}")
    print(f"config: obs_dim={args.obs_dim} hidden={args.hidden} heads={args.heads} q_actions={args.q_actions} "
          f"rollout_len={args.rollout_len}")
    if HAS_CUDA:
        payload = time_gpu(args)
    else:
        print("no CUDA device here: no timings; running the Triton interpreter correctness check instead")
        payload = interpreter_check(args)
        payload["cpu_timing"] = time_cpu(args)
    import triton

    payload.update(device=str(device), triton=triton.__version__, obs_dim=args.obs_dim, hidden=list(args.hidden),
                   heads=list(args.heads), q_actions=args.q_actions)
    print_result(payload)
    return payload


if __name__ == "__main__":
    main()
