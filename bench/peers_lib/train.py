"""Training comparison of ``bench/peers.py``: gpurl PPO vs the JAX IPPO baseline on simple_tag 3v1v2.
(Part of a library: bench/peers.py prints the RESULT line.)

Both train from one :class:`gpurl.train.config.TrainConfig` (same envs, rollout length, network
widths, epochs, minibatches and every other hyper-parameter; see ``jax_ippo``) and alternate
iteration by iteration, so load from other work on the machine hits both alike. gpurl's iteration is
``Trainer.iterate`` + ``read_losses`` + ``read_stats`` (what ``gpurl.train.run.train`` does per
iteration, without its CSV/TensorBoard writes); the baseline's is one jitted call plus its host read,
timed in its own process by default (so that neither side's idle thread pools slow the other down).
The first iteration of each compiles and is not timed.
"""
from __future__ import annotations

import dataclasses
import multiprocessing
import time
from collections import Counter
from pathlib import Path

import numpy as np

#: simple_tag 3v1v2 (the like-for-like config: JaxMARL's good-agent observation and reward match only for G = 1).
ENV_PARAMS = dict(num_adversaries=3, num_good=1, num_obstacles=2)


def train_config(num_envs: int | None, iters: int, rollout_len: int | None, seed: int, device):
    """The run's TrainConfig: the ``simple-tag`` preset when gpurl has one, else explicit values."""
    from gpurl.train import PRESETS, build_config

    explicit = dict(iters=iters, seed=seed, eval_episodes=0, device=str(device), checkpoint_every=0, progress=False)
    if num_envs:
        explicit["num_envs"] = num_envs
    if rollout_len:
        explicit["rollout_len"] = rollout_len
    if "simple-tag" in PRESETS:
        return build_config("simple-tag", **explicit), "preset simple-tag"
    explicit.setdefault("num_envs", 128)
    explicit.setdefault("rollout_len", 64)
    return build_config(env="simple_tag", env_params=dict(ENV_PARAMS), **explicit), "explicit values"


def compare_training(cfg, say=print, seeds: int = 1, own_process: bool = True) -> dict:
    """Alternate gpurl and the JAX baseline for ``cfg.iters`` iterations each, once per seed
    (``cfg.seed`` .. ``cfg.seed + seeds - 1``); throughput over every timed iteration, curves averaged
    over the seeds and compared across them. ``own_process``: the baseline runs in a child process
    (see :class:`_OwnProcess`), else in this one."""
    p = cfg.env_params
    if cfg.env != "simple_tag" or p.get("num_good", 1) != 1:
        raise ValueError("the training comparison is simple_tag with num_good = 1 (JaxMARL differs for G > 1)")
    if seeds < 1:
        raise ValueError(f"seeds must be >= 1, got {seeds}")
    runs = [_alternate(dataclasses.replace(cfg, seed=cfg.seed + k), say, own_process) for k in range(seeds)]
    steps_per_iter = cfg.num_envs * cfg.rollout_len
    timed = slice(1, None) if cfg.iters > 1 else slice(0, None)
    out = {"env_steps_per_iteration": steps_per_iter, "iterations": cfg.iters,
           "seeds": [cfg.seed + k for k in range(seeds)],
           "compile_seconds": {k: runs[0]["seconds"][k][0] for k in ("gpurl", "jax_ippo")}}
    seconds = {k: np.concatenate([r["seconds"][k][timed] for r in runs]) for k in ("gpurl", "jax_ippo")}
    for name in ("gpurl", "jax_ippo"):
        curve = []
        for it in range(cfg.iters):
            means = [_mean([r["rows"][name][it][g] for r in runs]) for g in ("adversary", "good")]
            curve.append([(it + 1) * steps_per_iter, *means])
        out[name] = {"env_steps_per_s": steps_per_iter * len(seconds[name]) / float(seconds[name].sum()),
                     "curve": curve}
    out["ratio_gpurl_over_jax"] = out["gpurl"]["env_steps_per_s"] / out["jax_ippo"]["env_steps_per_s"]
    out["ratio_median_per_iteration"] = float(np.median(seconds["jax_ippo"] / seconds["gpurl"]))
    phases = Counter()
    for r in runs:
        phases.update(r["phases"])
    out["gpurl_phase_seconds"] = {k: round(v, 3) for k, v in sorted(phases.items())}
    out["curve_comparison"] = compare_curves([r["rows"] for r in runs])
    return out


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def _make_jax_ippo(cfg):
    from .jax_ippo import JaxIPPO, make_jaxmarl_tag

    p = cfg.env_params
    return JaxIPPO(cfg, make_jaxmarl_tag(p.get("num_adversaries", 3), p.get("num_good", 1),
                                         p.get("num_obstacles", 2), p.get("max_cycles", 25)))


class _InProcess:
    """The JAX baseline in this process; ``iterate()`` -> (seconds, episode stats)."""

    def __init__(self, cfg):
        self.jx = _make_jax_ippo(cfg)

    def iterate(self) -> tuple[float, dict]:
        t0 = time.perf_counter()
        stats = self.jx.iterate()
        return time.perf_counter() - t0, stats

    def close(self) -> None:
        pass


def _jax_worker(conn, cfg) -> None:
    """The child process of :class:`_OwnProcess`: one JAX iteration per "iterate" message."""
    try:
        runner = _InProcess(cfg)
        conn.send(("ready", None))
        while conn.recv() == "iterate":
            conn.send(("ok", runner.iterate()))
    except Exception:  # noqa: BLE001 - the parent raises it with the child's traceback
        import traceback

        conn.send(("error", traceback.format_exc()))


class _OwnProcess:
    """The JAX baseline in a child process, driven iteration by iteration over a pipe. Each side's
    thread pools (XLA's; torch's and Numba's) then idle while the other side runs, as they do when each
    trains alone; in one process, either side's spinning workers slow the other down."""

    def __init__(self, cfg):
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_jax_worker, args=(child, cfg), daemon=True)
        self.proc.start()
        child.close()
        self._reply()

    def _reply(self):
        if not self.conn.poll(600):
            raise RuntimeError("the JAX baseline's process did not answer within 600 s")
        kind, payload = self.conn.recv()
        if kind == "error":
            raise RuntimeError(f"the JAX baseline's process failed:\n{payload}")
        return payload

    def iterate(self) -> tuple[float, dict]:
        self.conn.send("iterate")
        return self._reply()

    def close(self) -> None:
        try:
            self.conn.send("stop")
        except OSError:
            pass
        self.proc.join(timeout=30)
        if self.proc.is_alive():
            self.proc.kill()


def _alternate(cfg, say, own_process: bool) -> dict:
    """One seed: gpurl and the baseline alternating iteration by iteration."""
    import torch

    from gpurl.train.process import configure_process
    from gpurl.train.trainer import Trainer

    configure_process(cfg.torch_threads, torch.device(cfg.device or "cpu"))
    gp = Trainer(cfg)
    jx = (_OwnProcess if own_process else _InProcess)(cfg)
    try:
        return _alternate_iterations(cfg, gp, jx, say)
    finally:
        jx.close()


def _alternate_iterations(cfg, gp, jx, say) -> dict:
    import torch

    steps_per_iter = cfg.num_envs * cfg.rollout_len
    rows = {"gpurl": [], "jax_ippo": []}
    seconds = {"gpurl": [], "jax_ippo": []}
    phases = Counter()
    say(f"seed {cfg.seed}")
    say(f"{'iter':>5s} {'env_steps':>10s} | {'gpurl s':>8s} {'adv':>7s} {'good':>8s} | {'jax s':>8s} {'adv':>7s} "
        f"{'good':>8s}")
    for it in range(cfg.iters):
        # gpurl (same order as gpurl.train.run.train's loop body)
        t0 = time.perf_counter()
        losses = gp.iterate()
        gp.read_losses(losses)
        g_stats = gp.read_stats(min_episodes=1)
        if gp.device.type == "cuda":
            torch.cuda.synchronize(gp.device)
        g_dt = time.perf_counter() - t0
        phase_seconds = gp.timer.read()
        if it:  # the first iteration compiles
            phases.update(phase_seconds)
        j_dt, j_stats = jx.iterate()  # JAX baseline
        for name, stats, dt in (("gpurl", g_stats, g_dt), ("jax_ippo", j_stats, j_dt)):
            rows[name].append({"env_steps": (it + 1) * steps_per_iter, "seconds": dt,
                               "adversary": stats.get("return/adversary"), "good": stats.get("return/good")})
            seconds[name].append(dt)
        g, j = rows["gpurl"][-1], rows["jax_ippo"][-1]
        say(f"{it + 1:5d} {g['env_steps']:10d} | {g_dt:8.2f} {_f(g['adversary'])} {_f(g['good'], 8)} | "
            f"{j_dt:8.2f} {_f(j['adversary'])} {_f(j['good'], 8)}")
    return {"rows": rows, "seconds": {k: np.array(v) for k, v in seconds.items()}, "phases": dict(phases)}


def _f(v, width=7):
    return f"{v:{width}.2f}" if v is not None else " " * (width - 1) + "-"


def compare_curves(runs: list[dict]) -> dict:
    """Per group: mean return over the last third of the iterations and over all of them (the area
    under the curve per env step), for each trainer, averaged over the seeds' ``runs``. gpurl is "no
    worse" when its last-third mean is at least the baseline's minus two standard errors of the
    difference: over the seeds' last-third means when there are several (a run's iterations are
    correlated: one seed's scatter understates how much another seed's curve differs), else over the
    one run's per-iteration scatter."""
    out = {}
    for group in ("adversary", "good"):
        res, tails, seed_means = {}, {}, {}
        for name in ("gpurl", "jax_ippo"):
            per_seed = []
            for rows in runs:
                ys = np.array([r[group] for r in rows[name] if r[group] is not None], dtype=np.float64)
                per_seed.append((ys, ys[-max(1, len(ys) // 3):]))
            tails[name] = np.concatenate([t for _, t in per_seed])
            seed_means[name] = np.array([t.mean() for _, t in per_seed if len(t)])
            res[name] = {"last_third_mean": float(seed_means[name].mean()) if len(seed_means[name]) else None,
                         "last_third_mean_per_seed": [round(float(m), 3) for m in seed_means[name]],
                         "mean_over_run": _mean([float(ys.mean()) for ys, _ in per_seed if len(ys)])}
        basis = seed_means if len(runs) > 1 else tails
        g, j = basis["gpurl"], basis["jax_ippo"]
        if len(g) > 1 and len(j) > 1:
            se = float(np.sqrt(g.var(ddof=1) / len(g) + j.var(ddof=1) / len(j)))
            diff = float(g.mean() - j.mean())
            res["difference_gpurl_minus_jax"] = diff
            res["two_standard_errors"] = 2 * se
            res["standard_error_over"] = "seeds" if len(runs) > 1 else "iterations"
            res["gpurl_no_worse"] = diff >= -2 * se
        out[group] = res
    return out


def plot_curves(result: dict, path: Path, title: str) -> Path | None:
    """Both trainers' return curves over env steps (adversary and good), one PNG; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, (col, group) in zip(axes, ((1, "adversary"), (2, "good"))):
        for name, style in (("gpurl", "-"), ("jax_ippo", "--")):
            pts = [(c[0], c[col]) for c in result[name]["curve"] if c[col] is not None]
            if pts:
                x, y = zip(*pts)
                ax.plot(x, y, style, label=f"{name} ({result[name]['env_steps_per_s']:,.0f} env-steps/s)")
        ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v / 1e3:.0f}k"))
        ax.set_xlabel("environment steps")
        ax.set_ylabel(f"mean episode return, {group}")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)
    return path
