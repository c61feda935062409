#!/usr/bin/env python
"""gpurl side by side with its peers on simple_tag, in one run: env throughput and PPO training.

Env throughput: gpurl (``env.step``), JaxMARL (``MPE_simple_tag_v3``, jit(scan(vmap(step)))), VMAS
(``simple_tag``) and PettingZoo mpe2 (``simple_tag_v3``, one Python env per env) on simple_tag 3v1v2
and 10v30v5 over num_envs, random actions drawn up front, autoreset after 25 steps. For each
(config, num_envs) every peer compiles and warms up, then the peers take turns (gpurl, jaxmarl, vmas,
mpe2, gpurl, ...) for ``--rounds`` rounds of about ``--chunk-seconds`` each; the table shows each peer's
median env-steps/s and the ratio gpurl / peer (the median of the per-round ratios: load from other
work on the machine hits neighbouring turns alike). mpe2 runs only up to ``--mpe2-max-envs`` envs.

Training: gpurl PPO vs a JAX IPPO baseline (``bench/peers_lib/jax_ippo.py``) on JaxMARL's simple_tag 3v1v2 from
the same TrainConfig, alternating iteration by iteration (the baseline in its own process), once per
seed of ``--train-seeds``; env-steps/s end to end (compile iterations excluded) and both return curves
over env steps, averaged over the seeds and compared against their seed-to-seed scatter (PNG in
``--out-dir``).

Peers are an optional extra (``pip install -e ".[peers]"``); a peer that does not import is named
and skipped. The last line is ``RESULT {json}``. Figures from a CPU are CPU figures.

    python bench/peers.py                    # default: a few minutes on 2 vCPUs
    python bench/peers.py --quick            # smaller: sizes 1,256,4096, fewer rounds, short training
    python bench/peers.py --num-envs 1,64,1024 --configs 3v1v2 --no-train
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from _common import describe_machine, print_result  # noqa: E402
from peers_lib.envs import CONFIGS, RUNNERS, peer_versions  # noqa: E402

NOTES = [
    "gpurl simple_tag = mpe2 1.1.1's simple_tag in float32 (docs/specs/simple_tag.md); mpe2 computes in float64.",
    "JaxMARL MPE_simple_tag_v3: same step dynamics; built with max_steps=24 so its episodes last 25 steps "
    "like gpurl's and mpe2's (its default 25 gives 26); obstacles reset in U(-1,1)^2 (gpurl/mpe2: U(-0.9,0.9)^2); "
    "for G = 1 (3v1v2) the same observations and rewards. For G > 1 (10v30v5) JaxMARL's adversary "
    "observation keeps only one other agent's velocity and its good-agent reward reads the wrong row: "
    "10v30v5 throughput is comparable in work, not in semantics.",
    "VMAS simple_tag is VMAS's own port: 10 physics substeps per step, its collision model, a bounded "
    "world, different observations: each VMAS step does more work; its ratios compare libraries, not "
    "identical envs.",
    "mpe2 is the semantic reference: one Python object per env, stepped in a loop (no vectorised form).",
    "Threads: gpurl steps envs in Numba parallel launches (OpenMP pool, numba_threads), VMAS and gpurl's "
    "learner in torch ops (torch_threads), JAX in XLA's own pool (all cores by default), mpe2 in one thread. "
    "A parallel launch waits for every pool thread, so when other work keeps a core busy a launch can stall "
    "for an OS time slice: on a shared machine gpurl's figures drop far more than the peers' (see load).",
    "Every peer gets random Discrete(5) actions drawn before timing; JaxMARL's per-step PRNG keys are "
    "drawn before timing too, and its scan sums every obs and reward so XLA cannot drop that work.",
]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None, help="gpurl/VMAS device: cpu, cuda, cuda:N (default: cuda if usable)")
    ap.add_argument("--configs", default="3v1v2,10v30v5", help=f"comma-separated of {list(CONFIGS)}")
    ap.add_argument("--num-envs", default=None, help="comma-separated num_envs (default 1,16,256,4096)")
    ap.add_argument("--peers", default=",".join(RUNNERS), help="comma-separated peers to run (gpurl always)")
    ap.add_argument("--rounds", type=int, default=None, help="alternating rounds per cell (default 5, quick 3)")
    ap.add_argument("--chunk-seconds", type=float, default=None,
                    help="target seconds of one peer's turn (default 0.3, quick 0.15)")
    ap.add_argument("--mpe2-max-envs", type=int, default=64,
                    help="mpe2 steps one Python env object per env: run it only up to this many envs")
    ap.add_argument("--max-agents", type=float, default=None,
                    help="skip VMAS/JaxMARL cells with more agents (num_envs x N) than this (default: none)")
    ap.add_argument("--train", action=argparse.BooleanOptionalAction, default=True,
                    help="run the training comparison (gpurl PPO vs JAX IPPO)")
    ap.add_argument("--train-envs", type=int, default=None, help="training num_envs (default 128 / the preset's)")
    ap.add_argument("--train-iters", type=int, default=None, help="training iterations (default 30, quick 8)")
    ap.add_argument("--train-rollout", type=int, default=None, help="training rollout_len (default 64 / the preset's)")
    ap.add_argument("--train-own-process", action=argparse.BooleanOptionalAction, default=True,
                    help="run the JAX baseline in its own process, driven iteration by iteration (default); "
                         "--no-train-own-process: both in this one")
    ap.add_argument("--train-seeds", type=int, default=None,
                    help="training comparisons, one per seed (--seed onwards); the curves are compared across "
                         "seeds (default 3, quick 1)")
    ap.add_argument("--quick", action="store_true", help="smaller run: sizes 1,256,4096, 3 rounds, 8 iterations")
    ap.add_argument("--numba-threads", type=int, default=None,
                    help="numba.set_num_threads(N) before anything runs (default: Numba's, all cores)")
    ap.add_argument("--torch-threads", type=int, default=None,
                    help="torch.set_num_threads(N) before anything runs (default: torch's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out-dir", default=None, help="where the training-curve PNG goes (default runs/peers-<time>)")
    args = ap.parse_args(argv)
    q = args.quick
    args.num_envs = args.num_envs or ("1,256,4096" if q else "1,16,256,4096")
    args.rounds = args.rounds or (3 if q else 5)
    args.chunk_seconds = args.chunk_seconds or (0.15 if q else 0.3)
    args.train_iters = args.train_iters or (8 if q else 30)
    args.train_seeds = args.train_seeds or (1 if q else 3)
    return args


def thread_settings() -> dict:
    import numba

    out = {"torch_threads": torch.get_num_threads(), "torch_interop_threads": torch.get_num_interop_threads(),
           "numba_threads": numba.get_num_threads(), "os_cpu_count": os.cpu_count(),
           "sched_affinity": len(os.sched_getaffinity(0))}
    for var in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "NUMBA_NUM_THREADS", "NUMBA_THREADING_LAYER", "XLA_FLAGS",
                "JAX_PLATFORMS"):
        if os.environ.get(var):
            out[var] = os.environ[var]
    return out


def build(peer, cfg, num_envs, device, seed, say):
    """A warmed-up runner, its compile/warm-up seconds and its steps per turn (or an error string)."""
    t0 = time.perf_counter()
    try:
        runner = RUNNERS[peer](cfg, num_envs, device, seed)
        runner.run(runner.granularity)  # compiles (Numba, XLA) on the first call
        compile_s = time.perf_counter() - t0
        probe = runner.granularity
        dt = runner.run(probe)
        while dt < 0.02 and probe < 4096:  # a probe long enough to time
            probe *= 4
            dt = runner.run(probe)
        per_step = dt / (-(-probe // runner.granularity) * runner.granularity)
        return runner, compile_s, per_step
    except Exception as exc:  # noqa: BLE001 - a peer failing on a cell is reported, not fatal
        say(f"  {peer}: failed on {cfg.name} x {num_envs}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}", None, None


def bench_cell(cfg, num_envs, peers, args, device, say) -> dict:
    runners, cell = {}, {"num_envs": num_envs, "num_agents": cfg.num_agents, "peers": {}}
    for peer in peers:
        if peer == "mpe2" and num_envs > args.mpe2_max_envs:
            cell["peers"][peer] = {"skipped": f"num_envs > --mpe2-max-envs {args.mpe2_max_envs}"}
            continue
        if peer in ("jaxmarl", "vmas") and args.max_agents and num_envs * cfg.num_agents > args.max_agents:
            cell["peers"][peer] = {"skipped": "num_envs x agents > --max-agents"}
            continue
        runner, compile_s, per_step = build(peer, cfg, num_envs, device, args.seed, say)
        if isinstance(runner, str):
            cell["peers"][peer] = {"error": runner}
            continue
        g = runner.granularity
        steps = max(g, int(round(args.chunk_seconds / per_step / g)) * g)
        runners[peer] = (runner, steps)
        cell["peers"][peer] = {"compile_and_warmup_s": round(compile_s, 2), "steps_per_turn": steps,
                               "where": runner.where}
    rates = {peer: [] for peer in runners}
    cell["load_before"] = round(os.getloadavg()[0], 2)
    for _ in range(args.rounds):
        for peer, (runner, steps) in runners.items():
            dt = runner.run(steps)
            rates[peer].append(num_envs * steps / dt)
    for peer, rs in rates.items():
        cell["peers"][peer].update(env_steps_per_s=float(np.median(rs)), best=float(np.max(rs)),
                                   rounds=[round(r, 1) for r in rs],
                                   agent_steps_per_s=float(np.median(rs)) * cfg.num_agents)
    cell["load_after"] = round(os.getloadavg()[0], 2)
    if "gpurl" in rates:
        cell["ratio_gpurl_over"] = {peer: float(np.median(np.array(rates["gpurl"]) / np.array(rs)))
                                    for peer, rs in rates.items() if peer != "gpurl"}
        cell["ratio_best_gpurl_over"] = {peer: float(np.max(rates["gpurl"]) / np.max(rs))
                                         for peer, rs in rates.items() if peer != "gpurl"}
    del runners
    gc.collect()
    return cell


def _r(x: float) -> str:
    return f"{x:.2f}" if x < 100 else f"{x:.0f}"


def fmt_rate(entry: dict) -> str:
    if "env_steps_per_s" in entry:
        return f"{entry['env_steps_per_s']:>13,.0f}"
    return f"{'skipped' if 'skipped' in entry else 'failed':>13s}"


def main(argv=None) -> dict:
    args = parse_args(argv)
    from gpurl.envs import resolve_device

    device = resolve_device(args.device)
    if args.numba_threads:
        import numba

        numba.set_num_threads(args.numba_threads)
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    versions, missing = peer_versions()
    wanted = ["gpurl"] + [p.strip() for p in args.peers.split(",") if p.strip() and p.strip() != "gpurl"]
    unknown = [p for p in wanted if p not in RUNNERS]
    if unknown:
        raise SystemExit(f"unknown peer(s) {unknown}; choose from {list(RUNNERS)}")
    if "gpurl" in missing:
        raise SystemExit(f"gpurl does not import: {missing['gpurl']}")
    peers = [p for p in wanted if p not in missing]
    configs = [c.strip() for c in args.configs.split(",")]
    bad = [c for c in configs if c not in CONFIGS]
    if bad:
        raise SystemExit(f"unknown config(s) {bad}; choose from {list(CONFIGS)}")
    sizes = [int(s) for s in args.num_envs.split(",")]
    machine = describe_machine(device)
    say = print
    say("gpurl vs peers on simple_tag: env throughput (alternating rounds) and PPO training")
    say("machine: " + ", ".join(f"{k}={v}" for k, v in machine.items()))
    say("threads: " + ", ".join(f"{k}={v}" for k, v in thread_settings().items())
        + (" (set by --numba-threads/--torch-threads)" if args.numba_threads or args.torch_threads
           else " (torch/numba/XLA defaults; nothing here changes them)"))
    say("versions: " + "; ".join(f"{k}: {v}" for k, v in versions.items()))
    for peer, why in missing.items():
        if peer in wanted:
            say(f"COULD NOT IMPORT peer {peer}: {why}  -> skipped (pip install -e \".[peers]\")")
    if "jaxmarl" in peers:
        import jax

        say(f"jax devices: {jax.devices()} (JaxMARL runs on JAX's default device)")
    say(f"gpurl / VMAS device: {device}; mpe2: CPU (numpy). Peers run: {peers}")
    say(f"settings: configs={configs} num_envs={sizes} rounds={args.rounds} chunk_seconds={args.chunk_seconds} "
        f"mpe2_max_envs={args.mpe2_max_envs} seed={args.seed}")
    for cfg_name in configs:
        c = CONFIGS[cfg_name]
        say(f"config {cfg_name}: num_adversaries={c.num_adversaries} num_good={c.num_good} "
            f"num_obstacles={c.num_obstacles} max_cycles={c.max_cycles} (N={c.num_agents} agents), Discrete(5)")
    say("like-for-like notes:")
    for note in NOTES:
        say("  - " + note)

    env_rows = {}
    say("")
    say("env throughput, env-steps/s (median of the rounds); gpurl / peer as 'median per-round ratio / best "
        "vs best'; load = 1-min load average before / after the cell's rounds (2 vCPUs: above ~2, other work "
        "competes, and gpurl's multi-threaded launches suffer most, see the notes)")
    head = f"{'config':8s} {'envs':>5s} " + " ".join(f"{p:>13s}" for p in peers) + "   " + \
        " ".join(f"{'gpurl/' + p:>15s}" for p in peers if p != "gpurl") + f" {'load':>11s}"
    say(head)
    for cfg_name in configs:
        env_rows[cfg_name] = {}
        for num_envs in sizes:
            cell = bench_cell(CONFIGS[cfg_name], num_envs, peers, args, device, say)
            env_rows[cfg_name][str(num_envs)] = cell
            med, best = cell.get("ratio_gpurl_over", {}), cell.get("ratio_best_gpurl_over", {})
            say(f"{cfg_name:8s} {num_envs:5d} " + " ".join(fmt_rate(cell["peers"][p]) for p in peers) + "   " +
                " ".join(f"{_r(med[p]) + ' / ' + _r(best[p]):>15s}" if p in med else f"{'-':>15s}"
                         for p in peers if p != "gpurl") + f" {cell['load_before']:5.2f}/{cell['load_after']:5.2f}")
            sys.stdout.flush()
    say("compile + warm-up seconds and steps per turn per cell are in the RESULT line.")

    training = None
    if args.train:
        training = run_training(args, device, missing, say)

    summary = acceptance(env_rows, training)
    say("")
    say("acceptance:")
    for line in summary["lines"]:
        say("  " + line)
    payload = {"bench": "peers", "machine": machine, "threads": thread_settings(), "versions": versions,
               "missing_peers": missing, "device": str(device),
               "settings": {"configs": configs, "num_envs": sizes, "rounds": args.rounds,
                            "chunk_seconds": args.chunk_seconds, "mpe2_max_envs": args.mpe2_max_envs,
                            "train_seeds": args.train_seeds, "train_own_process": args.train_own_process,
                            "seed": args.seed},
               "env_throughput": env_rows, "training": training,
               "acceptance": {k: v for k, v in summary.items() if k != "lines"}}
    print_result(payload)
    return payload


def run_training(args, device, missing, say):
    from peers_lib.train import compare_training, plot_curves, train_config

    say("")
    if "jaxmarl" in missing:
        say(f"training comparison skipped: JaxMARL/JAX does not import ({missing['jaxmarl']})")
        return {"skipped": missing["jaxmarl"]}
    cfg, source = train_config(args.train_envs, args.train_iters, args.train_rollout, args.seed, device)
    say(f"training: gpurl PPO vs JAX IPPO on simple_tag (from {source}), alternating iterations; "
        f"gpurl on {device}, JAX on its default device")
    fields = ("env", "env_params", "num_envs", "rollout_len", "iters", "epochs", "minibatches", "lr", "anneal_lr",
              "gamma", "gae_lambda", "clip_coef", "clip_vloss", "vf_coef", "ent_coef", "max_grad_norm", "norm_adv",
              "hidden", "activation", "norm_obs", "frame_stack", "seed")
    cfg_dict = {k: getattr(cfg, k) for k in fields}
    say("  config (both): " + " ".join(f"{k}={v}" for k, v in cfg_dict.items()))
    say("  gpurl: one ActorCritic per group (adversary, good), separate actor/critic MLPs; policy_backend="
        f"{cfg.policy_backend}; the baseline: the same per group, written in JAX (bench/peers_lib/jax_ippo.py)")
    t0 = time.perf_counter()
    say(f"  seeds {cfg.seed}..{cfg.seed + args.train_seeds - 1}: one alternating comparison each; the JAX baseline "
        + ("in its own process" if args.train_own_process else "in this process"))
    result = compare_training(cfg, say, seeds=args.train_seeds, own_process=args.train_own_process)
    result["config"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in cfg_dict.items()}
    result["config_source"] = source
    result["wall_seconds"] = round(time.perf_counter() - t0, 1)
    out_dir = Path(args.out_dir) if args.out_dir else Path("runs") / f"peers-{time.strftime('%Y%m%d-%H%M%S')}"
    png = plot_curves(result, out_dir / "training_curves.png",
                      f"simple_tag 3v1v2, {cfg.num_envs} envs x T={cfg.rollout_len}, hidden {cfg.hidden}, "
                      f"{cfg.epochs} epochs x {cfg.minibatches} minibatches, mean of {args.train_seeds} seed(s); "
                      f"gpurl on {device}, JAX IPPO on CPU")
    result["curve_png"] = str(png) if png else None
    g, j = result["gpurl"]["env_steps_per_s"], result["jax_ippo"]["env_steps_per_s"]
    say(f"training throughput (compile iteration excluded): gpurl {g:,.0f} env-steps/s, JAX IPPO {j:,.0f} "
        f"env-steps/s: gpurl / JAX = {result['ratio_gpurl_over_jax']:.2f} (median per-iteration ratio "
        f"{result['ratio_median_per_iteration']:.2f}); compile iteration: gpurl {result['compile_seconds']['gpurl']:.1f} s, "
        f"JAX {result['compile_seconds']['jax_ippo']:.1f} s")
    say(f"gpurl phase seconds over the timed iterations: {result['gpurl_phase_seconds']}")
    for group, res in result["curve_comparison"].items():
        say(f"return/{group}, mean over the last third: gpurl {res['gpurl']['last_third_mean']:.2f}, "
            f"JAX {res['jax_ippo']['last_third_mean']:.2f} (per seed: gpurl "
            f"{res['gpurl']['last_third_mean_per_seed']}, JAX {res['jax_ippo']['last_third_mean_per_seed']}; "
            f"over the whole run: gpurl "
            f"{res['gpurl']['mean_over_run']:.2f}, JAX {res['jax_ippo']['mean_over_run']:.2f})"
            + (f"; gpurl no worse (difference >= -2 s.e. over {res['standard_error_over']} = "
               f"{-res['two_standard_errors']:.2f}): {res['gpurl_no_worse']}" if "gpurl_no_worse" in res else ""))
    say(f"curves: {png}" if png else "curves: matplotlib not installed, no PNG")
    return result


def acceptance(env_rows: dict, training) -> dict:
    lines, out = [], {}
    cell = env_rows.get("3v1v2", {}).get("4096") or {}
    best = cell.get("ratio_best_gpurl_over", {}).get("jaxmarl")
    med = cell.get("ratio_gpurl_over", {}).get("jaxmarl")
    out["env_3v1v2_4096_ratio_vs_jaxmarl_best"] = best
    out["env_3v1v2_4096_ratio_vs_jaxmarl_median"] = med
    out["env_bar_met"] = None if best is None else best >= 30
    lines.append("simple_tag 3v1v2 env throughput at 4096 envs, gpurl / JaxMARL >= 30 (best vs best, as "
                 "bench/env_throughput.py keeps the best: other work only adds time): "
                 + ("not measured" if best is None else
                    f"{best:.2f}x (median per-round ratio {med:.2f}x) -> {'MET' if best >= 30 else 'NOT MET'}"))
    if training and "ratio_gpurl_over_jax" in training:
        r, r_med = training["ratio_gpurl_over_jax"], training["ratio_median_per_iteration"]
        out["train_ratio_vs_jax_ippo_total"] = r
        out["train_ratio_vs_jax_ippo_median"] = r_med
        out["train_bar_met"] = r_med >= 2
        lines.append(f"PPO training throughput, gpurl / JAX IPPO >= 2 (median of the per-iteration ratios of "
                     f"neighbouring iterations): {r_med:.2f}x (total time: {r:.2f}x) -> "
                     f"{'MET' if r_med >= 2 else 'NOT MET'}")
        for group in ("adversary", "good"):
            ok = training["curve_comparison"][group].get("gpurl_no_worse")
            out[f"curve_{group}_no_worse"] = ok
            lines.append(f"return curve per env step, {group}: gpurl no worse than JAX IPPO: "
                         + ("undetermined" if ok is None else ("yes" if ok else "NO")))
    else:
        lines.append("training comparison not run")
    out["lines"] = lines
    return out


if __name__ == "__main__":
    main()
