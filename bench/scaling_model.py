#!/usr/bin/env python
"""A model of the distribution policies' communication at 8 to 64 GPUs, from bytes gpurl measured and NCCL's
bus bandwidths (docs/scaling.md explains it; this script computes its tables).

    python bench/scaling_model.py                                   # tag-10v100, 1000 envs per GPU
    python bench/scaling_model.py --preset tag-small --envs-per-gpu 64 --rollout-len 32   # bench/multigpu_scaling's

Inputs:
- the payload one rank puts on the wire per iteration, per policy, computed from the preset: PPO's flat
  gradient (its parameter count x 4 bytes) all-reduced ``epochs x minibatches`` times for data_parallel; for
  central_learner the rollout storage a rank gathers to rank 0 and the weights it gets back (docs/scaling.md
  checks these against the bytes bench/multigpu_scaling.py counts on gloo);
- NCCL all-reduce bus bandwidth and latency inside a node (NVLink) and across nodes (InfiniBand), as
  ``--nvlink-busbw``, ``--ib-busbw`` (GB/s) and ``--nvlink-latency-us``, ``--ib-latency-us``: assumptions, stated
  in the output; the defaults are published nccl-tests figures for 8 x H100 SXM and a typical 400 Gb/s NDR
  node (docs/scaling.md says where they come from), and small-message latencies of the order nccl-tests shows.

Model (per iteration, per rank):
- data_parallel: ``k`` all-reduces of S bytes: ``k * (latency + 2 (W - 1) / W * S / busbw)``;
- central_learner: rank 0 receives (W - 1) ranks' rollouts (B bytes each) through its own link and sends the
  weights back: ``(W - 1) * B / link + weights / link``; the learner then does W ranks' worth of updates.
Ends with ``RESULT {json}``. Not a measurement: every figure it prints is a prediction.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_result  # noqa: E402

WORLDS = (8, 16, 32, 64)
GPUS_PER_NODE = 8


def preset_payloads(preset: str, envs_per_gpu: int, rollout_len: int | None) -> dict:
    """Bytes one rank sends per iteration, computed from the preset's policy and rollout storage."""
    import torch

    from gpurl.algos.nets import ActorCritic
    from gpurl.envs import make
    from gpurl.train.config import build_config

    cfg = build_config(preset, num_envs=envs_per_gpu, **({"rollout_len": rollout_len} if rollout_len else {}))
    env = make(cfg.env, num_envs=1, **cfg.env_params)
    params, algo = 0, cfg.algo_params
    for group in env.groups.values():
        policy = ActorCritic(group.obs_dim * algo.frame_stack, group.action_space, algo.hidden, algo.activation,
                             algo.norm_obs, generator=torch.Generator().manual_seed(0))
        params += sum(p.numel() for p in policy.parameters())
    steps = cfg.rollout_len * envs_per_gpu
    # Per agent-step: the observation and the final observation (the bootstrap of a truncated episode), the
    # actions (int64), reward, log-prob, value; per env-step: two flags.
    per_agent = 2 * env.obs_dim * 4 + env.action_dims * 8 + 3 * 4
    rollout = steps * (env.num_agents * per_agent + 2)
    allreduces = algo.epochs * algo.minibatches
    return dict(params=params, allreduces=allreduces, allreduce_bytes=params * 4,
                data_parallel=allreduces * params * 4, central_learner=rollout, weights_bytes=params * 4,
                preset=preset, envs_per_gpu=envs_per_gpu, rollout_len=cfg.rollout_len, num_agents=env.num_agents)


def dp_seconds(W: int, k: int, S: float, a: argparse.Namespace) -> float:
    busbw, latency = (a.nvlink_busbw, a.nvlink_latency_us) if W <= GPUS_PER_NODE else (a.ib_busbw, a.ib_latency_us)
    return k * (latency * 1e-6 + 2 * (W - 1) / W * S / (busbw * 1e9))


def cl_seconds(W: int, B: float, weights: float, a: argparse.Namespace) -> float:
    link = a.nvlink_busbw if W <= GPUS_PER_NODE else a.ib_busbw
    return (W - 1) * B / (link * 1e9) + weights / (link * 1e9)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="tag-10v100")
    ap.add_argument("--envs-per-gpu", type=int, default=1000)
    ap.add_argument("--rollout-len", type=int, default=None, help="default: the preset's")
    ap.add_argument("--nvlink-busbw", type=float, default=450.0, help="GB/s, all-reduce bus bandwidth in a node")
    ap.add_argument("--ib-busbw", type=float, default=40.0, help="GB/s, all-reduce bus bandwidth across nodes")
    ap.add_argument("--nvlink-latency-us", type=float, default=15.0)
    ap.add_argument("--ib-latency-us", type=float, default=40.0)
    a = ap.parse_args()
    p = preset_payloads(a.preset, a.envs_per_gpu, a.rollout_len)
    print(f"preset {a.preset}, {a.envs_per_gpu} envs per GPU ({p['num_agents']} agents each), T={p['rollout_len']}: "
          f"{p['params']:,} parameters; data_parallel: {p['allreduces']} all-reduces of {p['allreduce_bytes']:,} B "
          f"per iteration; central_learner: {p['central_learner'] / 1e6:,.1f} MB of rollout per rank per iteration")
    print(f"assumed: NVLink {a.nvlink_busbw:g} GB/s and {a.nvlink_latency_us:g} us per all-reduce (W <= "
          f"{GPUS_PER_NODE}); InfiniBand {a.ib_busbw:g} GB/s and {a.ib_latency_us:g} us (W > {GPUS_PER_NODE})")
    rows = []
    for W in WORLDS:
        dp = dp_seconds(W, p["allreduces"], p["allreduce_bytes"], a)
        cl = cl_seconds(W, p["central_learner"], p["weights_bytes"], a)
        rows.append(dict(world_size=W, data_parallel_comm_ms=dp * 1e3, central_learner_comm_ms=cl * 1e3))
        print(f"W={W:3d}: data_parallel {dp * 1e3:8.3f} ms/iteration of all-reduce; central_learner "
              f"{cl * 1e3:9.1f} ms/iteration into rank 0, and {W}x one rank's learning on rank 0")
    print_result(dict(bench="scaling_model", prediction=True, **{k: v for k, v in p.items()},
                      assumptions=dict(nvlink_busbw_gbs=a.nvlink_busbw, ib_busbw_gbs=a.ib_busbw,
                                       nvlink_latency_us=a.nvlink_latency_us, ib_latency_us=a.ib_latency_us),
                      rows=rows))


if __name__ == "__main__":
    main()
