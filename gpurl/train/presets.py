"""Named training configurations (``--preset``): flat values (run fields and the algorithm's parameters, as the
CLI's flags name them) applied before explicit ones by :func:`gpurl.train.config.build_config`. The env values
they use sit beside their envs (``gpurl/envs/<env>/params.py``).
"""
from __future__ import annotations

from ..envs.tag_continuous.params import TAG_5V1000, TAG_10V100, TAG_SMALL
from ..envs.tag_gridworld.params import TAG_GRID_4

# Tag's observation has no absolute heading (only other agents' positions and headings relative to
# the observer's), so a memoryless policy cannot tell which way it is moving; two stacked frames
# give it its own velocity (tag-small-gru carries it in a GRU state instead; bench/algorithms.py
# compares one frame, two frames and the GRU).
_TAG_TRAINING = dict(frame_stack=2, lr=1e-3, gamma=0.95, minibatches=8)

# MPE: 25-step episodes, two per rollout; velocities are observed, so no frame stack. Independent PPO (each
# agent's critic on its own observation, values as they come): at least as good as JaxMARL's IPPO baseline on
# both scenarios (docs/benchmarks.md, bench/learning_parity.py).
_MPE_IPPO = dict(num_envs=256, rollout_len=50, iters=100, lr=1e-3, gamma=0.95, minibatches=4, ent_coef=0.01,
                 algo="ppo")
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
# The off-policy actor-critics for Box actions on mpe2's scenarios with continuous actions: a 25-step episode per
# rollout of 64 envs, a buffer of 400 rollouts, 64 updates of 256 transitions per 1600 env steps. 16 updates per
# rollout had not learned MADDPG at 192k env steps; 64 had at 96k (docs/benchmarks.md, 2026-11-30). BenchMARL's
# defaults take one update of 128 per 6 env steps (for 3 agents: 18 agent-steps), here one of 256 per 25.
_MPE_BOX = dict(num_envs=64, rollout_len=25, iters=60, lr=1e-3, actor_lr=1e-3, gamma=0.95, target_tau=0.01,
                q_batch=256, q_updates=64, replay_capacity=400)
# MADDPG and IDDPG explore with 0.2 half ranges, the noise of the run that learned. MATD3, whose target actions
# carry noise too, explores with TD3's 0.1 and takes twice the updates: its actors step every second update, so
# they step as often as MADDPG's (with 64 updates two seeds in three of simple_spread hardly learned). SAC's
# temperature learns as fast as the actors: at 3e-4 alpha stayed high on simple_tag's sparse tags and two seeds
# in three learned nothing (docs/benchmarks.md, 2026-11-30, tenth session).
_BOX_ALGOS = {"maddpg": dict(exploration_std=0.2), "iddpg": dict(exploration_std=0.2),
              "matd3": dict(exploration_std=0.1, q_updates=128), "masac": dict(alpha_lr=1e-3),
              "isac": dict(alpha_lr=1e-3)}
_CONTINUOUS = {"continuous_actions": True}

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
    # The Box-action family: simple_spread's team, and simple_tag's adversaries against uniformly random prey.
    **{f"simple-spread-{algo}": dict(env="simple_spread", env_params=_CONTINUOUS, algo=algo, **{**_MPE_BOX, **values})
       for algo, values in _BOX_ALGOS.items()},
    **{f"simple-tag-{algo}": dict(env="simple_tag", env_params=_CONTINUOUS, algo=algo, train_groups=("adversary",),
                                  **{**_MPE_BOX, **values}) for algo, values in _BOX_ALGOS.items()},
    # tag-small with a GRU actor instead of two stacked frames: the state carries the agent's own motion.
    "tag-small-gru": dict(env="tag_continuous", env_params=TAG_SMALL, num_envs=128, rollout_len=64, iters=160,
                          **{**_TAG_TRAINING, "frame_stack": 1}, recurrent="gru"),
    # WarpDrive's gridworld benchmark configuration (4 taggers, 101 x 101 cells, 2000 envs).
    "grid-4": dict(env="tag_gridworld", env_params=TAG_GRID_4, num_envs=2000, rollout_len=32, iters=100,
                   lr=1e-3, gamma=0.98, minibatches=8),
}


__all__ = ["PRESETS"]
