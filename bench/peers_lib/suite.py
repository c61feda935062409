"""One scenario of ``bench/peers.py``'s env-throughput part: what each peer builds (or why it is skipped),
its cells over num_envs printed as table rows, and its bar (gpurl / JaxMARL at 4096 envs, the stricter way).
(Part of a library: bench/peers.py prints the RESULT line.)"""
from __future__ import annotations

import sys

from .cells import bench_cell, stricter_jaxmarl
from .mpe_suite import RunConfig, Unsupported

#: The headline bar: gpurl / JaxMARL env-steps/s on the CPU at this many envs, the stricter JaxMARL way.
BAR_ENVS, BAR_RATIO = 4096, 20.0


def _r(x: float) -> str:
    return f"{x:.2f}" if x < 100 else f"{x:.0f}"


def fmt_rate(entry: dict | None) -> str:
    if entry and "env_steps_per_s" in entry:
        return f"{entry['env_steps_per_s']:>13,.0f}"
    return f"{'-' if not entry else 'skipped' if 'skipped' in entry else 'failed':>13s}"


def plan_scenario(cfg: RunConfig, peers: list, registered: list) -> dict:
    """What each peer builds for ``cfg`` (or why it is skipped), before anything runs."""
    plan = {}
    for peer in peers:
        try:
            if peer == "gpurl":
                if cfg.name not in registered:
                    raise Unsupported(f"gpurl has no {cfg.name} yet")
                kw = ", ".join(f"{k}={v!r}" for k, v in cfg.gpurl_kwargs().items())
                plan[peer] = f"gpurl.make({cfg.name!r}, {kw}, validate=False, global_state=False), autoreset"
            elif peer == "gpurl_graph":
                plan[peer] = "as gpurl, 64 env.step calls captured as one CUDA graph and replayed (CUDA only)"
            elif peer in ("jaxmarl", "jaxmarl_fused"):
                env_id, kw = cfg.jaxmarl()
                plan[peer] = f"jaxmarl.make({env_id!r}, **{kw}) (episodes of max_steps + 1 = {cfg.max_cycles} steps)"
            elif peer == "vmas":
                name, kw = cfg.vmas()
                plan[peer] = (f"vmas.make_env({name!r}, continuous_actions=False, **{kw}), env.reset() every "
                              f"{cfg.max_cycles} steps")
            elif peer == "mpe2":
                plan[peer] = f"mpe2.{cfg.scenario.mpe2_module}.parallel_env(**{cfg.mpe2_kwargs()})"
        except Unsupported as exc:
            plan[peer] = {"skipped": str(exc)}
    return plan


def run_scenario(cfg: RunConfig, sizes: list, peers: list, args, device, registered: list, say) -> dict:
    """Every cell of ``cfg`` over ``sizes``, printed as they finish; the scenario's RESULT entry."""
    plan = plan_scenario(cfg, peers, registered)
    out = {"scenario": cfg.name, "mpe2_module": cfg.scenario.mpe2_module, "params": cfg.params,
           "overrides": cfg.overrides, "num_agents": cfg.num_agents, "plan": plan, "cells": {}}
    say("")
    say(f"== {cfg.label}: mpe2 {cfg.scenario.mpe2_module}, {cfg.num_agents} agents, params "
        + " ".join(f"{k}={v}" for k, v in cfg.params.items()))
    for peer, what in plan.items():
        say(f"   {peer:13s} " + (f"SKIPPED: {what['skipped']}" if isinstance(what, dict) else what))
    if isinstance(plan.get("gpurl"), dict):
        out["skipped"] = plan["gpurl"]["skipped"]
        return out
    running = [p for p in peers if not isinstance(plan.get(p), dict)]
    for peer in ("jaxmarl", "vmas"):
        if any(p.startswith(peer) for p in running) and peer in cfg.scenario.notes:
            say(f"   differs from mpe2 ({peer}): {cfg.scenario.notes[peer]}")
    say(f"   {'envs':>5s} " + " ".join(f"{p:>13s}" for p in running) + "   "
        + " ".join(f"{'gpurl/' + p:>19s}" for p in running if p != "gpurl") + f" {'stricter jax':>13s} {'load':>11s}")
    built = {}
    for num_envs in sizes:
        cell = bench_cell(cfg, num_envs, running, args, device, say)
        out["cells"][str(num_envs)] = cell
        med, best = cell.get("ratio_gpurl_over", {}), cell.get("ratio_best_gpurl_over", {})
        way, _ = stricter_jaxmarl(cell)
        say(f"   {num_envs:5d} " + " ".join(fmt_rate(cell["peers"].get(p)) for p in running) + "   "
            + " ".join(f"{_r(med[p]) + ' / ' + _r(best[p]):>19s}" if p in med else f"{'-':>19s}"
                       for p in running if p != "gpurl")
            + f" {way or '-':>13s} {cell['load_before']:5.2f}/{cell['load_after']:5.2f}")
        graph_med, graph_best = cell.get("ratio_gpurl_graph_over", {}), cell.get("ratio_best_gpurl_graph_over", {})
        if graph_best:
            say("         gpurl_graph / " + ", ".join(f"{p} {_r(graph_med[p])} / {_r(graph_best[p])}"
                                                    for p in graph_best))
        for peer, entry in cell["peers"].items():
            if "spaces" in entry and peer not in built:
                built[peer] = entry
        sys.stdout.flush()
    for peer, entry in built.items():
        say(f"   built {peer:13s} {entry['built']}; spaces {entry['spaces']}")
    for peer in running:
        reasons = {c["peers"][peer].get("skipped") or c["peers"][peer].get("error")
                   for c in out["cells"].values() if peer in c["peers"] and "env_steps_per_s" not in c["peers"][peer]}
        if reasons and peer not in built:
            say(f"   {peer} did not run: {'; '.join(sorted(r for r in reasons if r))}")
    out["bar"] = bar(out["cells"], device)
    return out


def bar(cells: dict, device) -> dict:
    """gpurl / JaxMARL at BAR_ENVS envs, both ways, best vs best (median per-round ratios alongside)."""
    cell = cells.get(str(BAR_ENVS))
    if not cell or "ratio_best_gpurl_over" not in cell:
        return {"measured": False}
    best, med = cell["ratio_best_gpurl_over"], cell["ratio_gpurl_over"]
    way, ratio = stricter_jaxmarl(cell)
    if way is None:
        return {"measured": False}
    where = {w: cell["peers"][w].get("where", "") for w in ("jaxmarl", "jaxmarl_fused") if w in cell["peers"]}
    on_cpu = device.type == "cpu" and all("cpu" in w.lower() for w in where.values())
    return {"measured": True, "num_envs": BAR_ENVS, "ratio": ratio, "stricter": way, "jax_device": where,
            "ratio_inputs": best.get("jaxmarl"), "ratio_fused": best.get("jaxmarl_fused"),
            "median_ratio_inputs": med.get("jaxmarl"), "median_ratio_fused": med.get("jaxmarl_fused"),
            "median_ratio_stricter": stricter_jaxmarl(cell, "ratio_gpurl_over")[1],
            "on_cpu": on_cpu, "met": (ratio >= BAR_RATIO) if on_cpu else None}


def fx(x) -> str:
    return "-" if x is None else f"{x:.2f}x"
