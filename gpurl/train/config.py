"""The trainer's configuration: the run's fields (env, sizes, iterations, logging, distribution) and the
algorithm's parameters, a typed dataclass the algorithm declares (``Algorithm.params_type``,
:mod:`gpurl.algos.params`), which checks them.

Values arrive flat, as the CLI's flags name them (``num_envs``, ``epochs``, ``q_batch``):
:func:`build_config` sends each to the run or to the algorithm's parameters. Precedence: defaults <
``--preset`` (:mod:`.presets`) < explicit values (CLI flags or keyword arguments).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, fields

from ..algos import ALGORITHMS, AlgoParams, PPOParams
from ..algos.params import default_of, param_fields, setting
from ..envs.params import check_fields
from ..envs.registry import import_env_module, parse_device
from ..multigpu.process_group import DIST_CHOICES
from .evaluation import MAX_EVAL_EPISODES
from .loggers import WANDB_MODES
from .presets import PRESETS


#: Largest num_envs: the CUDA build launches one block per env, and a grid holds at most 2**31 - 1.
MAX_NUM_ENVS = 2**31 - 1
#: Arguments of ``gpurl.make`` the trainer sets for every env it makes, so not env params: a flag of their own
#: (``--num-envs``, ``--device``, ``--seed``) or the trainer's choice (the env writes its global state when the
#: algorithm reads it; training envs reset themselves, skip validation and take their rank's env ids).
TRAINER_OWNED_ENV_ARGS = {"num_envs": "--num-envs", "device": "--device", "seed": "--seed",
                          "global_state": "the algorithm (mappo and qmix read it)", "autoreset": "the trainer",
                          "validate": "the trainer", "env_id_offset": "the trainer (each rank's share of the envs)"}
#: ``resume`` value that continues from the newest good checkpoint in log_dir, if any (gpurl.train.cli)
AUTO_RESUME = "auto"
#: Units of a ``checkpoint_every`` given as a time, in seconds.
TIME_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def checkpoint_interval(value) -> int | str:
    """``checkpoint_every`` checked and normalised: iterations (an int >= 0; digits are read as one) or a time
    ('90s', '10m', '1.5h': a positive number and a unit of TIME_UNITS)."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text.isdigit():
            return int(text)
        try:
            if text[-1:] in TIME_UNITS and 0 < float(text[:-1]) < math.inf:
                return text
        except ValueError:
            pass
    elif isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ValueError(f"checkpoint_every must be iterations (an int >= 0) or a time such as '90s', '10m' or '2h', "
                     f"got {value!r}")


def checkpoint_seconds(value: int | str) -> float | None:
    """Seconds between checkpoints when ``checkpoint_every`` (normalised) is a time; None when it counts
    iterations."""
    return float(value[:-1]) * TIME_UNITS[value[-1]] if isinstance(value, str) else None


@dataclass
class TrainConfig:
    """Everything a training run depends on (saved in every checkpoint)."""

    env: str = setting("registered env name", default="tag_continuous")
    env_params: dict = setting("env parameters passed to gpurl.make (CLI: --env-param KEY=VALUE, repeatable)",
                            default_factory=dict)
    env_modules: tuple = setting("modules imported before the env is made, so that they register custom envs: "
                              "module names (examples.custom_env) or .py paths (examples/custom_env.py) "
                              "(CLI: --env-module PATH, repeatable or comma-separated)", default=())
    preset: str | None = setting("named configuration applied before explicit values (see PRESETS)", default=None)
    num_envs: int = setting("parallel envs", default=64, ge=1, le=MAX_NUM_ENVS)
    device: str | None = setting("'cpu', 'cuda', 'cuda:N', or None for CUDA when usable else CPU", default=None)
    seed: int = setting("seeds the envs, the policy init and the action sampling", default=0, ge=0, lt=2**64)
    iters: int = setting("training iterations (rollout + update); 0 derives it from total_steps", default=0, ge=0)
    total_steps: int = setting("env steps to train for (num_envs per step) when iters is 0", default=0, ge=0)
    rollout_len: int = setting("steps per env per iteration (T)", default=64, ge=1)
    algo: str = setting("registered algorithm: 'ppo', 'a2c' (= one epoch, one minibatch, no clipping), 'mappo' "
                     "(PPO with critics on the env's global state), or the value-based 'iql', 'vdn' (team Q = "
                     "sum of the agents' Qs), 'qmix' (team Q = monotonic mix on the global state)",
                     default="ppo")
    algo_params: AlgoParams = setting("the algorithm's parameters: an instance of its params_type (CLI: one flag per "
                                   "field, --epochs, --q-batch, ...)", default_factory=PPOParams)
    cuda_graph: bool = setting("on CUDA, capture the whole iteration (rollout and update; the rollout alone for a replay "
                            "buffer or several ranks) as one CUDA graph and replay it", default=True)
    tf32: bool = setting("on CUDA, float32 matrix products in TF32 on tensor cores (JAX's default on these GPUs); off: "
                      "full float32. Set by the entry point for the process", default=True)
    train_groups: tuple = setting("groups that learn (CLI: tagger,runner); empty = all; others act randomly",
                               default=())
    eval_episodes: int = setting("episodes measured of a random policy before training and of the trained one "
                              "after it (same config, own seeds); 0 skips both", default=256, ge=0,
                               le=MAX_EVAL_EPISODES)
    log_dir: str | None = setting("where logs, checkpoints and the curve go; None = runs/<preset or env>-seed<seed>-<run id>",
                               default=None)
    fresh_log_dir: bool = setting("when log_dir holds another run's files, write this run into <log_dir>-<run id> "
                               "instead of refusing (nothing is deleted)", default=False)
    log_every: int = setting("iterations between log rows (metrics.csv, TensorBoard); without the progress bar, "
                          "stdout prints about 20 of them over the run (every row, when rows are sparser)",
                          default=1, ge=1)
    checkpoint_every: int | str = setting("iterations between checkpoints (0 = only at the end), or the time between "
                                       "them: '90s', '10m', '2h'", default=10)
    resume: str | None = setting("checkpoint to continue from (its config wins except for iters/total_steps); 'auto' "
                              "= the newest checkpoint in log_dir that loads (checkpoint.pt, else checkpoint.prev.pt), "
                              "or a fresh start when there is none", default=None)
    profile: bool = setting("write a torch.profiler trace of a few iterations to log_dir", default=False)
    nsys_iters: tuple = setting("iterations [first, last) between cudaProfilerStart/Stop, for nsys "
                             "--capture-range=cudaProfilerApi (CLI: 2,4); empty = none; CUDA only", default=())
    render_final: bool = setting("save one episode of the trained policies as log_dir/final_episode.gif "
                              "(gpurl.render; needs matplotlib)", default=False)
    progress: bool | None = setting("progress bar; None = only on a TTY outside CI", default=None)
    wandb: bool = setting("log to Weights & Biases too (beside metrics.csv and TensorBoard), into a W&B run whose id "
                       "is the run id and whose files are in log_dir/wandb; needs the wandb extra: "
                       'pip install "gpurl[wandb]"', default=False)
    wandb_mode: str = setting("W&B: 'offline' (files only; upload later with wandb sync), 'online', or 'auto' "
                           "($WANDB_MODE when set, else online when $WANDB_API_KEY is set, else offline)",
                           default="auto")
    wandb_project: str = setting("W&B project", default="gpurl")
    wandb_entity: str | None = setting("W&B entity (user or team); None = the account's default", default=None)
    wandb_group: str | None = setting("W&B group of the run; None = none, or, in a seed sweep, the sweep's (every "
                                   "seed's run in one group)", default=None)
    torch_threads: int = setting("CPU threads of torch and Numba, fixed (0 = the thread policy, GPURL_THREADS: by "
                              "default as many as the CPUs other processes leave free)", default=0, ge=0)
    dist: str = setting("distribution policy: 'single', 'data_parallel' (env+actor+learner per rank, gradients "
                     "all-reduced), 'central_learner' (env+actor per rank, learner on rank 0), or 'auto' "
                     "(data_parallel under torchrun with several ranks, else single)", default="auto")
    dist_timeout: float = setting("seconds after which a silent or lost rank stops every other rank with an error",
                               default=300.0, gt=0)
    replication_check_every: int = setting("data_parallel: iterations between checks that every rank holds the "
                                        "same parameters (0 = never)", default=10, ge=0)
    max_staleness: int = setting("central_learner: how many updates behind the learner an actor's weights may "
                              "be (0 = synchronous, trajectories always from the current policy)", default=0, ge=0)

    def validated(self) -> "TrainConfig":
        """A checked copy with derived values filled in; ValueError names the first bad field. The run's fields
        are checked here, the algorithm's parameters by their own dataclass (``AlgoParams.validated``)."""
        modules = (self.env_modules,) if isinstance(self.env_modules, str) else tuple(self.env_modules)
        c = dataclasses.replace(self, env_params=dict(self.env_params), train_groups=tuple(self.train_groups),
                                nsys_iters=tuple(self.nsys_iters), env_modules=modules)
        clashes = [k for k in c.env_params if k in TRAINER_OWNED_ENV_ARGS]
        if clashes:
            raise ValueError("; ".join(f"env_params {k!r} is set by {TRAINER_OWNED_ENV_ARGS[k]} for every env the trainer "
                                       "makes" for k in clashes) + ": leave it out of --env-param")
        params_type = algorithm_params_type(c.algo)
        if type(c.algo_params) is not params_type:
            raise ValueError(f"algo {c.algo!r} takes {params_type.__name__}, got algo_params of type "
                             f"{type(c.algo_params).__name__}")
        check_fields(c, "config")  # every number against its declared range, every flag a bool
        c.algo_params = c.algo_params.validated(c.num_envs, c.rollout_len)
        if c.iters == 0:
            if c.total_steps == 0:
                raise ValueError("set iters or total_steps (both are 0)")
            c.iters = max(1, math.ceil(c.total_steps / (c.num_envs * c.rollout_len)))
        if c.dist not in DIST_CHOICES:
            raise ValueError(f"dist must be one of {list(DIST_CHOICES)}, got {c.dist!r}")
        if c.nsys_iters and (len(c.nsys_iters) != 2 or not 0 <= c.nsys_iters[0] < c.nsys_iters[1]):
            raise ValueError(f"nsys_iters must be two iterations first < last (e.g. 2,4), got {c.nsys_iters!r}")
        c.checkpoint_every = checkpoint_interval(c.checkpoint_every)
        if c.resume == AUTO_RESUME and not c.log_dir:
            raise ValueError("--resume auto looks for the checkpoints in --log-dir: pass --log-dir")
        if c.device is not None:
            parse_device(c.device)  # the name alone: whether this machine has it is the run's to find out
        if c.wandb_mode not in WANDB_MODES:
            raise ValueError(f"wandb_mode must be one of {list(WANDB_MODES)}, got {c.wandb_mode!r}")
        if not isinstance(c.wandb_project, str) or not c.wandb_project.strip():
            raise ValueError(f"wandb_project must be a project name, got {c.wandb_project!r}")
        for spec in c.env_modules:
            if not isinstance(spec, str) or not spec:
                raise ValueError(f"env_modules must be module names or .py paths, got {spec!r}")
        return c

    def import_env_modules(self) -> None:
        """Import every env module, so that the envs they register can be made. Entry points call it
        (once per process: a fresh run, a resumed one, each torchrun rank); validation never imports."""
        for spec in self.env_modules:
            try:
                import_env_module(spec)
            except ImportError as err:
                detail = str(err) if spec in str(err) else f"importing {spec!r} failed: {type(err).__name__}: {err}"
                raise ValueError(f"env_modules: {detail}") from err

    def to_dict(self) -> dict:
        """What a checkpoint and run.json hold: the run's fields, and the algorithm's parameters as a dict under
        ``algo_params``."""
        return dataclasses.asdict(self)

    def flat(self) -> dict:
        """The run's fields and the algorithm's parameters side by side, as the CLI's flags name them."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "algo_params"}
        return {**values, **dataclasses.asdict(self.algo_params)}

    @classmethod
    def from_dict(cls, data: dict) -> "TrainConfig":
        """The config of :meth:`to_dict`'s form. A flat dict (every field side by side: checkpoints written before
        the algorithms declared their parameters) is read as :func:`from_values` reads one, with the values of
        fields this algorithm does not read dropped (those configs held every algorithm's)."""
        if "algo_params" not in data:
            return from_values(data, legacy=True)
        run = {k: v for k, v in data.items() if k != "algo_params"}
        unknown = sorted(set(run) - RUN_FIELDS)
        if unknown:
            raise ValueError(f"unknown config key(s) {unknown}; valid keys: {sorted(RUN_FIELDS | {'algo_params'})}")
        params = data["algo_params"]
        if isinstance(params, dict):
            params = algorithm_params_type(run.get("algo", "ppo")).from_dict(params)
        return cls(**run, algo_params=params)


#: The run's own fields (everything but the algorithm's parameters).
RUN_FIELDS = frozenset(f.name for f in fields(TrainConfig)) - {"algo_params"}


def algorithm_params_type(algo: str) -> type[AlgoParams]:
    if algo not in ALGORITHMS:
        raise ValueError(f"algo must be one of {sorted(ALGORITHMS)}, got {algo!r}")
    return ALGORITHMS[algo].params_type


def readers(name: str) -> list[str]:
    """The registered algorithms whose parameters have a field ``name``."""
    return sorted(n for n, a in ALGORITHMS.items() if name in param_fields(a.params_type))


def every_readers_default(name: str, value) -> bool:
    """``value`` is the default of parameter ``name`` in every algorithm that reads it."""
    return all(value == default_of(param_fields(ALGORITHMS[a].params_type)[name]) for a in readers(name))


def from_values(values: dict, legacy: bool = False) -> TrainConfig:
    """The config of flat ``values`` (run fields and the algorithm's parameters side by side, as the CLI's flags
    name them; ``algo_params`` may hold a dict or an instance to start from), not yet validated. A value for a
    parameter the algorithm does not read is refused (``--algo ppo --q-batch 3``) rather than ignored; with
    ``legacy`` (an old checkpoint's config, which held every algorithm's values) it is dropped."""
    values = dict(values)
    params_type = algorithm_params_type(values.get("algo", "ppo"))
    start = values.pop("algo_params", None)
    if isinstance(start, AlgoParams):
        start = dataclasses.asdict(start)
    params = dict(start or {})
    own = param_fields(params_type)
    run = {}
    unread, unknown = [], []
    for key, value in values.items():
        if key in RUN_FIELDS:
            run[key] = value
        elif key in own:
            params[key] = value
        elif readers(key):
            if not legacy and not every_readers_default(key, value):
                unread.append(key)  # a value the algorithm would ignore; a default one says nothing
        else:
            unknown.append(key)
    if unknown:
        valid = sorted(RUN_FIELDS | {k for a in ALGORITHMS.values() for k in param_fields(a.params_type)})
        raise ValueError(f"unknown config key(s) {sorted(unknown)}; valid keys: {valid}")
    if unread:
        algo = values.get("algo", "ppo")
        raise ValueError("; ".join(f"{k}={values[k]!r} is not read by algo {algo!r} (read by: {', '.join(readers(k))})"
                                   for k in unread) + ": leave it out, or pick an algorithm that reads it")
    return TrainConfig(**run, algo_params=params_type.from_dict(params))


def build_config(preset: str | None = None, **explicit) -> TrainConfig:
    """Field defaults, then the preset's values, then ``explicit`` ones (flat: run fields and the algorithm's
    parameters by name, :func:`from_values`); validated."""
    values: dict = {}
    if preset is not None:
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; presets: {sorted(PRESETS)}")
        values.update(PRESETS[preset])
        if "total_steps" in explicit and "iters" not in explicit:
            values["iters"] = 0  # an explicit step budget replaces the preset's iteration count
        if "algo" in explicit and explicit["algo"] != values.get("algo", "ppo"):
            # another algorithm than the preset's: the preset's values for parameters it does not read go
            params = param_fields(algorithm_params_type(explicit["algo"]))
            values = {k: v for k, v in values.items() if k in RUN_FIELDS or k in params}
    values.update(explicit)
    values["preset"] = preset
    return from_values(values).validated()
