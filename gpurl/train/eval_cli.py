"""``gpurl eval RUN_DIR_OR_CHECKPOINT``: a run's trained policies over new episodes, against the random policy.

    gpurl eval runs/tag-10v100-seed0-...                     # 100 episodes, sampled actions, vs random
    gpurl eval runs/A --deterministic --episodes 400 --render
    gpurl eval runs/A --opponent runs/B --opponent-groups runner   # A's taggers against B's runners

It loads the run's newest checkpoint that loads (or the checkpoint file given) with its config, makes the
run's env with a new seed, and lets every env play whole episodes (:func:`~.evaluation.play_episodes`),
first with the trained policies, then with every group random. It prints each group's return and the env's
metrics per episode as mean +- the 95% confidence interval of the mean, saves a GIF of one episode with
``--render``, and ends with one line ``RESULT {json}``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
from pathlib import Path

import torch

from ..envs import make, resolve_device
from ..envs.checks import derived_seed
from .checkpoint import CheckpointError
from .config import TrainConfig
from .evaluation import MAX_EVAL_EPISODES, Lineup, RandomPolicy, check_eval_episodes, play_episodes, summarize
from .help_format import DefaultsOnceFormatter
from .policy import TrainedPolicy, read_checkpoint

#: Added to the run's seed when none is given: training used seed .. seed + 3 (envs, baseline, final, GIF).
NEW_SEED_OFFSET = 10_000
MAX_DEFAULT_ENVS = 256
#: What --render can write: the formats gpurl.render.save_animation knows (MP4 through ffmpeg).
RENDER_SUFFIXES = (".gif", ".mp4")
DEFAULT_RENDER_FILE = "eval_episode.gif"


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                formatter_class=DefaultsOnceFormatter)
    p.add_argument("path", metavar="RUN_DIR_OR_CHECKPOINT", help="a gpurl run directory or checkpoint file")
    p.add_argument("--episodes", type=int, default=100,
                   help=f"episodes per policy (rounded up to whole rounds of envs), at most {MAX_EVAL_EPISODES} "
                        f"(MAX_EVAL_EPISODES, gpurl/train/evaluation.py)")
    p.add_argument("--num-envs", type=int, default=None,
                   help=f"envs played side by side (default: --episodes, at most {MAX_DEFAULT_ENVS})")
    p.add_argument("--seed", type=int, default=None, help=f"env and policy seed (default: the run's + {NEW_SEED_OFFSET})")
    p.add_argument("--deterministic", action="store_true",
                   help="each agent's most likely action (argmax) instead of a sample; value-based policies are "
                        "greedy either way")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: CUDA if usable)")
    p.add_argument("--opponent", default=None, metavar="RUN_DIR_OR_CHECKPOINT",
                   help="another run whose policies play --opponent-groups")
    p.add_argument("--opponent-groups", default=None, metavar="GROUP[,GROUP]",
                   help="groups the opponent plays (default: the groups it trained and the run did not)")
    p.add_argument("--render", nargs="?", const="", default=None, metavar="GIF",
                   help=f"draw one episode into GIF (.gif, or .mp4 with ffmpeg; default path: {DEFAULT_RENDER_FILE} "
                        f"beside the checkpoint), in a directory that exists and is writable")
    p.add_argument("--no-random", dest="random", action="store_false", help="skip the random-policy episodes")
    return p


def opponent_groups(main: TrainedPolicy, opponent: TrainedPolicy, asked: str | None) -> list[str]:
    """The groups the opponent plays: those asked for (each one it trained), else those it trained and
    the main run did not; ValueError when that leaves none."""
    if asked is not None:
        groups = [g.strip() for g in asked.split(",") if g.strip()]
        unknown = [g for g in groups if g not in opponent.trained]
        if not groups or unknown:
            raise ValueError(f"--opponent-groups {asked!r}: the opponent {opponent.source} trained {opponent.trained}; "
                             f"name one or more of them")
        return groups
    groups = [g for g in opponent.trained if g not in main.trained]
    if not groups:
        raise ValueError(f"both runs trained {sorted(set(main.trained) & set(opponent.trained))}: name the groups "
                         f"the opponent plays with --opponent-groups (one or more of {opponent.trained})")
    return groups


def check_opponent_fits(env, checkpoint: dict, source) -> None:
    """CheckpointError unless the opponent's run trained on ``env``'s kind with the same agents, observation
    widths and action spaces in every group it trained (its networks are built for them), named first."""
    saved = TrainConfig.from_dict(checkpoint["config"])
    if saved.env != env.env_name():
        raise CheckpointError(f"opponent {source} was trained on env {saved.env!r}; this run's env is "
                              f"{env.env_name()!r}")
    theirs = make(saved.env, num_envs=1, device=env.device, **saved.env_params)
    for name in saved.train_groups or list(theirs.groups):
        mine, other = env.groups.get(name), theirs.groups[name]
        if mine is None:
            raise CheckpointError(f"opponent {source} trained group {name!r}, which this run's env lacks "
                                  f"({list(env.groups)})")
        if (mine.obs_dim, mine.action_space, mine.agents) != (other.obs_dim, other.action_space, other.agents):
            raise CheckpointError(
                f"opponent {source}: its group {name!r} has obs_dim {other.obs_dim}, actions {other.action_space}, "
                f"agents {other.agents.start}..{other.agents.stop - 1}; here it has obs_dim {mine.obs_dim}, actions "
                f"{mine.action_space}, agents {mine.agents.start}..{mine.agents.stop - 1} (env params there "
                f"{saved.env_params}, here {env.params!r})")


def fmt(summary: dict) -> str:
    half = summary["ci95"]
    return f"{summary['mean']:10.4g} +- {half:<9.3g}" if half is not None else f"{summary['mean']:10.4g}"


def report(trained: dict, random: dict | None, say) -> None:
    say(f"  {'per episode':28s} {'trained (mean +- 95% CI)':>26s}" + (f"  {'random':>26s}" if random else ""))
    for name, summary in trained.items():
        line = f"  {name:28s} {fmt(summary):>26s}"
        if random:
            line += f"  {fmt(random[name]):>26s}"
        say(line)


def render_path(asked: str, run_path: str | Path) -> Path:
    """Where ``--render`` draws: the path asked for, else the default file beside the checkpoint (in the run
    dir, or beside the checkpoint file given)."""
    if asked:
        return Path(asked)
    run_path = Path(run_path)
    return (run_path if run_path.is_dir() else run_path.parent) / DEFAULT_RENDER_FILE


def check_render_path(asked: str, run_path: str | Path) -> None:
    """ValueError naming ``--render`` and its value unless the episode can be written there: a .gif (or an
    .mp4 with ffmpeg) in a directory that exists and is writable. Checked before anything is played, since
    the drawing comes last; the directory is never created (a mistyped one would be, silently)."""
    path = render_path(asked, run_path)
    if not asked and not Path(run_path).exists():
        return  # the checkpoint read names the missing path; no render error on top of it
    flag = f"--render {asked}" if asked else f"--render (default path {path})"
    if path.suffix not in RENDER_SUFFIXES:
        raise ValueError(f"{flag}: the file must end in {' or '.join(RENDER_SUFFIXES)}")
    if path.suffix == ".mp4" and shutil.which("ffmpeg") is None:
        raise ValueError(f"{flag}: writing .mp4 needs ffmpeg on the PATH; give a .gif path instead")
    if path.is_dir():
        raise ValueError(f"{flag}: that is a directory; give a file path ending in {' or '.join(RENDER_SUFFIXES)}")
    parent = path.parent
    if not parent.exists():
        raise ValueError(f"{flag}: directory {parent} does not exist and is not created for you; create it "
                         f"first (mkdir -p {parent}) or give a path in an existing directory")
    if not parent.is_dir():
        raise ValueError(f"{flag}: {parent} is not a directory; give a path in an existing directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{flag}: directory {parent} is not writable; give a path in a directory you can "
                         f"write to")


def check_drawable(env) -> None:
    """ValueError naming ``--render`` when nothing can draw ``env`` (before any episode is played)."""
    from ..render import drawer_for

    try:
        drawer_for(env)
    except TypeError as err:
        raise ValueError(f"--render: {err}") from None


def check_args(args) -> None:
    """ValueError, one line naming the flag and its value, for every misuse found without loading anything:
    run before a checkpoint is read, an env built or an episode played, so a refusal costs nothing."""
    check_eval_episodes(args.episodes, "--episodes")
    if args.num_envs is not None and args.num_envs < 1:
        raise ValueError(f"--num-envs must be >= 1, got {args.num_envs}")
    if args.opponent_groups is not None and args.opponent is None:
        raise ValueError("--opponent-groups needs --opponent")
    if args.render is not None:
        check_render_path(args.render, args.path)


def evaluate(args, say=print) -> dict:
    check_args(args)
    source, checkpoint = read_checkpoint(args.path, say)
    config = TrainConfig.from_dict(checkpoint["config"])
    config.import_env_modules()
    device = resolve_device(args.device)
    seed = derived_seed(config.seed, NEW_SEED_OFFSET) if args.seed is None else args.seed
    num_envs = args.num_envs or min(args.episodes, MAX_DEFAULT_ENVS)
    per_env = math.ceil(args.episodes / num_envs)

    def env_of(n: int, autoreset: bool = True):
        return make(config.env, num_envs=n, device=device, seed=seed, autoreset=autoreset, validate=False,
                    global_state=False, **config.env_params)

    env = env_of(num_envs)
    if args.render is not None:
        check_drawable(env)
    main = TrainedPolicy(checkpoint, env, source, args.deterministic, seed)
    players = [(main, list(main.trained))]
    opponent_info = None
    if args.opponent is not None:
        opp_source, opp_checkpoint = read_checkpoint(args.opponent, say)
        check_opponent_fits(env, opp_checkpoint, opp_source)
        opponent = TrainedPolicy(opp_checkpoint, env, opp_source, args.deterministic, derived_seed(seed, 1))
        groups = opponent_groups(main, opponent, args.opponent_groups)
        players = [(main, [g for g in main.trained if g not in groups]), (opponent, groups)]
        opponent_info = {"path": str(opp_source), "groups": groups, "iteration": opponent.iteration,
                         "algo": opponent.algorithm}
    lineup = Lineup(env, players, derived_seed(seed, 2))
    mode = "deterministic (argmax)" if args.deterministic else "sampled"
    say(f"gpurl eval: {source} (iteration {main.iteration}, {config.algo} on {config.env}, trained {main.trained})")
    if opponent_info:
        say(f"  opponent: {opponent_info['path']} (iteration {opponent_info['iteration']}) plays "
            f"{opponent_info['groups']}")
    say(f"  {num_envs} envs x {per_env} episodes = {num_envs * per_env} per policy, seed {seed}, actions {mode}, "
        f"device {device}; groups acting at random: {[g for g in env.groups if not any(g in p[1] for p in players)]}")
    trained = {k: summarize(v) for k, v in play_episodes(env, lineup, per_env).items()}
    random = None
    if args.random:
        random = {k: summarize(v) for k, v in play_episodes(env_of(num_envs), RandomPolicy(env, derived_seed(seed, 3)),
                                                               per_env).items()}
    report(trained, random, say)
    result = {"command": "eval", "path": str(source), "env": config.env, "env_params": config.env_params,
              "algo": config.algo, "iteration": main.iteration, "trained_groups": main.trained,
              "deterministic": bool(args.deterministic), "seed": seed, "num_envs": num_envs,
              "episodes": num_envs * per_env, "device": str(device), "opponent": opponent_info,
              "trained": trained, "random": random}
    if args.render is not None:
        path = render_path(args.render, args.path)
        result["episode_gif"] = str(render_episode(path, config, lineup, env_of, say))
    return result


def render_episode(path: Path, config: TrainConfig, lineup: Lineup, env_of, say) -> Path:
    """One episode of env 0 under ``lineup``, drawn into ``path`` (checked by :func:`check_render_path`)."""
    from ..render import record_episode, save_animation

    env = env_of(1, autoreset=False)
    starts = [None]
    obs = [env.reset()]

    def step():
        out = env.step(lineup(obs[0], starts[0]))
        obs[0], starts[0] = out[0], out[2] | out[3]
        return out

    frames = record_episode(env, step)
    save_animation(env, frames, path, title=f"{config.preset or config.env}: evaluated")
    say(f"  one episode ({len(frames) - 1} steps) drawn into {path}")
    return path


def main(argv: list[str] | None = None, prog: str | None = "gpurl eval") -> dict:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    try:
        check_args(args)
    except ValueError as err:
        parser.error(str(err))  # exits 2, before anything is loaded, built, played or written
    try:
        with torch.no_grad():
            result = evaluate(args)
    except (CheckpointError, ValueError) as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    print("RESULT " + json.dumps(result, sort_keys=True))
    sys.stdout.flush()
    return result
