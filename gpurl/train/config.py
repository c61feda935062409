"""The trainer's configuration: one typed dataclass, presets, and one validation place.

Precedence: field defaults < ``--preset`` < explicit values (CLI flags or keyword arguments).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, fields

from ..algos import ALGORITHM_SPECIFIC_FIELDS, ALGORITHMS
from ..algos.acting import ACTING_BACKENDS
from ..algos.ppo import LEARNING_BACKENDS, RECURRENT_CHOICES
from ..envs.params import RANGE, check_fields, span
from ..envs.registry import import_env_module, parse_device
from ..envs.tag_continuous.params import TAG_5V1000, TAG_10V100
from ..envs.tag_gridworld.params import TAG_GRID_4
from ..multigpu.process_group import DIST_CHOICES
from .evaluation import MAX_EVAL_EPISODES
from .loggers import WANDB_MODES


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


def _doc(text: str, *, ge=None, gt=None, le=None, lt=None, **kw):
    """A config field: its help text, its default and, for a number, its allowed range (``ge=1``: >= 1;
    read by :meth:`TrainConfig.validated` through :func:`~gpurl.envs.params.check_fields`)."""
    metadata = {"help": text}
    if (ge, gt, le, lt) != (None, None, None, None):
        metadata[RANGE] = span(ge=ge, gt=gt, le=le, lt=lt)
    return field(metadata=metadata, **kw)


@dataclass
class TrainConfig:
    """Everything a training run depends on (saved in every checkpoint)."""

    env: str = _doc("registered env name", default="tag_continuous")
    env_params: dict = _doc("env parameters passed to gpurl.make (CLI: --env-param KEY=VALUE, repeatable)",
                            default_factory=dict)
    env_modules: tuple = _doc("modules imported before the env is made, so that they register custom envs: "
                              "module names (examples.custom_env) or .py paths (examples/custom_env.py) "
                              "(CLI: --env-module PATH, repeatable or comma-separated)", default=())
    preset: str | None = _doc("named configuration applied before explicit values (see PRESETS)", default=None)
    num_envs: int = _doc("parallel envs", default=64, ge=1, le=MAX_NUM_ENVS)
    device: str | None = _doc("'cpu', 'cuda', 'cuda:N', or None for CUDA when usable else CPU", default=None)
    seed: int = _doc("seeds the envs, the policy init and the action sampling", default=0, ge=0, lt=2**64)
    iters: int = _doc("training iterations (rollout + update); 0 derives it from total_steps", default=0, ge=0)
    total_steps: int = _doc("env steps to train for (num_envs per step) when iters is 0", default=0, ge=0)
    rollout_len: int = _doc("steps per env per iteration (T)", default=64, ge=1)
    algo: str = _doc("registered algorithm: 'ppo', 'a2c' (= one epoch, one minibatch, no clipping), 'mappo' "
                     "(PPO with critics on the env's global state), or the value-based 'iql', 'vdn' (team Q = "
                     "sum of the agents' Qs), 'qmix' (team Q = monotonic mix on the global state)",
                     default="ppo")
    epochs: int = _doc("passes over each rollout", default=4, ge=1)
    minibatches: int = _doc("minibatches per epoch (per group)", default=4, ge=1)
    lr: float = _doc("Adam learning rate", default=3e-4, gt=0)
    anneal_lr: bool = _doc("anneal the learning rate linearly to 0 over the run", default=True)
    gamma: float = _doc("discount", default=0.99, ge=0, le=1)
    gae_lambda: float = _doc("GAE lambda", default=0.95, ge=0, le=1)
    clip_coef: float = _doc("PPO ratio clip (0 disables clipping)", default=0.2, ge=0)
    clip_vloss: bool | None = _doc("clip the value loss around the old values (by clip_coef, in the critic's output "
                                   "units); None: exactly where those units are normalised (value_norm), since on raw "
                                   "returns of tens a step of 0.2 per update holds the critic back", default=None)
    vf_coef: float = _doc("value loss weight", default=0.5, ge=0)
    ent_coef: float = _doc("entropy bonus weight", default=0.01, ge=0)
    max_grad_norm: float = _doc("gradient-norm clip per group (0 disables)", default=0.5, ge=0)
    norm_adv: bool = _doc("normalise advantages per minibatch", default=True)
    hidden: tuple = _doc("MLP widths of actor and critic (CLI: 64,64)", default=(64, 64))
    activation: str = _doc("'tanh' or 'relu'", default="tanh")
    norm_obs: bool = _doc("normalise policy inputs by running mean/std (updated between iterations)",
                          default=True)
    recurrent: str = _doc("'gru': a GRU after the actor's first layer, its state carried from step to step and "
                          "replayed over whole rollout sequences by the learner (PPO, A2C, MAPPO); 'none': MLP",
                          default="none")
    critic_agent_id: bool = _doc("mappo: the critic reads the global state with the agent's one-hot id (the MAPPO "
                                 "paper's agent-specific global state); off: one value per env and group",
                                 default=True)
    value_norm: bool = _doc("mappo: the critic predicts values normalised by running statistics of the returns",
                            default=False)
    replay_capacity: int = _doc("iql, vdn, qmix: rollout steps per env the replay buffer keeps (capacity x num_envs "
                                "transitions, on every learner rank)", default=1000, ge=1)
    replay_in_checkpoint: bool = _doc("iql, vdn, qmix: checkpoints hold the replay buffer's transitions (off: its "
                                      "position only; a resumed run refills it before learning)", default=True)
    q_batch: int = _doc("iql, vdn, qmix: transitions per update (sampled uniformly from the replay buffer)",
                        default=256, ge=1)
    q_updates: int = _doc("iql, vdn, qmix: updates per iteration", default=4, ge=1)
    target_tau: float = _doc("iql, vdn, qmix: how far each target update moves the target networks towards the "
                             "online ones (1 = a copy)", default=0.01, gt=0, le=1)
    target_period: int = _doc("iql, vdn, qmix: updates between target updates", default=1, ge=1)
    eps_start: float = _doc("iql, vdn, qmix: exploration epsilon at the start", default=1.0, ge=0, le=1)
    eps_end: float = _doc("iql, vdn, qmix: exploration epsilon after the decay", default=0.05, ge=0, le=1)
    eps_decay_frac: float = _doc("iql, vdn, qmix: fraction of the run's steps over which epsilon moves linearly "
                                 "from eps_start to eps_end", default=0.5, ge=0, le=1)
    frame_stack: int = _doc("observations per policy input (the current one and frame_stack - 1 before it)",
                            default=1, ge=1)
    policy_backend: str = _doc("acting: 'triton' (one fused kernel per group), 'compiled' (torch.compile of the "
                               "torch definition), 'eager' (the torch definition as written), 'auto' (triton on "
                               "CUDA for categorical heads, else compiled)", default="auto")
    learner_backend: str = _doc("update: 'compiled' (torch.compile of the loss; its backward by AOTAutograd), "
                                "'eager' (the loss as written, autograd), 'auto' (compiled)", default="auto")
    cuda_graph: bool = _doc("on CUDA, capture the whole iteration (rollout and update; the rollout alone for a replay "
                            "buffer or several ranks) as one CUDA graph and replay it", default=True)
    tf32: bool = _doc("on CUDA, float32 matrix products in TF32 on tensor cores (JAX's default on these GPUs); off: "
                      "full float32. Set by the entry point for the process", default=True)
    train_groups: tuple = _doc("groups that learn (CLI: tagger,runner); empty = all; others act randomly",
                               default=())
    eval_episodes: int = _doc("episodes measured of a random policy before training and of the trained one "
                              "after it (same config, own seeds); 0 skips both", default=256, ge=0,
                               le=MAX_EVAL_EPISODES)
    log_dir: str | None = _doc("where logs, checkpoints and the curve go; None = runs/<preset or env>-seed<seed>-<run id>",
                               default=None)
    fresh_log_dir: bool = _doc("when log_dir holds another run's files, write this run into <log_dir>-<run id> "
                               "instead of refusing (nothing is deleted)", default=False)
    log_every: int = _doc("iterations between log rows (metrics.csv, TensorBoard); without the progress bar, "
                          "stdout prints about 20 of them over the run (every row, when rows are sparser)",
                          default=1, ge=1)
    checkpoint_every: int | str = _doc("iterations between checkpoints (0 = only at the end), or the time between "
                                       "them: '90s', '10m', '2h'", default=10)
    resume: str | None = _doc("checkpoint to continue from (its config wins except for iters/total_steps); 'auto' "
                              "= the newest checkpoint in log_dir that loads (checkpoint.pt, else checkpoint.prev.pt), "
                              "or a fresh start when there is none", default=None)
    profile: bool = _doc("write a torch.profiler trace of a few iterations to log_dir", default=False)
    nsys_iters: tuple = _doc("iterations [first, last) between cudaProfilerStart/Stop, for nsys "
                             "--capture-range=cudaProfilerApi (CLI: 2,4); empty = none; CUDA only", default=())
    render_final: bool = _doc("save one episode of the trained policies as log_dir/final_episode.gif "
                              "(gpurl.render; needs matplotlib)", default=False)
    progress: bool | None = _doc("progress bar; None = only on a TTY outside CI", default=None)
    wandb: bool = _doc("log to Weights & Biases too (beside metrics.csv and TensorBoard), into a W&B run whose id "
                       "is the run id and whose files are in log_dir/wandb; needs the wandb extra: "
                       'pip install "gpurl[wandb]"', default=False)
    wandb_mode: str = _doc("W&B: 'offline' (files only; upload later with wandb sync), 'online', or 'auto' "
                           "($WANDB_MODE when set, else online when $WANDB_API_KEY is set, else offline)",
                           default="auto")
    wandb_project: str = _doc("W&B project", default="gpurl")
    wandb_entity: str | None = _doc("W&B entity (user or team); None = the account's default", default=None)
    wandb_group: str | None = _doc("W&B group of the run; None = none, or, in a seed sweep, the sweep's (every "
                                   "seed's run in one group)", default=None)
    torch_threads: int = _doc("CPU threads of torch and Numba, fixed (0 = the thread policy, GPURL_THREADS: by "
                              "default as many as the CPUs other processes leave free)", default=0, ge=0)
    dist: str = _doc("distribution policy: 'single', 'data_parallel' (env+actor+learner per rank, gradients "
                     "all-reduced), 'central_learner' (env+actor per rank, learner on rank 0), or 'auto' "
                     "(data_parallel under torchrun with several ranks, else single)", default="auto")
    dist_timeout: float = _doc("seconds after which a silent or lost rank stops every other rank with an error",
                               default=300.0, gt=0)
    replication_check_every: int = _doc("data_parallel: iterations between checks that every rank holds the "
                                        "same parameters (0 = never)", default=10, ge=0)
    max_staleness: int = _doc("central_learner: how many updates behind the learner an actor's weights may "
                              "be (0 = synchronous, trajectories always from the current policy)", default=0, ge=0)

    def validated(self) -> "TrainConfig":
        """A checked copy with derived values filled in; ValueError names the first bad field."""
        modules = (self.env_modules,) if isinstance(self.env_modules, str) else tuple(self.env_modules)
        c = dataclasses.replace(self, env_params=dict(self.env_params), hidden=tuple(self.hidden),
                                train_groups=tuple(self.train_groups), nsys_iters=tuple(self.nsys_iters),
                                env_modules=modules)
        clashes = [k for k in c.env_params if k in TRAINER_OWNED_ENV_ARGS]
        if clashes:
            raise ValueError("; ".join(f"env_params {k!r} is set by {TRAINER_OWNED_ENV_ARGS[k]} for every env the trainer "
                                       "makes" for k in clashes) + ": leave it out of --env-param")
        if c.algo not in ALGORITHMS:
            raise ValueError(f"algo must be one of {sorted(ALGORITHMS)}, got {c.algo!r}")
        c = ALGORITHMS[c.algo].adjust_config(c)
        if c.clip_vloss is None:
            c.clip_vloss = c.value_norm
        check_fields(c, "config")  # every number against its declared range, every flag a bool
        if c.iters == 0:
            if c.total_steps == 0:
                raise ValueError("set iters or total_steps (both are 0)")
            c.iters = max(1, math.ceil(c.total_steps / (c.num_envs * c.rollout_len)))
        if not c.hidden or any(isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in c.hidden):
            raise ValueError(f"hidden must be widths >= 1, got {c.hidden!r}")
        for name, choices in (("policy_backend", ACTING_BACKENDS), ("learner_backend", LEARNING_BACKENDS),
                              ("dist", DIST_CHOICES), ("recurrent", RECURRENT_CHOICES)):
            if getattr(c, name) not in choices:
                raise ValueError(f"{name} must be one of {list(choices)}, got {getattr(c, name)!r}")
        if c.nsys_iters and (len(c.nsys_iters) != 2 or not 0 <= c.nsys_iters[0] < c.nsys_iters[1]):
            raise ValueError(f"nsys_iters must be two iterations first < last (e.g. 2,4), got {c.nsys_iters!r}")
        if c.value_norm and c.algo != "mappo":
            ippo = f"; preset {c.preset}-ippo is its independent PPO" if f"{c.preset}-ippo" in PRESETS else ""
            raise ValueError(f"value_norm normalises a central critic's values: it needs algo 'mappo', got {c.algo!r} "
                             f"(turn it off: --no-value-norm, value_norm=False{ippo})")
        if c.minibatches > c.num_envs * c.rollout_len:  # also keeps the learner's sizes within int64
            raise ValueError(f"minibatches ({c.minibatches}) must be <= the samples of a one-agent group per rollout, "
                             f"num_envs x rollout_len = {c.num_envs * c.rollout_len}")
        if c.recurrent != "none" and c.num_envs < c.minibatches:
            raise ValueError(f"a recurrent policy's minibatches are drawn over envs: num_envs ({c.num_envs}) must be "
                             f">= minibatches ({c.minibatches})")
        c.checkpoint_every = checkpoint_interval(c.checkpoint_every)
        if c.resume == AUTO_RESUME and not c.log_dir:
            raise ValueError("--resume auto looks for the checkpoints in --log-dir: pass --log-dir")
        if c.device is not None:
            parse_device(c.device)  # the name alone: whether this machine has it is the run's to find out
        if c.activation not in ("tanh", "relu"):
            raise ValueError(f"activation must be 'tanh' or 'relu', got {c.activation!r}")
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
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "TrainConfig":
        valid = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - valid)
        if unknown:
            raise ValueError(f"unknown config key(s) {unknown}; valid keys: {sorted(valid)}")
        return cls(**data)


#: The default CPU run: learns within minutes on 2 vCPUs. Runners move at a fifth of the taggers'
#: speed, so taggers that learn to steer catch all four; random taggers catch about one.
TAG_SMALL = dict(
    num_taggers=2, num_runners=4, grid_length=6.0, episode_length=100, max_speed=0.3,
    skill_level_runner=0.2, use_full_observation=False, num_other_agents_observed=3,
    tagging_distance=0.035, tag_reward_for_tagger=10.0, tag_penalty_for_runner=-10.0,
)

# Tag's observation has no absolute heading (only other agents' positions and headings relative to
# the observer's), so a memoryless policy cannot tell which way it is moving; two stacked frames
# give it its own velocity (tag-small-gru carries it in a GRU state instead; bench/algorithms.py
# compares one frame, two frames and the GRU).
_TAG_TRAINING = dict(frame_stack=2, lr=1e-3, gamma=0.95, minibatches=8)

# MPE: 25-step episodes, two per rollout; velocities are observed, so no frame stack. Independent PPO (each
# agent's critic on its own observation, values as they come): at least as good as JaxMARL's IPPO baseline on
# both scenarios (docs/benchmarks.md, bench/learning_parity.py).
_MPE_IPPO = dict(num_envs=256, rollout_len=50, iters=100, lr=1e-3, gamma=0.95, minibatches=4, ent_coef=0.01,
                 algo="ppo", value_norm=False)
# MAPPO (critics on the global state, values normalised) updates four times as often per env step, and faster:
# with IPPO's 256 envs and lr 1e-3 it ended below JaxMARL's recurrent MAPPO on simple_spread, with 64 envs and
# lr 2e-3 above it (docs/benchmarks.md, 2026-11-29). The same 1.28M env steps.
_MPE_MAPPO = {**_MPE_IPPO, "num_envs": 64, "iters": 400, "lr": 2e-3, "algo": "mappo", "value_norm": True}
# The value-based family on mpe2's cooperative scenarios: JaxMARL's Q-learning baselines' values where gpurl has
# the same knob (ql_rnn_mpe.yaml: ReLU, gamma 0.9, lr 0.005 annealed, the target copied every 200 updates,
# epsilon 1 -> 0.05 over the first 10% of the run), a buffer of 200 steps x 256 envs and 64 updates of 1024
# transitions per iteration: the baselines' count of updates per env step (one of 32 x 25-step episodes every 8
# envs x 25 steps), which learned more than 32 (docs/benchmarks.md, bench/learning_parity.py).
_MPE_Q_LEARNING = dict(num_envs=256, rollout_len=50, iters=100, lr=5e-3, gamma=0.9, activation="relu",
                       replay_capacity=200, q_batch=1024, q_updates=64, target_tau=1.0, target_period=200,
                       eps_decay_frac=0.1)

#: name -> config values; "env_params" replaces the env's parameters as a whole.
PRESETS: dict[str, dict] = {
    "tag-small": dict(env="tag_continuous", env_params=TAG_SMALL, num_envs=128, rollout_len=64, iters=160,
                      **_TAG_TRAINING),
    "tag-10v100": dict(env="tag_continuous", env_params=TAG_10V100, num_envs=100, rollout_len=64, iters=100,
                       **_TAG_TRAINING),
    "tag-5v1000": dict(env="tag_continuous", env_params=TAG_5V1000, num_envs=64, rollout_len=32, iters=100,
                       **_TAG_TRAINING),
    # MPE simple_tag 3v1v2 (mpe2's defaults): 25-step episodes, velocities in the observation, so no
    # frame stack; two episodes per rollout.
    "simple-tag": dict(env="simple_tag", env_params={}, **_MPE_IPPO),
    # MAPPO on simple_tag: every group's critic reads the global state (each agent's observation,
    # concatenated) with the agent's one-hot id, values normalised; the cooperative scenarios' MAPPO values.
    "simple-tag-mappo": dict(env="simple_tag", env_params={}, **_MPE_MAPPO),
    # MAPPO on mpe2's cooperative scenarios at their defaults (the MAPPO paper's MPE tasks): every agent
    # shares the team reward, every critic reads the global state.
    "simple-spread": dict(env="simple_spread", env_params={}, **_MPE_MAPPO),
    # The listener learns only once it reads the speaker's message; with 4 epochs 1 seed in 5 never did (its
    # return stayed near -11) and the others ended below JaxMARL's recurrent MAPPO. 12 passes over each
    # rollout learned it on all 5 (docs/benchmarks.md, 2026-11-29, sixth session).
    "simple-speaker-listener": dict(env="simple_speaker_listener", env_params={}, **{**_MPE_MAPPO, "epochs": 12}),
    "simple-spread-ippo": dict(env="simple_spread", env_params={}, **_MPE_IPPO),
    "simple-speaker-listener-ippo": dict(env="simple_speaker_listener", env_params={}, **_MPE_IPPO),
    **{f"simple-spread-{q}": dict(env="simple_spread", env_params={}, algo=q, **_MPE_Q_LEARNING)
       for q in ("iql", "vdn", "qmix")},
    # tag-small with a GRU actor instead of two stacked frames: the state carries the agent's own motion.
    "tag-small-gru": dict(env="tag_continuous", env_params=TAG_SMALL, num_envs=128, rollout_len=64, iters=160,
                          **{**_TAG_TRAINING, "frame_stack": 1}, recurrent="gru"),
    # WarpDrive's gridworld benchmark configuration (4 taggers, 101 x 101 cells, 2000 envs).
    "grid-4": dict(env="tag_gridworld", env_params=TAG_GRID_4, num_envs=2000, rollout_len=32, iters=100,
                   lr=1e-3, gamma=0.98, minibatches=8),
}


def check_algorithm_fields(algo: str, explicit: dict) -> None:
    """Refuse a value in ``explicit`` (the values a user gave: flags, keyword arguments) for a field that
    ``algo`` does not read (``--algo ppo --q-batch 3``; ``--algo a2c --epochs 7``, whose epochs A2C fixes at 1),
    unless it is the value the algorithm uses anyway (the default, or what it fixes: A2C's epochs=1)."""
    if algo not in ALGORITHMS:
        return  # validation names the unknown algorithm
    cls = ALGORITHMS[algo]
    implied = dataclasses.asdict(cls.adjust_config(TrainConfig(algo=algo)))
    unread = [k for k, v in explicit.items()
              if k in ALGORITHM_SPECIFIC_FIELDS and k not in cls.config_fields and v != implied[k]]
    if unread:
        readers = {k: sorted(n for n, a in ALGORITHMS.items() if k in a.config_fields) for k in unread}
        raise ValueError("; ".join(f"{k}={explicit[k]!r} is not read by algo {algo!r} (read by: "
                                   f"{', '.join(readers[k]) or 'none'})" for k in unread)
                         + ": leave it out, or pick an algorithm that reads it")


def build_config(preset: str | None = None, **explicit) -> TrainConfig:
    """Field defaults, then the preset's values, then ``explicit`` ones; validated. A value in ``explicit`` for
    a field the algorithm does not read is refused (:func:`check_algorithm_fields`)."""
    values: dict = {}
    if preset is not None:
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; presets: {sorted(PRESETS)}")
        values.update(PRESETS[preset])
        if "total_steps" in explicit and "iters" not in explicit:
            values["iters"] = 0  # an explicit step budget replaces the preset's iteration count
    values.update(explicit)
    values["preset"] = preset
    check_algorithm_fields(values.get("algo", "ppo"), explicit)
    return TrainConfig.from_dict(values).validated()
