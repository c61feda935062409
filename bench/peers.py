#!/usr/bin/env python
"""gpurl side by side with its peers on the MPE suite, in one run: env throughput of every scenario and
PPO training on simple_tag.

Env throughput: every scenario of mpe2 1.1.1's MPE suite (``--scenarios``, default all twelve, each in
mpe2's default configuration; ``name:key=value:...`` overrides mpe2 parameters) stepped by gpurl
(``env.step``; on CUDA also ``gpurl_graph``: 64 steps captured as one CUDA graph and replayed, the way
gpurl's trainer steps envs there), JaxMARL (its ``MPE_*`` port, measured two ways, below), VMAS (its port of the name) and
PettingZoo mpe2 (one Python env per env, up to ``--mpe2-max-envs``) over ``--num-envs``, uniformly
random Discrete actions within each agent's own space in each library, episodes autoreset after
max_cycles steps. A scenario gpurl does not have yet, or a peer lacks, is named and skipped. For each
(scenario, num_envs) every peer compiles and warms up, then the peers take turns (gpurl, jaxmarl,
jaxmarl_fused, vmas, mpe2, gpurl, ...) for ``--rounds`` rounds of about ``--chunk-seconds`` each; the table
shows each peer's median env-steps/s and the ratio gpurl / peer as 'median per-round ratio / best vs best'
(load from other work hits neighbouring turns alike).

JaxMARL two ways: "inputs" (``jaxmarl``): actions and step keys drawn up front and fed to
jit(scan(vmap(step))), a checksum of observations and rewards the scan's output per step; "fused"
(``jaxmarl_fused``): as a fused training step would use it, vmap(step) in a jitted lax.scan that draws the
actions from a key carried in the scan and reduces observations and rewards inside it (XLA never writes
observations to memory; gpurl writes them into its buffers). The bar: gpurl >= 20x JaxMARL env-steps/s on
the CPU at 4096 envs, best vs best, from the stricter (lower-ratio) of the two ways, per scenario.

Training: gpurl PPO vs a JAX IPPO baseline (``bench/peers_lib/jax_ippo.py``) on JaxMARL's simple_tag 3v1v2
from the same TrainConfig, alternating iteration by iteration (the baseline in its own process), once per
seed of ``--train-seeds``; env-steps/s end to end (compile iterations excluded) and both return curves
over env steps, averaged over the seeds and compared against their seed-to-seed scatter (PNG in
``--out-dir``); ``--no-train`` skips it.

Peers are an optional extra (``pip install -e ".[peers]"``); a peer that does not import is named
and skipped. The last line is ``RESULT {json}``. Figures from a CPU are CPU figures.

    python bench/peers.py                    # everything: long (12 scenarios x 4 sizes x 5 peers)
    python bench/peers.py --quick            # sizes 1,256,4096, 3 rounds, short training
    python bench/peers.py --scenarios simple,simple_tag --num-envs 1,256 --rounds 1 --no-train --quick
    python bench/peers.py --scenarios simple_tag:num_adversaries=10:num_good=30:num_obstacles=5 --no-train
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

from _common import describe_machine, print_result  # noqa: E402
from peers_lib.envs import RUNNERS, peer_versions  # noqa: E402
from peers_lib.mpe_suite import COMMON_NOTES, SCENARIOS, parse_config  # noqa: E402
from peers_lib.suite import BAR_ENVS, BAR_RATIO, fx, run_scenario  # noqa: E402

NOTES = [
    "Threads: gpurl steps envs in Numba parallel launches (OpenMP pool, numba_threads), VMAS and gpurl's "
    "learner in torch ops (torch_threads), JAX in XLA's own pool (all cores by default), mpe2 in one thread. "
    "A parallel launch waits for every pool thread, so when other work keeps a core busy a launch can stall "
    "for an OS time slice: on a shared machine gpurl's figures drop far more than the peers' (see load).",
    "Random actions: gpurl, VMAS and mpe2 cycle through 8 pools drawn before timing; JaxMARL 'inputs' draws "
    "them (and its per-step PRNG keys) before timing, 'fused' inside the timed scan. JaxMARL's checksum of "
    "every observation and reward keeps XLA from dropping that work.",
]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None, help="gpurl/VMAS device: cpu, cuda, cuda:N (default: cuda if usable)")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS),
                    help="comma-separated scenarios, each NAME or NAME:key=value:... overriding mpe2 parameters "
                         f"(default: all of {list(SCENARIOS)})")
    ap.add_argument("--num-envs", default=None, help="comma-separated num_envs (default 1,16,256,4096; quick 1,256,4096)")
    ap.add_argument("--peers", default=None, help=f"comma-separated of {list(RUNNERS)} (gpurl always; default: "
                    "all, gpurl_graph only on CUDA)")
    ap.add_argument("--rounds", type=int, default=None, help="alternating rounds per cell (default 5, quick 3)")
    ap.add_argument("--chunk-seconds", type=float, default=None,
                    help="target seconds of one peer's turn (default 0.3, quick 0.15)")
    ap.add_argument("--mpe2-max-envs", type=int, default=64,
                    help="mpe2 steps one Python env object per env: run it only up to this many envs")
    ap.add_argument("--max-agents", type=float, default=None,
                    help="skip peers' cells with more agents (num_envs x N) than this (default: none)")
    ap.add_argument("--train", action=argparse.BooleanOptionalAction, default=True,
                    help="run the training comparison on simple_tag (gpurl PPO vs JAX IPPO)")
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


def main(argv=None) -> dict:
    args = parse_args(argv)
    import gpurl
    from gpurl.envs import resolve_device

    device = resolve_device(args.device)
    if args.numba_threads:
        import numba

        numba.set_num_threads(args.numba_threads)
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    versions, missing = peer_versions()
    if args.peers is None:
        args.peers = ",".join(p for p in RUNNERS if device.type == "cuda" or p != "gpurl_graph")
    wanted = ["gpurl"] + [p.strip() for p in args.peers.split(",") if p.strip() and p.strip() != "gpurl"]
    unknown = [p for p in wanted if p not in RUNNERS]
    if unknown:
        raise SystemExit(f"unknown peer(s) {unknown}; choose from {list(RUNNERS)}")
    if "gpurl" in missing:
        raise SystemExit(f"gpurl does not import: {missing['gpurl']}")
    peers = [p for p in wanted if p not in missing]
    try:
        configs = [parse_config(c) for c in args.scenarios.split(",") if c.strip()]
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    sizes = [int(s) for s in args.num_envs.split(",")]
    registered = gpurl.registered()
    machine = describe_machine(device)
    say = print
    say("gpurl vs peers on the MPE suite (mpe2 1.1.1's scenarios): env throughput (alternating rounds) and PPO "
        "training on simple_tag")
    say("machine: " + ", ".join(f"{k}={v}" for k, v in machine.items()))
    say("threads: " + ", ".join(f"{k}={v}" for k, v in thread_settings().items())
        + (" (set by --numba-threads/--torch-threads)" if args.numba_threads or args.torch_threads
           else " (torch/numba/XLA defaults; nothing here changes them)"))
    say("versions: " + "; ".join(f"{k}: {v}" for k, v in versions.items() if k != "jaxmarl_fused"))
    for peer, why in missing.items():
        if peer in wanted:
            say(f"COULD NOT IMPORT peer {peer}: {why}  -> skipped (pip install -e \".[peers]\")")
    jax_device = None
    if "jaxmarl" in peers or "jaxmarl_fused" in peers:
        import jax

        jax_device = str(jax.devices()[0])
        say(f"jax devices: {jax.devices()} (JaxMARL runs on JAX's default device)")
    if "mpe2" in peers:
        from peers_lib.mpe_suite import check_mpe2_defaults

        for line in check_mpe2_defaults():
            say(f"WARNING: this benchmark's mpe2 defaults differ from the installed mpe2's: {line}")
    say(f"gpurl / VMAS device: {device}; mpe2: CPU (numpy). Peers run: {peers}; gpurl has {registered}")
    say(f"settings: scenarios={[c.label for c in configs]} num_envs={sizes} rounds={args.rounds} "
        f"chunk_seconds={args.chunk_seconds} mpe2_max_envs={args.mpe2_max_envs} seed={args.seed}")
    say("measured: env-steps/s (num_envs x steps / seconds) of each peer stepping num_envs envs of the scenario with "
        "random Discrete actions, autoreset; median of the rounds. gpurl / peer: 'median per-round ratio / best vs "
        "best'; 'stricter jax': the JaxMARL way with the lower best-vs-best ratio (jaxmarl = inputs, jaxmarl_fused = "
        "fused); load: 1-min load average before / after the cell's rounds (2 vCPUs: above ~2 other work competes "
        "and gpurl's multi-threaded launches suffer most).")
    say("like-for-like notes (per scenario below):")
    for peer in ("gpurl", "jaxmarl", "vmas", "mpe2"):
        say(f"  - {peer}: {COMMON_NOTES[peer]}")
    for note in NOTES:
        say("  - " + note)

    scenarios = {}
    for cfg in configs:
        scenarios[cfg.label] = run_scenario(cfg, sizes, peers, args, device, registered, say)
    say("")
    say("compile + warm-up seconds, steps per turn and every round's rate per cell are in the RESULT line.")

    training = None
    if args.train:
        training = run_training(args, device, missing, say)

    summary = acceptance(scenarios, training, device)
    say("")
    say("acceptance:")
    for line in summary["lines"]:
        say("  " + line)
    payload = {"bench": "peers", "machine": machine, "threads": thread_settings(), "versions": versions,
               "missing_peers": missing, "device": str(device), "jax_device": jax_device,
               "gpurl_scenarios": registered,
               "settings": {"scenarios": [c.label for c in configs], "num_envs": sizes, "rounds": args.rounds,
                            "chunk_seconds": args.chunk_seconds, "mpe2_max_envs": args.mpe2_max_envs,
                            "max_agents": args.max_agents, "peers": peers, "train_seeds": args.train_seeds,
                            "train_own_process": args.train_own_process, "seed": args.seed},
               "env_throughput": scenarios, "training": training,
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
        f"{cfg.algo_params.policy_backend}; the baseline: the same per group, written in JAX (bench/peers_lib/jax_ippo.py)")
    t0 = time.perf_counter()
    say(f"  seeds {cfg.seed}..{cfg.seed + args.train_seeds - 1}: one alternating comparison each; the JAX baseline "
        + ("in its own process" if args.train_own_process else "in this process"))
    result = compare_training(cfg, say, seeds=args.train_seeds, own_process=args.train_own_process)
    result["config"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in cfg_dict.items()}
    result["config_source"] = source
    result["wall_seconds"] = round(time.perf_counter() - t0, 1)
    out_dir = Path(args.out_dir) if args.out_dir else Path("runs") / f"peers-{time.strftime('%Y%m%d-%H%M%S')}"
    p = cfg.algo_params
    png = plot_curves(result, out_dir / "training_curves.png",
                      f"simple_tag 3v1v2, {cfg.num_envs} envs x T={cfg.rollout_len}, hidden {p.hidden}, "
                      f"{p.epochs} epochs x {p.minibatches} minibatches, mean of {args.train_seeds} seed(s); "
                      f"gpurl on {device}, JAX IPPO on CPU")
    result["curve_png"] = str(png) if png else None
    g, j = result["gpurl"]["env_steps_per_s"], result["jax_ippo"]["env_steps_per_s"]
    say(f"training throughput (compile iteration excluded): gpurl {g:,.0f} env-steps/s, JAX IPPO {j:,.0f} "
        f"env-steps/s: gpurl / JAX = {result['ratio_gpurl_over_jax']:.2f} (median per-iteration ratio "
        f"{result['ratio_median_per_iteration']:.2f}); compile iteration: gpurl {result['compile_seconds']['gpurl']:.1f} s, "
        f"JAX {result['compile_seconds']['jax_ippo']:.1f} s")
    say(f"gpurl phase seconds over the timed iterations: {result['gpurl_phase_seconds']}")
    for group, res in result["curve_comparison"].items():
        g_res, j_res = res["gpurl"], res["jax_ippo"]  # None: no episode ended (a run too short)
        say(f"return/{group}, mean over the last third: gpurl {_f2(g_res['last_third_mean'])}, "
            f"JAX {_f2(j_res['last_third_mean'])} (per seed: gpurl "
            f"{g_res['last_third_mean_per_seed']}, JAX {j_res['last_third_mean_per_seed']}; "
            f"over the whole run: gpurl {_f2(g_res['mean_over_run'])}, JAX {_f2(j_res['mean_over_run'])})"
            + (f"; gpurl no worse (difference >= -2 s.e. over {res['standard_error_over']} = "
               f"{-res['two_standard_errors']:.2f}): {res['gpurl_no_worse']}" if "gpurl_no_worse" in res else ""))
    say(f"curves: {png}" if png else "curves: matplotlib not installed, no PNG")
    return result


def _f2(x) -> str:
    return "n/a" if x is None else f"{x:.2f}"


#: gpurl PPO / JAX IPPO training env-steps/s: on a GPU the target (issue 39), on the CPU the floor that every
#: change keeps (at least as fast).
TRAIN_BAR = {"cuda": 2.0, "cpu": 1.0}


def acceptance(scenarios: dict, training, device: str) -> dict:
    lines, out = [], {"env_bar": {}}
    lines.append(f"env throughput, gpurl / JaxMARL >= {BAR_RATIO:.0f}x on the CPU at {BAR_ENVS} envs, best vs best, "
                 "the stricter of the two JaxMARL ways (inputs, fused):")
    for label, res in scenarios.items():
        b = res.get("bar", {})
        out["env_bar"][label] = b.get("ratio") if b.get("measured") else None
        if "skipped" in res:
            lines.append(f"  {label}: skipped ({res['skipped']})")
        elif not b.get("measured"):
            lines.append(f"  {label}: not measured (needs {BAR_ENVS} envs and gpurl and JaxMARL in the run)")
        else:
            verdict = ("MET" if b["met"] else "NOT MET") if b["on_cpu"] else "not a CPU run: the bar is not judged"
            lines.append(f"  {label}: inputs {fx(b['ratio_inputs'])}, fused {fx(b['ratio_fused'])} -> stricter "
                         f"{b['stricter']} {fx(b['ratio'])} (median per-round ratio {fx(b['median_ratio_stricter'])})"
                         f" -> {verdict}")
    judged = [res["bar"]["met"] for res in scenarios.values() if res.get("bar", {}).get("met") is not None]
    out["env_bar_met_all"] = all(judged) if judged else None
    if training and "ratio_gpurl_over_jax" in training:
        r, r_med = training["ratio_gpurl_over_jax"], training["ratio_median_per_iteration"]
        out["train_ratio_vs_jax_ippo_total"] = r
        out["train_ratio_vs_jax_ippo_median"] = r_med
        bar = TRAIN_BAR["cuda" if str(device).startswith("cuda") else "cpu"]
        out["train_bar"], out["train_bar_met"] = bar, r_med >= bar
        lines.append(f"PPO training throughput, gpurl / JAX IPPO >= {bar:g} on {device} (median of the per-iteration "
                     f"ratios of neighbouring iterations): {r_med:.2f}x (total time: {r:.2f}x) -> "
                     f"{'MET' if r_med >= bar else 'NOT MET'}")
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
