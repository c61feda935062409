"""BenchMARL's MAPPO on a gpurl env, through gpurl's TorchRL adapter (docs/torchrl.md, "BenchMARL").

    pip install -c constraints-cpu.txt -e ".[benchmarl]"
    python examples/benchmarl_mappo.py simple_tag 10        # env, iterations of 400 frames

tests/test_benchmarl.py runs it on simple_spread and simple_tag.
"""
from __future__ import annotations

import argparse

from gpurl.envs.adapters.benchmarl import GpurlTask  # first: it readies TorchRL for BenchMARL 1.5.1

from benchmarl.algorithms import MappoConfig
from benchmarl.experiment import Experiment, ExperimentConfig
from benchmarl.models.mlp import MlpConfig


def mappo_experiment(env: str, iterations: int, save_folder: str = ".", device: str = "cpu",
                     callbacks=()) -> Experiment:
    """A BenchMARL MAPPO experiment on gpurl's ``env`` (its default parameters): ``iterations`` batches of 400
    frames from 16 envs, one pass of two minibatches over each, 4 evaluation episodes after the first
    iteration and after the last; ``callbacks``: BenchMARL ``Callback``s."""
    config = ExperimentConfig.get_from_yaml()  # BenchMARL's defaults, then a short run
    config.sampling_device = config.train_device = config.buffer_device = device
    config.max_n_iters = iterations
    config.on_policy_collected_frames_per_batch = 400
    config.on_policy_n_envs_per_worker = 16  # one gpurl env batch of 16
    config.on_policy_minibatch_size = 200
    config.on_policy_n_minibatch_iters = 1
    config.prefer_continuous_actions = False  # the MPE suite's Discrete(5) actions
    config.evaluation_interval = 400 * iterations
    config.evaluation_episodes = 4
    config.loggers = []
    config.save_folder = save_folder
    task = GpurlTask[env.upper()].get_task()  # get_task({"max_cycles": 50}): the env's parameters
    return Experiment(task=task, algorithm_config=MappoConfig.get_from_yaml(), model_config=MlpConfig.get_from_yaml(),
                      critic_model_config=MlpConfig.get_from_yaml(), seed=0, config=config,
                      callbacks=list(callbacks))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("env", nargs="?", default="simple_tag", choices=[task.name.lower() for task in GpurlTask])
    parser.add_argument("iterations", nargs="?", type=int, default=10)
    args = parser.parse_args()
    mappo_experiment(args.env, args.iterations).run()
