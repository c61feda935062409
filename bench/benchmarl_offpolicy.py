#!/usr/bin/env python
"""BenchMARL's MADDPG and MASAC over gpurl's TorchRL adapter beside gpurl's own MADDPG and MASAC, on mpe2's
simple_spread with continuous actions (3 agents, 25-step episodes): training frames per second and the return
at the same frame budget, on the CPU, one seed (issue 45; target: 5x BenchMARL's frames/s at equal or better
return).

    python bench/benchmarl_offpolicy.py                          # maddpg and masac, the default budget
    python bench/benchmarl_offpolicy.py --algos maddpg --frames 2000   # a smoke run

BenchMARL is an optional peer (``pip install -e ".[benchmarl]"``); without it the script says so and stops.

What is the same on both sides:
- the task: gpurl's simple_spread (``continuous_actions=True``, ``max_cycles=25``), BenchMARL's through
  ``GpurlTask.SIMPLE_SPREAD`` (gpurl.envs.adapters.benchmarl), the same number of vectorised envs (``--num-envs``);
- a frame is one env step (all 3 agents); each iteration collects ``min(6000, --frames)`` frames (BenchMARL's
  ``off_policy_collected_frames_per_batch``) and then takes one update of 128 frames per 6 frames collected
  (``off_policy_n_optimizer_steps`` 1000 of ``off_policy_train_batch_size`` 128: gpurl's ``q_updates``,
  ``q_batch``); the replay keeps every frame of the run (BenchMARL's 1M-frame default is never full at these
  budgets; both are sized ``min(1M, frames)``);
- the networks: MLPs of ``--hidden`` (BenchMARL's MLP default, 256,256) with tanh, for actors and critics;
- the torch and Numba threads (``--threads``, fixed for the whole process) and the machine's load: the two runs
  alternate iteration by iteration (gpurl's iteration runs in a BenchMARL callback and its time is taken out of
  BenchMARL's), so a busy neighbour slows both alike. Where other processes keep the CPUs busy, ``--threads 1``:
  a parallel region waits for every thread of the pool, and one that shares its CPU costs both sides a
  scheduler time slice per region.
Each side keeps its own learning values (BenchMARL's experiment and algorithm YAML defaults, gpurl's
``simple-spread-<algo>`` preset); all are printed.

``--gpurl-work preset`` measures each side as its users run it instead: gpurl takes its preset's updates per
frame (64 updates of 256 transitions per 1600 frames: 240 per 6000), batch and networks (64,64), BenchMARL its
defaults as above; the frames, the envs and the iterations stay the same. The default (``same``) gives both
sides the same work per frame, so that the ratio measures the implementations.

The default budget runs both algorithms in about ten minutes on two CPUs: at BenchMARL's ratio of updates to
frames, learning takes nearly all of each iteration on both sides. A second table splits the timed seconds into
collection (acting, env steps, into the replay) and learning.

Throughput: frames of the timed iterations over their seconds; the first two iterations of each side are not
timed (gpurl's own rule: its first iteration builds the env kernels). Collection and learning are both
inside; BenchMARL's loggers, evaluation and checkpoints are off.

Return: each final policy plays the same episodes (``--eval-episodes`` over fresh gpurl envs with the same
seed, autoreset), deterministic actions (gpurl: the actor's action without exploration noise, MASAC the
squashed mean; BenchMARL: its policy under ``ExplorationType.DETERMINISTIC``, as its own evaluation), beside a
uniformly random policy. The figure is gpurl's evaluation return: per episode, each agent's summed reward,
averaged over the agents (gpurl.train.evaluation.play_episodes); mean over episodes with its 95% interval.

The floor: with two untimed iterations, the matrix products of one iteration of each side are recorded (BenchMARL's
second iteration; gpurl's second iteration of a separate run whose acting and learning are eager, the same products
as its compiled ones) and timed alone on the same threads (bench/peers_lib/gemm_floor.py). A side's iteration
cannot take less than its products; BenchMARL's iteration over them bounds the ratio any implementation of the
same work could reach on these CPUs.

Ends with ``RESULT {json}``: per algorithm, both sides' frames, seconds, frames/s, returns and matrix products
(GFLOP, calls, seconds alone per iteration), the fps ratio, its bounds and the verdict.
"""
from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from importlib import metadata
from pathlib import Path

import torch

from _common import describe_machine, print_result
from peers_lib.benchmarl_side import (BATCH_FRAMES, ENV, ENV_PARAMS, GROUP, MEMORY, TRAIN_BATCH, UPDATES, WARMUP,
                                      Alternate, BenchmarlPolicy, benchmarl_experiment, benchmarl_values,
                                      import_benchmarl)
from peers_lib.gemm_floor import GemmRecorder, gemm_seconds
from gpurl.envs import make
from gpurl.train import Trainer, build_config
from gpurl.train.evaluation import RandomPolicy, play_episodes, summarize
from gpurl.train.policy import TrainedPolicy, read_checkpoint
from gpurl.train.presets import PRESETS
from gpurl.train.process import configure_process
from gpurl.train.run import TrainingRun

#: the issue's target: gpurl's frames/s over BenchMARL's
TARGET_RATIO = 5.0


def _quiet(*args, **kwargs) -> None:
    pass


class Plan:
    """The sizes both sides share, from the flags."""

    def __init__(self, args):
        self.batch_frames = min(BATCH_FRAMES, args.frames)
        if self.batch_frames % args.num_envs:
            raise SystemExit(f"--num-envs {args.num_envs} must divide the frames per iteration ({self.batch_frames})")
        self.iterations = max(1, args.frames // self.batch_frames)
        self.frames = self.iterations * self.batch_frames
        self.rollout_len = self.batch_frames // args.num_envs
        self.updates = max(1, round(UPDATES * self.batch_frames / BATCH_FRAMES))
        self.memory = min(MEMORY, self.frames)
        self.warmup = max(0, min(WARMUP, self.iterations - 1))
        self.num_envs, self.hidden, self.seed, self.threads = args.num_envs, args.hidden, args.seed, args.threads
        #: gpurl runs its preset's updates per frame, batch and networks (``--gpurl-work preset``)
        self.gpurl_own = args.gpurl_work == "preset"

    def describe(self) -> str:
        gpurl = ("gpurl: its preset's updates per frame, batch and networks; BenchMARL: " if self.gpurl_own else "")
        return (f"{self.frames} frames = {self.iterations} iterations x {self.batch_frames} frames "
                f"({self.num_envs} envs x {self.rollout_len} steps); {gpurl}{self.updates} updates of {TRAIN_BATCH} "
                f"frames per iteration; replay {self.memory} frames; MLPs {list(self.hidden)} tanh; {self.threads} "
                f"torch threads; seed {self.seed}; iterations not timed: the first {self.warmup} of each side")


def gpurl_config(algo: str, plan: Plan, log_dir: str, **overrides):
    """gpurl's ``simple-spread-<algo>`` preset with the shared sizes over it (and, unless ``plan.gpurl_own``,
    BenchMARL's updates per frame, batch and networks), then ``overrides``."""
    preset = f"simple-spread-{algo}"
    if plan.gpurl_own:  # the preset's updates per frame, scaled to this iteration's frames; its batch and networks
        values = PRESETS[preset]
        per_frame = values["q_updates"] / (values["num_envs"] * values["rollout_len"])
        work = dict(q_updates=round(plan.batch_frames * per_frame))
    else:
        work = dict(q_updates=plan.updates, q_batch=TRAIN_BATCH, hidden=tuple(plan.hidden), activation="tanh")
    values = dict(env_params=dict(ENV_PARAMS), num_envs=plan.num_envs, rollout_len=plan.rollout_len,
                  iters=plan.iterations, replay_capacity=math.ceil(plan.memory / plan.num_envs),
                  replay_in_checkpoint=False, seed=plan.seed, device="cpu", torch_threads=plan.threads,
                  eval_episodes=0, checkpoint_every=0, log_every=plan.iterations, progress=False, log_dir=log_dir,
                  **work)
    return build_config(preset, **{**values, **overrides})


def gpurl_gemms(algo: str, plan: Plan, log_dir: str) -> GemmRecorder:
    """The matrix products of one gpurl iteration that learns (its second), acting and learning eager: a compiled
    region's products are hidden from the recorder, and they are the same products."""
    trainer = Trainer(gpurl_config(algo, plan, log_dir, iters=2, policy_backend="eager", learner_backend="eager"))
    trainer.iterate()
    recorder = GemmRecorder()
    with recorder:
        trainer.iterate()
    return recorder


def evaluate(policy_of, episodes: int, seed: int) -> dict:
    """``policy_of(env)``'s returns of the ``GROUP`` over ``episodes`` episodes of fresh envs seeded ``seed``
    (the same episodes for every policy): summarize()'s mean, std, ci95, episodes."""
    num_envs = min(episodes, 100)
    env = make(ENV, num_envs=num_envs, device="cpu", seed=seed, autoreset=True, validate=False, global_state=False,
               **ENV_PARAMS)
    totals = play_episodes(env, policy_of(env), math.ceil(episodes / num_envs))
    return summarize(totals[f"return/{GROUP}"])


def run_pair(bm: dict, algo: str, plan: Plan, eval_episodes: int) -> dict:
    """Both sides of one algorithm, iteration by iteration; their figures and returns."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = gpurl_config(algo, plan, str(Path(tmp) / "gpurl"))
        run = None

        def gpurl_step(k: int) -> None:
            if not run.done:
                run.step()

        # BenchMARL's second iteration, untimed, records its matrix products (with two iterations untimed)
        alternate = Alternate(algo, gpurl_step, record=1 if plan.warmup >= 2 else None)
        s0 = time.perf_counter()
        experiment = benchmarl_experiment(bm, algo, plan, tmp, [alternate])
        bm_setup = time.perf_counter() - s0
        run = TrainingRun(cfg, say=_quiet, lines=_quiet)
        s0 = time.perf_counter()
        run.build()
        run.begin()
        gpurl_wall = time.perf_counter() - s0
        print(f"{algo} BenchMARL: {benchmarl_values(experiment)}")
        print(f"{algo} gpurl: " + " ".join(f"{k}={v}" for k, v in run.cfg.flat().items()))
        load_before = os.getloadavg()[0]
        try:
            alternate.start = bm_start = time.perf_counter()
            experiment.run()
            bm_end = time.perf_counter()
        except BaseException:
            run.close(failed=True)
            raise
        marks, gpurl_steps = alternate.marks, alternate.steps
        gpurl_wall += sum(gpurl_steps)
        s0 = time.perf_counter()
        run.close()
        result = run.finish()
        gpurl_wall += time.perf_counter() - s0
        load_after = os.getloadavg()[0]
        if experiment.total_frames != plan.frames or result["env_steps"] != plan.frames:
            raise RuntimeError(f"frames: BenchMARL {experiment.total_frames}, gpurl {result['env_steps']}, "
                               f"planned {plan.frames}")
        # BenchMARL's iteration k: from the end of k-1 (after the gpurl step run there) to its own end
        starts = [bm_start] + [m + d for m, d in zip(marks, gpurl_steps)]
        bm_iteration = [end - start for start, end in zip(starts, marks)]
        bm_timed = sum(bm_iteration[plan.warmup:])
        bm_collect = sum(c - start for start, c in zip(starts, alternate.collected))
        bm_collect_timed = sum(c - start for start, c in list(zip(starts, alternate.collected))[plan.warmup:])
        timed_frames = (plan.iterations - plan.warmup) * plan.batch_frames
        bm_wall = bm_setup + (bm_end - bm_start) - sum(gpurl_steps)
        eval_seed = plan.seed + 1000
        _, checkpoint = read_checkpoint(result["log_dir"], say=_quiet)
        returns = {
            "gpurl": evaluate(lambda env: TrainedPolicy(checkpoint, env, deterministic=True, seed=eval_seed),
                              eval_episodes, eval_seed),
            "benchmarl": evaluate(lambda env: BenchmarlPolicy(experiment, env), eval_episodes, eval_seed),
            "random": evaluate(lambda env: RandomPolicy(env, eval_seed), eval_episodes, eval_seed),
        }
        gemms = {"benchmarl": alternate.gemms if alternate.record is not None else None,
                 "gpurl": gpurl_gemms(algo, plan, str(Path(tmp) / "gemms")) if alternate.record is not None else None}
    p = cfg.algo_params
    sides = {
        "gpurl": {"frames": plan.frames, "timed_frames": result["timed_iterations"] * plan.batch_frames,
                  "seconds": result["train_seconds"], "wall_seconds": gpurl_wall, "updates_per_iteration": p.q_updates,
                  "train_batch": p.q_batch, "hidden": list(p.hidden)},
        "benchmarl": {"frames": plan.frames, "timed_frames": timed_frames, "seconds": bm_timed,
                      "wall_seconds": bm_wall, "updates_per_iteration": plan.updates, "train_batch": TRAIN_BATCH,
                      "hidden": list(plan.hidden)},
    }
    for side, row in sides.items():
        row["frames_per_s"] = row["timed_frames"] / row["seconds"] if row["seconds"] else None
        row["return"] = returns[side]
        row.update(gemm_floor(gemms[side]))
    sides["gpurl"]["iteration_seconds"] = gpurl_steps  # its step calls: the last one's checkpoint write included
    sides["benchmarl"]["iteration_seconds"] = bm_iteration
    # Collection (acting, env steps, into the replay) and learning, over the timed iterations
    phases = result["phase_seconds"]
    sides["gpurl"]["phase_seconds"] = phases
    learn = phases.get("learn", 0.0)
    sides["gpurl"]["collect_seconds"] = sum(phases.values()) - learn
    sides["gpurl"]["learn_seconds"] = learn
    sides["benchmarl"]["collect_seconds"] = bm_collect_timed
    sides["benchmarl"]["learn_seconds"] = bm_timed - bm_collect_timed
    sides["benchmarl"]["collect_seconds_all_iterations"] = bm_collect
    return {**sides, "return_random": returns["random"], "load_before": load_before, "load_after": load_after}


def gemm_floor(recorder: GemmRecorder | None) -> dict:
    """One iteration's matrix products (:mod:`peers_lib.gemm_floor`): their GFLOP, calls and seconds alone."""
    if recorder is None:
        return {}
    return {"gemm_gflop_per_iteration": recorder.flops / 1e9, "gemm_calls_per_iteration": sum(recorder.calls.values()),
            "gemm_seconds_per_iteration": gemm_seconds(recorder)}


def verdict(pair: dict) -> dict:
    g, b = pair["gpurl"], pair["benchmarl"]
    ratio = g["frames_per_s"] / b["frames_per_s"] if g["frames_per_s"] and b["frames_per_s"] else None
    diff = g["return"]["mean"] - b["return"]["mean"]
    half = math.hypot(g["return"]["ci95"] or 0.0, b["return"]["ci95"] or 0.0)  # the difference's interval, about
    word = "better" if diff > half else ("equal" if diff >= -half else "worse")
    return {"fps_ratio": ratio, "fps_target_met": ratio is not None and ratio >= TARGET_RATIO,
            "return_difference": diff, "return_difference_ci95": half, "return": word,
            "return_target_met": word != "worse"}


def print_gemm_floor(pairs: dict, plan: Plan) -> None:
    """Each side's matrix products of one iteration beside its timed iteration, and the bound they set on the
    frames/s ratio (a side's iteration cannot take less than its products alone)."""
    if not all("gemm_seconds_per_iteration" in pair[side] for pair in pairs.values() for side in ("gpurl", "benchmarl")):
        return
    print(f"\nmatrix products of one iteration (recorded, then timed alone; peers_lib/gemm_floor.py):\n{'algo':<8}"
          f"{'side':<11}{'GFLOP':>8}{'calls':>8}{'alone s':>9}{'iteration s':>13}{'share':>7}")
    for algo, pair in pairs.items():
        for side in ("gpurl", "benchmarl"):
            r = pair[side]
            iteration = r["seconds"] / (r["timed_frames"] / plan.batch_frames)
            r["iteration_seconds_timed_mean"] = iteration
            print(f"{algo:<8}{side:<11}{r['gemm_gflop_per_iteration']:>8.2f}{r['gemm_calls_per_iteration']:>8}"
                  f"{r['gemm_seconds_per_iteration']:>9.2f}{iteration:>13.2f}"
                  f"{r['gemm_seconds_per_iteration'] / iteration:>7.0%}")
        g, b = pair["gpurl"], pair["benchmarl"]
        pair["fps_ratio_bound"] = b["iteration_seconds_timed_mean"] / g["gemm_seconds_per_iteration"]
        pair["fps_ratio_bound_same_products"] = b["iteration_seconds_timed_mean"] / b["gemm_seconds_per_iteration"]
        print(f"{algo}: BenchMARL's iteration over gpurl's products alone: {pair['fps_ratio_bound']:.2f}x, over its "
              f"own: {pair['fps_ratio_bound_same_products']:.2f}x (the most any implementation of that work could "
              "gain on these CPUs)")
    print("(recorded: BenchMARL's second iteration, gpurl's second iteration of a separate run with eager acting and "
          "learning: the same products as its compiled ones)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=48_000, help="frames (env steps) per run (default 48000)")
    parser.add_argument("--algos", default="maddpg,masac", help="comma-separated: maddpg, masac")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-envs", type=int, default=10, help="vectorised envs on both sides (BenchMARL's "
                        "off_policy_n_envs_per_worker default: 10)")
    parser.add_argument("--hidden", default="256,256", help="MLP widths of every network (BenchMARL's default)")
    parser.add_argument("--eval-episodes", type=int, default=200)
    parser.add_argument("--gpurl-work", choices=("same", "preset"), default="same",
                        help="same: gpurl takes BenchMARL's updates per frame, batch and networks (default); preset: "
                        "its own preset's (each side as its users run it)")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                        help="torch and Numba threads of both sides (default: this process's CPUs; 1 on a machine "
                        "other processes keep busy)")
    args = parser.parse_args()
    try:
        args.hidden = tuple(int(w) for w in args.hidden.split(","))
    except ValueError:
        parser.error(f"--hidden: widths separated by commas (256,256), got {args.hidden!r}")
    if any(w < 1 for w in args.hidden):
        parser.error(f"--hidden: widths must be >= 1, got {args.hidden}")
    algos = [a.strip() for a in args.algos.split(",") if a.strip()]
    unknown = sorted(set(algos) - {"maddpg", "masac"})
    if unknown or not algos:
        parser.error(f"unknown algorithm(s) {unknown}: choose from maddpg, masac")
    if args.frames < 1 or args.num_envs < 1 or args.eval_episodes < 1:
        parser.error("--frames, --num-envs and --eval-episodes must be >= 1")
    import gpurl.algos

    missing = [a for a in algos if a not in gpurl.algos.ALGORITHMS]
    if missing:
        raise SystemExit(f"gpurl has no algorithm {missing} (registered: {list(gpurl.algos.ALGORITHMS)})")
    try:
        bm = import_benchmarl()
    except ImportError as err:
        raise SystemExit(f"BenchMARL, the peer of this benchmark, does not import ({type(err).__name__}: {err}); "
                         "install it with: pip install -e \".[benchmarl]\". Nothing was measured.") from None

    configure_process(args.threads, torch.device("cpu"))
    plan = Plan(args)
    machine = describe_machine(torch.device("cpu"))
    versions = {name: metadata.version(name) for name in ("benchmarl", "torchrl", "tensordict")}
    print(f"machine: {machine}")
    print(f"peers: {versions}")
    print(f"task: {ENV} {ENV_PARAMS}, group '{GROUP}' (3 agents); a frame is one env step")
    print(f"both sides: {plan.describe()}")
    print(f"return: mean over {args.eval_episodes} episodes (seed {plan.seed + 1000}) of the mean over agents of "
          "each agent's summed reward, deterministic actions; a uniformly random policy for reference")
    pairs = {}
    for algo in algos:
        pairs[algo] = run_pair(bm, algo, plan, args.eval_episodes)
        pairs[algo]["verdict"] = verdict(pairs[algo])

    print(f"\n{'algo':<8}{'side':<11}{'frames':>8}{'seconds':>9}{'frames/s':>10}{'wall s':>8}{'return':>9}"
          f"{'+-95%':>7}")
    for algo, pair in pairs.items():
        for side in ("gpurl", "benchmarl"):
            r = pair[side]
            print(f"{algo:<8}{side:<11}{r['timed_frames']:>8}{r['seconds']:>9.1f}{r['frames_per_s']:>10.0f}"
                  f"{r['wall_seconds']:>8.1f}{r['return']['mean']:>9.2f}{r['return']['ci95'] or 0:>7.2f}")
        rnd = pair["return_random"]
        print(f"{algo:<8}{'random':<11}{'':>8}{'':>9}{'':>10}{'':>8}{rnd['mean']:>9.2f}{rnd['ci95'] or 0:>7.2f}")
    print("(frames and seconds: the timed iterations; wall: the whole training call, setup and warm-up included)")
    if plan.warmup == 0:
        print("(one iteration: nothing left out, its first-call costs included: a smoke run, not a throughput figure)")
    print(f"\nwhere the timed seconds go:\n{'algo':<8}{'side':<11}{'collect s':>10}{'learn s':>9}{'collect fps':>13}"
          f"{'updates/s':>11}")
    for algo, pair in pairs.items():
        for side in ("gpurl", "benchmarl"):
            r = pair[side]
            collect_fps = r["timed_frames"] / r["collect_seconds"] if r["collect_seconds"] > 0 else float("nan")
            updates = r["timed_frames"] // plan.batch_frames * r["updates_per_iteration"]
            ups = updates / r["learn_seconds"] if r["learn_seconds"] > 0 else float("nan")
            print(f"{algo:<8}{side:<11}{r['collect_seconds']:>10.1f}{r['learn_seconds']:>9.1f}{collect_fps:>13.0f}"
                  f"{ups:>11.1f}")
    print("(gpurl: its own phase timers, collect = act + env + bookkeeping + replay; BenchMARL: from the start of "
          "an iteration to its batch's callback, the rest learning)")
    print_gemm_floor(pairs, plan)
    for algo, pair in pairs.items():
        v = pair["verdict"]
        print(f"{algo}: gpurl/BenchMARL frames/s {v['fps_ratio']:.2f}x (target {TARGET_RATIO:g}x: "
              f"{'met' if v['fps_target_met'] else 'NOT met'}); return {v['return']} "
              f"({v['return_difference']:+.2f} +- {v['return_difference_ci95']:.2f}; equal or better: "
              f"{'met' if v['return_target_met'] else 'NOT met'}); load average {pair['load_before']:.2f} before, "
              f"{pair['load_after']:.2f} after")
    print_result({"bench": "benchmarl_offpolicy", "device": "cpu", "env": ENV, "env_params": ENV_PARAMS,
                  "frames": plan.frames, "iterations": plan.iterations, "batch_frames": plan.batch_frames,
                  "num_envs": plan.num_envs, "updates_per_iteration": plan.updates, "train_batch": TRAIN_BATCH,
                  "replay_frames": plan.memory, "hidden": list(plan.hidden), "threads": plan.threads,
                  "warmup_iterations": plan.warmup, "gpurl_work": args.gpurl_work, "seed": plan.seed,
                  "eval_episodes": args.eval_episodes,
                  "versions": {**versions, "gpurl": machine["gpurl"], "torch": machine["torch"]},
                  "target_ratio": TARGET_RATIO, "algos": pairs})


if __name__ == "__main__":
    main()
