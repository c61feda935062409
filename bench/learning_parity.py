#!/usr/bin/env python
"""Learning parity: each gpurl algorithm side by side with a reference implementation, on the same env, the
same env-step budget and the same seeds; the return over training (mean and 95% CI over seeds) and curves.

    python bench/learning_parity.py                                  # every pair, seeds 0,1,2
    python bench/learning_parity.py --pairs ippo:simple_spread --seeds 0,1,2,3,4 --steps 640000

On two vCPUs an IPPO pair takes about 2-3 minutes per seed (both sides), a value-based pair 3-4; a MAPPO pair
several times that, most of it the reference's recurrent networks (JAX on the CPU).

Needs the peers extra (``pip install -e ".[peers]"``: JaxMARL, JAX, matplotlib). The ``@paper`` pairs (not run
by default) compare gpurl's MAPPO with the MAPPO paper's own code (marlbenchmark/on-policy, rmappo at its
published MPE configurations; ``bench/peers_lib/onpolicy_mappo.py``), which is not a package: clone it and set
``ONPOLICY_PATH`` to the clone. Its env is made mpe2's task (landmark draws, integration order) and its rewards
mapped to mpe2's; the bench checks both against mpe2 step for step before it trains.

    ONPOLICY_PATH=~/on-policy python bench/learning_parity.py --pairs mappo:simple_speaker_listener@paper --steps 2e6

A pair is a gpurl preset, run as it is, and a reference run at its published
configuration (:data:`PAIRS`). The references are JaxMARL's baselines, which JaxMARL ships as scripts beside
its package rather than in it, so they are re-implemented as library functions in ``bench/peers_lib`` (each
module says what is JaxMARL's and what differs). Each side runs at its own configuration (iteration size,
learning rate, discount...): parity is judged per env step, not per iteration.

The return is each finished episode's undiscounted sum of one agent's rewards, averaged over a group's agents,
as both sides measure it on their training episodes; an iteration that ends past the budget (gpurl rounds
the budget up to whole iterations) is not counted. Per seed, the *final* return is the episode-weighted mean
over the last ``--tail`` of the budget and the *area* the mean over the whole budget; over seeds, their mean
and 95% confidence interval (Student's t). A pair holds when gpurl's final mean is within the reference's
interval or above it, for the pair's judged group.

Every run's curve is saved as ``<out>/runs/<pair>-<side>-seed<k>.json`` when it ends (written atomically), and
a later invocation with the same ``--out``, budget and configuration reuses it, so an interrupted bench
resumes where it stopped (``--fresh`` runs everything again). The curves go to ``<out>/<pair>.png``. Ends with
``RESULT {json}``.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_result  # noqa: E402
from peers_lib.parity_stats import final_return, mean_ci, on_grid, plot_pair, window_return  # noqa: E402


@dataclass(frozen=True)
class Pair:
    algo: str  # gpurl's name of the algorithm, as the pair's name starts
    scenario: str  # the env: gpurl's and mpe2's name
    preset: str  # gpurl's preset, run as it is (the one whose curves docs/benchmarks.md shows)
    reference: str  # key of REFERENCES
    judged: str  # the group whose final return decides the pair
    rename: dict = field(default_factory=dict)  # reference group name -> gpurl's
    tag: str = ""  # tells apart two pairs of one algorithm and scenario (their references differ)

    @property
    def name(self) -> str:
        return f"{self.algo}:{self.scenario}" + (f"@{self.tag}" if self.tag else "")


#: Each pair; the judged group of a cooperative scenario is any of its agents (they share the team reward),
#: simple_tag's is the adversaries (their return rises as they learn to catch; the good agent's falls with it).
PAIRS = {p.name: p for p in (
    Pair("ippo", "simple_spread", "simple-spread-ippo", "jaxmarl_ippo_ff", "agent"),
    Pair("ippo", "simple_speaker_listener", "simple-speaker-listener-ippo", "jaxmarl_ippo_ff", "listener"),
    Pair("ippo", "simple_tag", "simple-tag", "jaxmarl_ippo_ff", "adversary", {"agent": "good"}),
    Pair("mappo", "simple_spread", "simple-spread", "jaxmarl_mappo_rnn", "agent"),
    Pair("mappo", "simple_speaker_listener", "simple-speaker-listener", "jaxmarl_mappo_rnn", "listener"),
    Pair("mappo", "simple_tag", "simple-tag-mappo", "jaxmarl_mappo_rnn", "adversary", {"agent": "good"}),
    *(Pair(q, "simple_spread", f"simple-spread-{q}", f"jaxmarl_{q}_rnn", "agent") for q in ("iql", "vdn", "qmix")),
    # The MAPPO paper's own code at its published MPE configurations (needs its checkout: ONPOLICY_PATH).
    Pair("mappo", "simple_spread", "simple-spread", "onpolicy_rmappo", "agent", tag="paper"),
    Pair("mappo", "simple_speaker_listener", "simple-speaker-listener", "onpolicy_rmappo", "listener", tag="paper"),
)}
#: What a plain run compares: the pairs whose references come with the peers extra.
DEFAULT_PAIRS = tuple(name for name, p in PAIRS.items() if not p.tag)

#: The config's values (by flag name: ``TrainConfig.flat``) that decide learning: a pair's RESULT shows them and a saved gpurl run is reused only
#: where they match. Every other field is in RUN_FIELDS (a test holds the two to every field).
LEARNING_FIELDS = ("env", "env_params", "preset", "algo", "train_groups", "num_envs", "rollout_len", "iters",
                   "total_steps", "epochs", "minibatches", "lr", "anneal_lr", "gamma", "gae_lambda", "clip_coef",
                   "clip_vloss", "vf_coef", "ent_coef", "max_grad_norm", "norm_adv", "norm_obs", "hidden", "activation",
                   "recurrent", "frame_stack", "critic_agent_id", "value_norm", "replay_capacity", "q_batch",
                   "q_updates", "target_tau", "target_period", "eps_start", "eps_end", "eps_decay_frac", "actor_lr",
                   "exploration_std", "twin_critics", "target_noise", "target_noise_clip", "policy_delay",
                   "alpha_lr", "init_alpha", "target_entropy")
#: Run bookkeeping: where and how a run executes, logs and saves, and its seed (a run's own key).
RUN_FIELDS = ("seed", "device", "dist", "dist_timeout", "max_staleness", "replication_check_every", "env_modules",
              "policy_backend", "learner_backend", "cuda_graph", "tf32", "torch_threads", "log_dir", "fresh_log_dir",
              "log_every", "progress", "checkpoint_every", "resume", "replay_in_checkpoint", "eval_episodes",
              "render_final", "profile", "nsys_iters", "wandb", "wandb_entity", "wandb_group", "wandb_mode",
              "wandb_project")

#: reference name -> (label, module in peers_lib, its published configuration's name, its ``make_train``). A
#: JaxMARL ``make_train`` takes the env and the budget. The MAPPO paper's takes the scenario's name and the
#: budget, and its configuration's name is a dict of one configuration per scenario.
REFERENCES = {"jaxmarl_ippo_ff": ("JaxMARL IPPO (ippo_ff_mpe)", "jaxmarl_ippo_ff", "JAXMARL_IPPO_FF", "make_train"),
              "jaxmarl_mappo_rnn": ("JaxMARL MAPPO (mappo_rnn_mpe)", "jaxmarl_mappo_rnn", "JAXMARL_MAPPO_RNN",
                                    "make_train"),
              **{f"jaxmarl_{q}_rnn": (f"JaxMARL {q.upper()} ({q}_rnn)", "jaxmarl_ql_rnn", "JAXMARL_QL_RNN",
                                      f"make_train_{q}") for q in ("iql", "vdn", "qmix")},
              "onpolicy_rmappo": ("MAPPO paper (on-policy rmappo)", "onpolicy_mappo", "PUBLISHED", "make_train")}
#: The references whose ``make_train`` builds its own env from the scenario's name.
BUILDS_OWN_ENV = ("onpolicy_rmappo",)


def reference_config(pair: Pair) -> dict:
    import importlib

    _, module, config, _ = REFERENCES[pair.reference]
    published = getattr(importlib.import_module(f"peers_lib.{module}"), config)
    return dict(published[pair.scenario] if pair.reference in BUILDS_OWN_ENV else published)


def run_reference(pair: Pair, budget: int, seeds: list[int], save) -> None:
    """The reference's runs of ``seeds`` not saved yet (one compile for all of them)."""
    import importlib

    from peers_lib.mpe_suite import make_jaxmarl, run_config

    _, module, _, factory = REFERENCES[pair.reference]
    peer = importlib.import_module(f"peers_lib.{module}")
    make_train = getattr(peer, factory)
    if pair.reference in BUILDS_OWN_ENV:
        from peers_lib.onpolicy_check import check_reward_map

        # Their env, made mpe2's task, must give mpe2's rewards step for step before its returns are compared.
        print(f"  {pair.name}: their env against mpe2's, from the same states with the same actions: "
              f"{check_reward_map(pair.scenario)}", flush=True)
        train = make_train(pair.scenario, budget)
    else:
        train = make_train(make_jaxmarl(run_config(pair.scenario)), budget)
    for seed in seeds:
        start = time.perf_counter()
        curve = train(seed)
        steps = curve.pop("env_steps")
        groups = {}
        for key in [k for k in curve if k.startswith("return_sum/")]:
            g = key.split("/", 1)[1]
            n = curve[f"episodes/{g}"]
            groups[pair.rename.get(g, g)] = {"returns": (curve[key] / np.maximum(n, 1)).tolist(), "episodes": n.tolist()}
        save(seed, {"env_steps": steps.tolist(), "groups": groups, "seconds": time.perf_counter() - start})


def gpurl_config(pair: Pair, budget: int, seed: int = 0, **run_values):
    """The pair's gpurl TrainConfig for a run of ``budget`` env steps."""
    from gpurl.train import build_config

    return build_config(pair.preset, total_steps=budget, seed=seed, device="cpu",
                        eval_episodes=0, progress=False, checkpoint_every=0, **run_values)


def learning_config(cfg) -> dict:
    """What decides a run's learning (LEARNING_FIELDS) of a resolved config."""
    return {k: v for k, v in cfg.flat().items() if k in LEARNING_FIELDS}


def run_gpurl(pair: Pair, budget: int, seed: int) -> dict:
    """One gpurl run of the pair's configuration for ``budget`` env steps; its curve from metrics.csv."""
    from gpurl.train.run import train

    with tempfile.TemporaryDirectory(prefix="gpurl-parity-") as log_dir:
        cfg = gpurl_config(pair, budget, seed, log_dir=log_dir)
        start = time.perf_counter()
        train(cfg, say=lambda *a, **k: None)  # metrics.csv: a row per iteration (log_every 1, the default)
        seconds = time.perf_counter() - start
        with open(Path(log_dir) / "metrics.csv", newline="") as f:
            rows = list(csv.DictReader(f))
    names = [k.split("/", 1)[1] for k in rows[0] if k.startswith("return/")]
    n = [float(r["episodes"] or 0) for r in rows]
    groups = {g: {"returns": [float(r[f"return/{g}"] or "nan") for r in rows], "episodes": n} for g in names}
    return {"env_steps": [int(r["env_steps"]) for r in rows], "groups": groups, "seconds": seconds,
            "config": learning_config(cfg)}


def write_atomically(path: Path, payload: dict) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(payload))
    os.replace(tmp, path)


def summarise(pair: Pair, runs: dict[str, dict[int, dict]], budget: int, tail: float, points: int, out: Path) -> dict:
    """Per side and group: final and area (mean, 95% half-width) over seeds; the plot; the verdict."""
    sides = {}
    for side, by_seed in runs.items():
        groups = sorted({g for run in by_seed.values() for g in run["groups"]})
        sides[side] = {}
        for g in groups:
            curves = [(r["env_steps"], r["groups"][g]["returns"], r["groups"][g]["episodes"]) for r in by_seed.values()]
            finals = [final_return(*c, budget, tail) for c in curves]
            areas = [window_return(*c, 0, budget) for c in curves]
            sides[side][g] = {"final": mean_ci(finals), "area": mean_ci(areas), "final_per_seed": finals,
                              "grid": [on_grid(*c, budget, points) for c in curves]}
    label = REFERENCES[pair.reference][0]
    for g in sides["gpurl"]:
        series = {"gpurl": sides["gpurl"][g]["grid"], label: sides["reference"].get(g, {}).get("grid", [])}
        plot_pair(out / f"{pair.name.replace(':', '-')}-{g}.png", f"{pair.name} ({g})", budget,
                  {k: v for k, v in series.items() if v}, f"return per agent ({g})")
    ours, ref = sides["gpurl"][pair.judged]["final"], sides["reference"][pair.judged]["final"]
    holds = ours[0] >= ref[0] - ref[1]
    for groups in sides.values():
        for stats in groups.values():
            stats.pop("grid")
    return {"sides": sides, "judged": pair.judged, "holds": holds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", default=",".join(DEFAULT_PAIRS),
                        help=f"comma-separated, of {sorted(PAIRS)} (default: those without '@'; an '@paper' pair "
                             "needs the MAPPO paper's code: git clone https://github.com/marlbenchmark/on-policy, "
                             "then ONPOLICY_PATH=<that directory>)")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--steps", type=float, default=1_280_000,
                        help="env steps per run (default: the MPE presets' 256 envs x 50 steps x 100 iterations)")
    parser.add_argument("--tail", type=float, default=0.1, help="fraction of the budget the final return spans")
    parser.add_argument("--points", type=int, default=20, help="points of the plotted curves")
    parser.add_argument("--out", default="runs/learning_parity", help="saved runs and plots")
    parser.add_argument("--fresh", action="store_true", help="run everything again (ignore saved runs)")
    args = parser.parse_args()
    unknown = [p for p in args.pairs.split(",") if p not in PAIRS]
    if unknown:
        parser.error(f"unknown pair(s) {unknown}; pairs: {sorted(PAIRS)}")
    seeds, budget = [int(s) for s in args.seeds.split(",")], int(args.steps)
    if len(seeds) < 2:
        parser.error("--seeds: at least 2 seeds (a 95% confidence interval needs them)")
    out = Path(args.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)

    import jax
    import torch

    import gpurl
    print(f"learning parity: budget {budget} env steps per run, seeds {seeds}, final = last {args.tail:.0%}; "
          f"gpurl {gpurl.__version__} (torch {torch.__version__}), JAX {jax.__version__} on {jax.default_backend()}; "
          f"every figure is a CPU figure (this script runs gpurl on the CPU)", flush=True)
    results = {}
    for name in args.pairs.split(","):
        pair = PAIRS[name]
        ref_config = reference_config(pair)
        runs: dict[str, dict[int, dict]] = {"gpurl": {}, "reference": {}}

        def path(side: str, seed: int) -> Path:
            return out / "runs" / f"{name.replace(':', '-')}-{side}-seed{seed}.json"

        def saved(side: str, seed: int, identity: dict) -> dict | None:
            p = path(side, seed)
            if args.fresh or not p.exists():
                return None
            run = json.loads(p.read_text())
            return run if run.get("identity") == identity else None

        # What a saved run must have been made with to be reused: each side's own configuration (as JSON has it).
        identity = json.loads(json.dumps({
            "gpurl": {"rows": "per iteration", "budget": budget, "config": learning_config(gpurl_config(pair, budget))},
            "reference": {"budget": budget, "reference": pair.reference, "config": ref_config}}))

        def save_reference(seed: int, run: dict) -> None:
            run["identity"] = identity["reference"]
            write_atomically(path("reference", seed), run)
            runs["reference"][seed] = run
            print(f"  {name} reference seed {seed}: {run['seconds']:.0f} s", flush=True)

        for seed in seeds:
            for side in ("gpurl", "reference"):
                if (run := saved(side, seed, identity[side])) is not None:
                    runs[side][seed] = run
        missing = [s for s in seeds if s not in runs["reference"]]
        if missing:
            run_reference(pair, budget, missing, save_reference)
        for seed in [s for s in seeds if s not in runs["gpurl"]]:
            run = {**run_gpurl(pair, budget, seed), "identity": identity["gpurl"]}
            write_atomically(path("gpurl", seed), run)
            runs["gpurl"][seed] = run
            print(f"  {name} gpurl seed {seed}: {run['seconds']:.0f} s", flush=True)
        results[name] = summarise(pair, runs, budget, args.tail, args.points, out)
        results[name]["gpurl_config"] = runs["gpurl"][seeds[0]]["config"]
        results[name]["reference_config"] = ref_config

    width = max(len(name) for name in results) + 2
    print(f"\n{'pair':<{width}}{'group':<11}{'gpurl final':>18}{'reference final':>18}{'gpurl area':>16}"
          f"{'reference area':>17}  holds")
    for name, r in results.items():
        for g, ours in r["sides"]["gpurl"].items():
            ref = r["sides"]["reference"].get(g)
            cells = [f"{s[k][0]:.2f} +- {s[k][1]:.2f}" if s else "-" for k in ("final",) for s in (ours, ref)]
            cells += [f"{s['area'][0]:.2f} +- {s['area'][1]:.2f}" if s else "-" for s in (ours, ref)]
            verdict = ("yes" if r["holds"] else "NO") if g == r["judged"] else ""
            print(f"{name:<{width}}{g:<11}{cells[0]:>18}{cells[1]:>18}{cells[2]:>16}{cells[3]:>17}  {verdict}")
    print(f"plots: {out}/<pair>-<group>.png")
    print_result({"benchmark": "learning_parity", "budget_env_steps": budget, "seeds": seeds, "tail": args.tail,
                  "pairs": results, "all_hold": all(r["holds"] for r in results.values())})


if __name__ == "__main__":
    main()
