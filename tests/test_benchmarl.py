"""BenchMARL as a client of gpurl (the ``benchmarl`` extra, in dev): examples/benchmarl_mappo.py, the code
docs/torchrl.md shows, runs BenchMARL's MAPPO on simple_spread and simple_tag through gpurl's TorchRL adapter,
with the versions gpurl.envs.adapters.benchmarl names (BenchMARL 1.5.1 on TorchRL 0.14.1).

Two iterations of 400 frames an env, its evaluation included: about ten seconds each once the env's CPU build
is cached (the TorchRL adapter's tests build the same one).
"""
from __future__ import annotations

import dataclasses
import sys
import warnings
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.cpu

from gpurl.envs import registry
from gpurl.envs.adapters import benchmarl as gpurl_benchmarl  # before BenchMARL itself: see its docstring
from gpurl.envs.adapters.torchrl import GpurlTorchRLEnv

from benchmarl.experiment.callback import Callback  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from examples.benchmarl_mappo import mappo_experiment  # noqa: E402

ITERATIONS, FRAMES = 2, 400


class Seen(Callback):
    """What BenchMARL hands its callbacks: the collected batches and the evaluation's rollouts."""

    def __init__(self):
        super().__init__()
        self.batches, self.rollouts = [], []

    def on_batch_collected(self, batch):
        self.batches.append(batch.clone())

    def on_evaluation_end(self, rollouts):
        self.rollouts.extend(r.clone() for r in rollouts)


@pytest.mark.parametrize("env, groups", [("simple_spread", {"agent": 3}),
                                         ("simple_tag", {"adversary": 3, "good": 1})])
def test_mappo_runs_on_a_gpurl_env_its_critic_reading_the_global_state(env, groups, tmp_path):
    seen = Seen()
    experiment = mappo_experiment(env, ITERATIONS, save_folder=str(tmp_path), callbacks=[seen])
    assert isinstance(experiment.test_env.base_env, GpurlTorchRLEnv)
    assert {g: len(names) for g, names in experiment.group_map.items()} == groups
    for group in groups:  # MAPPO's centralised critic reads gpurl's global state (docs/specs/global_state.md)
        assert experiment.algorithm.get_critic(group).in_keys == ["state"]
    before = [p.detach().clone() for p in experiment.policy.parameters()]

    experiment.run()

    assert experiment.n_iters_performed == ITERATIONS and experiment.total_frames == ITERATIONS * FRAMES
    assert [b.numel() for b in seen.batches] == [FRAMES] * ITERATIONS
    for group, n in groups.items():
        reward = torch.cat([b["next", group, "reward"].reshape(-1, n, 1) for b in seen.batches])  # [16, 25] a batch
        assert reward.shape == (ITERATIONS * FRAMES, n, 1) and torch.isfinite(reward).all() and reward.any()
    after = list(experiment.policy.parameters())
    assert all(torch.isfinite(p).all() for p in after)
    assert any(not torch.equal(b, a) for b, a in zip(before, after)), "MAPPO's updates left the policy unchanged"
    # BenchMARL evaluates after the first iteration and the last: 4 episodes each of the env's 25 steps
    # (max_cycles, read by episode_limit), the last step truncated, none before.
    assert len(seen.rollouts) == 2 * 4
    for rollout in seen.rollouts:
        truncated = rollout["next", "truncated"].reshape(-1)
        assert truncated.shape == (25,) and truncated[-1] and not truncated[:-1].any()


def test_docs_show_the_tested_example_verbatim():
    from test_custom_env_tutorial import python_blocks

    shown = [body for _, body, target in python_blocks((REPO / "docs" / "torchrl.md").read_text())
             if target == "examples/benchmarl_mappo.py"]
    assert shown == [(REPO / "examples" / "benchmarl_mappo.py").read_text()]


def test_every_builtin_env_is_a_task_and_its_action_kinds_are_right():
    builtin = [name for name in registry.registered() if registry._FACTORIES[name].__module__.startswith("gpurl.")]
    assert sorted(task.name.lower() for task in gpurl_benchmarl.GpurlTask) == builtin
    for name in builtin:
        params_type = getattr(registry._FACTORIES[name], "params_type", None)
        has_box = params_type is not None and "continuous_actions" in {f.name for f in dataclasses.fields(params_type)}
        task = gpurl_benchmarl.GpurlTask[name.upper()].get_task()
        assert task.supports_continuous_actions() == has_box, name
        assert task.supports_discrete_actions()


def test_a_task_makes_its_env_from_its_config_and_reads_its_episode_length():
    task = gpurl_benchmarl.GpurlTask.TAG_GRIDWORLD.get_task({"episode_length": 7})
    env = task.get_env_fun(num_envs=3, continuous_actions=False, seed=5, device="cpu")()
    assert isinstance(env, GpurlTorchRLEnv) and env.batch_size == (3,) and task.max_steps(env) == 7
    assert task.state_spec(env) is not None and "state" not in task.observation_spec(env).keys()
    with pytest.raises(ValueError, match="tag_gridworld has no continuous actions"):
        task.get_env_fun(num_envs=3, continuous_actions=True, seed=5, device="cpu")


def test_benchmarls_old_torchrl_names_mean_the_new_ones():
    from tensordict.nn import TensorDictModule
    from torch import nn
    from torchrl.modules import ProbabilisticActor
    from torchrl.objectives import ClipPPOLoss
    import torchrl.collectors as collectors

    init = ClipPPOLoss.__init__
    gpurl_benchmarl.restore_renamed_torchrl_names()  # again: nothing changes
    assert ClipPPOLoss.__init__ is init and collectors.SyncDataCollector is collectors.Collector

    actor = ProbabilisticActor(TensorDictModule(nn.Linear(2, 3), in_keys=["obs"], out_keys=["logits"]),
                               in_keys=["logits"], distribution_class=torch.distributions.Categorical)
    critic = TensorDictModule(nn.Linear(2, 1), in_keys=["obs"], out_keys=["state_value"])
    old = ClipPPOLoss(actor, critic, critic_coef=0.5, entropy_coef=0.01)  # BenchMARL 1.5.1's MAPPO passes these
    new = ClipPPOLoss(actor, critic, critic_coeff=0.5, entropy_coeff=0.01)
    for name in ("critic_coeff", "entropy_coeff"):
        assert torch.equal(getattr(old, name), getattr(new, name)), name
    assert old.critic_coeff.item() == 0.5 and old.entropy_coeff.item() == pytest.approx(0.01)


def test_another_benchmarl_version_is_named_in_a_warning(monkeypatch):
    versions = dict(gpurl_benchmarl.TESTED, benchmarl="9.9")
    monkeypatch.setattr(gpurl_benchmarl.metadata, "version", versions.__getitem__)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gpurl_benchmarl._warn_if_untested()
    assert [str(w.message) for w in caught] == [
        f"gpurl's BenchMARL tasks were tested with {gpurl_benchmarl.TESTED}; found {versions}"]
