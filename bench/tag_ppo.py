#!/usr/bin/env python
"""Train taggers and runners with PPO, every step of the loop on the device (GPU when present).

    python bench/tag_ppo.py                          # Tag sized for this machine, a few minutes on 2 vCPUs
    python bench/tag_ppo.py --preset tag-10v100 --num-envs 100 --iters 20
    python bench/tag_ppo.py --resume runs/<dir>/checkpoint.pt --iters 400
    python bench/tag_ppo.py --help                   # one flag per config field
    torchrun --nproc_per_node=2 bench/tag_ppo.py --dist data_parallel    # every GPU of a node (gloo on CPUs)

Writes metrics.csv, TensorBoard events, checkpoint.pt, learning_curve.png and result.json into the log
dir, and ends with one line ``RESULT {json}``: device, env, num_envs, num_agents, iterations, env_steps,
agent_steps_per_s (end to end over the training loop, after one warm-up iteration that compiles the
kernels; timed_iterations says over how many), phase_seconds (act, env, bookkeeping, advantages,
learn) and, for Tag, tags_per_episode_random (uniformly random taggers and runners, same
config, measured in this run) and tags_per_episode_final (the trained policies).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import describe_machine, print_result  # noqa: E402

from gpurl.train.cli import config_from_args  # noqa: E402
from gpurl.multigpu.launch import main_from_config  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    cfg = config_from_args(argv, description=__doc__.split("\n\n")[0])
    result = main_from_config(cfg)
    if result is None:  # not the main rank: rank 0 prints and writes
        return {}
    import torch

    machine = describe_machine(torch.device(result["device"]))
    print(f"machine: {machine}")
    print("config: " + " ".join(f"{k}={v}" for k, v in cfg.to_dict().items()))
    for key in ("tags_per_episode_random", "tags_per_episode_final"):
        if result.get(key) is not None:
            print(f"{key}: {result[key]:.3f}")
    if result.get("tags_per_episode_random"):
        print(f"tags per episode, trained / random: {result['tags_per_episode_final'] / result['tags_per_episode_random']:.2f}x")
    print(f"end-to-end agent-steps/s ({result['device']}): {result['agent_steps_per_s']:.4g}; "
          f"phase seconds: {result['phase_seconds']}")
    print_result({**result, "machine": machine})
    return result


if __name__ == "__main__":
    main()
