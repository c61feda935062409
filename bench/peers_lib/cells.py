"""One cell of ``bench/peers.py``'s env-throughput table: one configuration x num_envs, every peer built and
warmed up, then the peers take turns for ``rounds`` rounds. (Part of a library: bench/peers.py prints the
RESULT line.)"""
from __future__ import annotations

import gc
import os
import time

import numpy as np

from .envs import RUNNERS
from .mpe_suite import RunConfig, Unsupported


def _first_line(exc: Exception) -> str:
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"


def build(peer: str, cfg: RunConfig, num_envs: int, device, seed: int, say):
    """``(runner, compile/warm-up seconds, seconds per step)``, or ``({"skipped"|"error": why}, None, None)``."""
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
    except Unsupported as exc:
        return {"skipped": str(exc)}, None, None
    except Exception as exc:  # noqa: BLE001 - a peer failing on a cell is reported, not fatal
        say(f"  {peer}: failed on {cfg.label} x {num_envs}: {_first_line(exc)}")
        return {"error": _first_line(exc)}, None, None


def bench_cell(cfg: RunConfig, num_envs: int, peers: list, args, device, say) -> dict:
    """Rates (env-steps/s per round, median, best) of every peer and the ratios gpurl / peer."""
    runners, cell = {}, {"num_envs": num_envs, "num_agents": cfg.num_agents, "peers": {}}
    for peer in peers:
        if peer == "mpe2" and num_envs > args.mpe2_max_envs:
            cell["peers"][peer] = {"skipped": f"num_envs > --mpe2-max-envs {args.mpe2_max_envs}"}
            continue
        if not peer.startswith("gpurl") and args.max_agents and num_envs * cfg.num_agents > args.max_agents:
            cell["peers"][peer] = {"skipped": "num_envs x agents > --max-agents"}
            continue
        runner, compile_s, per_step = build(peer, cfg, num_envs, device, args.seed, say)
        if isinstance(runner, dict):
            cell["peers"][peer] = runner
            continue
        g = runner.granularity
        steps = max(g, int(round(args.chunk_seconds / per_step / g)) * g)
        runners[peer] = (runner, steps)
        cell["peers"][peer] = {"compile_and_warmup_s": round(compile_s, 2), "steps_per_turn": steps,
                               "where": runner.where, "built": runner.config, "spaces": runner.spaces}
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
    for ours in ("gpurl", "gpurl_graph"):  # gpurl stepped per call, and (CUDA) replayed as graphs
        if ours in rates:
            theirs = {peer: rs for peer, rs in rates.items() if not peer.startswith("gpurl") or peer == "gpurl_graph"}
            theirs.pop(ours, None)
            cell[f"ratio_{ours}_over"] = {peer: float(np.median(np.array(rates[ours]) / np.array(rs)))
                                          for peer, rs in theirs.items()}
            cell[f"ratio_best_{ours}_over"] = {peer: float(np.max(rates[ours]) / np.max(rs))
                                               for peer, rs in theirs.items()}
    del runners
    gc.collect()
    return cell


def stricter_jaxmarl(cell: dict, stat: str = "ratio_best_gpurl_over") -> tuple[str | None, float | None]:
    """``(way, ratio)``: the JaxMARL way (inputs "jaxmarl" or "jaxmarl_fused") with the lower gpurl / JaxMARL."""
    ratios = {w: cell.get(stat, {}).get(w) for w in ("jaxmarl", "jaxmarl_fused")}
    ratios = {w: r for w, r in ratios.items() if r is not None}
    if not ratios:
        return None, None
    way = min(ratios, key=ratios.get)
    return way, ratios[way]
