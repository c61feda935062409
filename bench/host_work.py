#!/usr/bin/env python
"""What a steady-state training iteration asks of the host, per algorithm, counted on this machine with
``gpurl.profiling.HostWork`` (torch.profiler plus the Python entry points that read tensors): sync-like ops
per iteration, kernels per rollout step (the env kernel counted once per step), host ops per minibatch (PPO
family) or per update (value-based), and graphs compiled after the warm-up iterations. On a GPU each sync
stalls the queue and each host op is a launch; these counts are the CPU's view of that (the GPU's own is
bench/iteration_time.py --device cuda).

    python bench/host_work.py                                     # every algorithm, simple_tag 3v1v2, 64 envs
    python bench/host_work.py --variants ppo,qmix --num-envs 256

Ends with ``RESULT {"bench": "host_work", "rows": [{"variant", "syncs_per_iteration", "kernels_per_step",
"host_ops_per_minibatch", "compiled_after_warmup"}]}``.
"""
from __future__ import annotations

import argparse

import torch
import torch._dynamo.utils

from _common import describe_machine, print_result
from gpurl.profiling import HostWork
from gpurl.train import Trainer, build_config
from gpurl.train.process import configure_process

VARIANTS = "ppo,a2c,mappo,ppo:gru,mappo:gru,iql,vdn,qmix"


def minibatch_ops(trainer: Trainer) -> int:
    """Host ops of one minibatch (PPO family) or one update (value-based), as the learner's loop makes them."""
    learner = trainer.algo.learner
    if trainer.algo.uses_replay:
        cfg, replay = trainer.config, trainer.replay
        p = cfg.algo_params
        rows = trainer.learn_context.batches.replay_rows(replay, learner.seed, learner.draw, p.q_updates, p.q_batch)
        with HostWork() as work:
            learner.step(learner.totals, learner.update_ids[0], rows, replay.buffers())
            learner.target_flat.data.lerp_(learner.flat.data, p.target_tau)
        return work.kernel_count
    inputs = [learner.samples.group_inputs(name, learner.moments[name]) for name in learner.nets]
    with HostWork() as work:
        learner.step(learner.totals, learner.minibatch_ids[0], inputs)
    return work.kernel_count


def measure(variant: str, args) -> dict:
    algo, _, recurrent = variant.partition(":")
    values = dict(device="cpu", iters=100, eval_episodes=0, progress=False, num_envs=args.num_envs,
                  rollout_len=args.rollout_len, algo=algo, **({"recurrent": recurrent} if recurrent else {}))
    trainer = Trainer(build_config(args.preset, **values))
    for _ in range(args.warmup):
        trainer.iterate()
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    with HostWork() as work:
        trainer.iterate()
    launches = trainer.config.rollout_len
    with HostWork() as rollout:
        trainer.rollout()
    trainer.storage.roll_over()
    row = {"variant": variant, "syncs_per_iteration": sum(work.syncs.values()), "syncs": dict(work.syncs),
           "kernels_per_step": (rollout.kernel_count + launches) / launches,
           "host_ops_per_minibatch": minibatch_ops(trainer), "kernels_per_iteration": work.kernel_count,
           "compiled_after_warmup": torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs,
           "backends": trainer.backends()}
    print(f"{variant:<11}{row['syncs_per_iteration']:>7}{row['kernels_per_step']:>10.2f}{row['host_ops_per_minibatch']:>10}"
          f"{row['kernels_per_iteration']:>12}{row['compiled_after_warmup']:>10}   {row['backends']}")
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="simple-tag")
    ap.add_argument("--variants", default=VARIANTS, help="algo or algo:recurrent, comma-separated")
    ap.add_argument("--num-envs", type=int, default=64)
    ap.add_argument("--rollout-len", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=3, help="iterations before counting (compiles)")
    args = ap.parse_args()
    configure_process(1, torch.device("cpu"))
    print(f"machine: {describe_machine(torch.device('cpu'))}")
    print(f"config: preset {args.preset}, num_envs {args.num_envs}, rollout_len {args.rollout_len}, compiled "
          f"backends (the defaults), counted after {args.warmup} iterations")
    print(f"{'variant':<11}{'syncs':>7}{'k/step':>10}{'ops/mb':>10}{'kernels/it':>12}{'compiled':>10}   backends")
    rows = [measure(v.strip(), args) for v in args.variants.split(",") if v.strip()]
    print_result({"bench": "host_work", "preset": args.preset, "num_envs": args.num_envs,
                  "rollout_len": args.rollout_len, "warmup": args.warmup, "rows": rows,
                  "machine": describe_machine(torch.device("cpu"))})


if __name__ == "__main__":
    main()
