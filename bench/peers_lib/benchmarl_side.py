"""BenchMARL's side of ``bench/benchmarl_offpolicy.py`` (BenchMARL an optional peer, imported only by
:func:`import_benchmarl`): the shared task and sizes, BenchMARL's experiment with them, its trained policy called as
a gpurl policy, and the callback that alternates the two sides iteration by iteration. (Part of a library:
bench/benchmarl_offpolicy.py prints the RESULT line.)"""
from __future__ import annotations

import functools
import os
import time

import torch

from .gemm_floor import GemmRecorder

ENV = "simple_spread"
ENV_PARAMS = {"continuous_actions": True, "max_cycles": 25}
GROUP = "agent"
#: BenchMARL's off-policy defaults (benchmarl/conf/experiment/base_experiment.yaml): frames per iteration,
#: updates per iteration, frames per update, replay frames
BATCH_FRAMES, UPDATES, TRAIN_BATCH, MEMORY = 6000, 1000, 128, 1_000_000
#: iterations not timed on either side (gpurl's rule: the first builds the env kernels)
WARMUP = 2


def import_benchmarl():
    """BenchMARL's pieces, through gpurl's adapter (imported first: it readies TorchRL for BenchMARL 1.5.1)."""
    from gpurl.envs.adapters.benchmarl import GpurlTask

    from benchmarl.algorithms import MaddpgConfig, MasacConfig
    from benchmarl.experiment import Experiment, ExperimentConfig
    from benchmarl.models.mlp import MlpConfig

    import benchmarl.experiment.experiment as experiment_module

    # Its progress bar off (its rate would count the gpurl iterations run in between): this script prints its own.
    experiment_module.tqdm = functools.partial(experiment_module.tqdm, disable=True)

    return dict(GpurlTask=GpurlTask, configs={"maddpg": MaddpgConfig, "masac": MasacConfig}, Experiment=Experiment,
                ExperimentConfig=ExperimentConfig, MlpConfig=MlpConfig)


def benchmarl_experiment(bm: dict, algo: str, plan, save_folder: str, callbacks: list):
    """BenchMARL's defaults with the shared sizes, loggers, evaluation and checkpoints off."""
    config = bm["ExperimentConfig"].get_from_yaml()
    config.sampling_device = config.train_device = config.buffer_device = "cpu"
    config.prefer_continuous_actions = True
    config.max_n_frames, config.max_n_iters = plan.frames, None
    config.off_policy_collected_frames_per_batch = plan.batch_frames
    config.off_policy_n_envs_per_worker = plan.num_envs
    config.off_policy_n_optimizer_steps = plan.updates
    config.off_policy_train_batch_size = TRAIN_BATCH
    config.off_policy_memory_size = plan.memory
    config.evaluation, config.render, config.loggers, config.create_json = False, False, [], False
    config.checkpoint_interval, config.checkpoint_at_end = 0, False
    config.save_folder = save_folder
    model = bm["MlpConfig"].get_from_yaml()
    model.num_cells, model.activation_class = list(plan.hidden), torch.nn.Tanh
    critic = bm["MlpConfig"].get_from_yaml()
    critic.num_cells, critic.activation_class = list(plan.hidden), torch.nn.Tanh
    task = bm["GpurlTask"].SIMPLE_SPREAD.get_task(config=dict(ENV_PARAMS))
    return bm["Experiment"](task=task, algorithm_config=bm["configs"][algo].get_from_yaml(), model_config=model,
                            critic_model_config=critic, seed=plan.seed, config=config, callbacks=callbacks)


def benchmarl_values(experiment) -> str:
    c, a = experiment.config, experiment.algorithm_config
    shown = {k: getattr(c, k) for k in ("gamma", "lr", "adam_eps", "clip_grad_norm", "clip_grad_val",
                                        "soft_target_update", "polyak_tau", "exploration_eps_init",
                                        "exploration_eps_end", "exploration_anneal_frames", "share_policy_params")}
    return " ".join(f"{k}={v}" for k, v in {**shown, **vars(a)}.items())


class BenchmarlPolicy:
    """BenchMARL's trained policy called like a gpurl policy: obs [E, N, obs_dim] -> actions [E, N, dims],
    deterministic (``ExplorationType.DETERMINISTIC``, as BenchMARL's own evaluation)."""

    def __init__(self, experiment, env):
        self.policy, self.env = experiment.policy, env
        self.actions = torch.zeros(env.num_envs, env.num_agents, env.action_dims, device=env.device)

    @torch.no_grad()
    def __call__(self, obs: torch.Tensor, starts=None) -> torch.Tensor:
        from tensordict import TensorDict
        from torchrl.envs.utils import ExplorationType, set_exploration_type

        E = obs.shape[0]
        groups = {name: TensorDict({"observation": obs[:, g.agents, :g.obs_dim]},
                                   batch_size=[E, g.agents.stop - g.agents.start])
                  for name, g in self.env.groups.items()}
        with set_exploration_type(ExplorationType.DETERMINISTIC):
            out = self.policy(TensorDict(groups, batch_size=[E]))
        for name, g in self.env.groups.items():
            action = out[name, "action"]
            self.actions[:, g.agents, :action.shape[-1]] = action
        return self.actions


class Alternate:
    """A BenchMARL callback (duck-typed, BenchMARL being optional) that runs ``step(k)``, gpurl's iteration k,
    at the end of BenchMARL's iteration k: ``marks`` the times BenchMARL's iterations ended, ``steps`` the
    seconds each call of ``step`` took (out of BenchMARL's next iteration's time), ``collected`` the times its
    batches were collected (its learning follows). ``gemms`` records the matrix products of BenchMARL's iteration
    ``record`` (an untimed one: recording slows it; None: none recorded)."""

    def __init__(self, label: str, step, record: int | None = None):
        self.experiment, self.label, self.step, self.start = None, label, step, 0.0
        self.marks, self.steps, self.collected = [], [], []
        self.record, self.gemms = record, GemmRecorder()

    def __getstate__(self):  # BenchMARL pickles its callbacks into its folder: nothing of this is state
        return {}

    def on_train_end(self, training_td, group) -> None:
        self.marks.append(time.perf_counter())
        k = len(self.marks) - 1
        if k == self.record:
            self.gemms.__exit__(None, None, None)
        bm_seconds = self.marks[k] - (self.marks[k - 1] + self.steps[k - 1] if k else self.start)
        s0 = time.perf_counter()
        self.step(k)
        self.steps.append(time.perf_counter() - s0)
        recorded = " (its matrix products recorded)" if k == self.record else ""
        print(f"  {self.label} iteration {k + 1}: BenchMARL {bm_seconds:.1f} s{recorded}, gpurl {self.steps[-1]:.1f} s "
              f"(load average {os.getloadavg()[0]:.2f})", flush=True)
        if self.record is not None and k + 1 == self.record:
            self.gemms.__enter__()

    def on_batch_collected(self, batch) -> None:
        self.collected.append(time.perf_counter())

    # The rest of BenchMARL's callback interface, unused.
    def on_train_step(self, batch, group):
        return None

    def on_setup(self) -> None:
        pass

    def on_load_state_dict(self, state_dict) -> None:
        pass

    def on_evaluation_end(self, rollouts) -> None:
        pass

    def on_state_dict(self, state_dict) -> None:
        pass
