"""A tiny training run for the tests of run outputs (records, loggers, sweeps): a few envs of a small Tag,
eager backends, one torch thread; an iteration takes well under a second (as in test_train_ppo.py)."""
from __future__ import annotations

from gpurl.train import build_config

TINY = dict(num_taggers=2, num_runners=3, grid_length=4.0, episode_length=12, use_full_observation=False,
            num_other_agents_observed=3, tagging_distance=0.05, runner_exits_game_after_tagged=False,
            skill_level_runner=0.2)


def tiny_config(log_dir, **overrides):
    """Two iterations, a checkpoint after each, no evaluation episodes, seed 5; ``overrides`` change fields."""
    values = dict(env="tag_continuous", env_params=TINY, num_envs=4, rollout_len=8, iters=2, epochs=1,
                  minibatches=1, eval_episodes=0, seed=5, progress=False, device="cpu", policy_backend="eager",
                  learner_backend="eager", checkpoint_every=1, torch_threads=1, log_dir=str(log_dir))
    values.update(overrides)
    return build_config(**values)


def quiet(*args, **kwargs):
    pass
