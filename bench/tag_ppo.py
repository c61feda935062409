#!/usr/bin/env python
"""The main job: train taggers and runners with PPO, every step of the loop on the device (GPU when
present). A thin front of ``gpurl train`` (:mod:`gpurl.train.cli`): the same flags, the same outputs.

    python bench/tag_ppo.py                          # Tag sized for this machine, a few minutes on 2 vCPUs
    python bench/tag_ppo.py --preset tag-10v100 --num-envs 100 --iters 20
    python bench/tag_ppo.py --resume runs/<dir>/checkpoint.pt --iters 400
    python bench/tag_ppo.py --help                   # one flag per config field
    torchrun --nproc_per_node=2 bench/tag_ppo.py --dist data_parallel    # every GPU of a node (gloo on CPUs)

Ends with one line ``RESULT {json}``: device, env, num_envs, num_agents, iterations, env_steps,
agent_steps_per_s (end to end over the training loop, after one warm-up iteration that compiles the
kernels; timed_iterations says over how many), phase_seconds (act, env, bookkeeping, advantages,
learn) and, for Tag, tags_per_episode_random (uniformly random taggers and runners, same config,
measured in this run) and tags_per_episode_final (the trained policies), the same per env step
(tags_per_step_*: an episode ends once every runner is caught, so a faster catch raises it), run_id and
machine.

The run's id, log dir, machine and config are printed (and written to <log dir>/run.json) at start; a
log dir holding another run's files is refused (``--fresh-log-dir`` writes into <log dir>-<run id>), and
so is a resume whose checkpoint is already at ``--iters`` (docs/training.md, "Run ids and resuming").
"""
from __future__ import annotations

from gpurl.train.cli import main

if __name__ == "__main__":
    main(prog="bench/tag_ppo.py")
