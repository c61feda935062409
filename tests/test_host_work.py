"""CPU tier: what a steady-state training iteration asks of the host, counted on the CPU (gpurl/profiling.py).

On a GPU every host read of device memory stalls the queue, and every op the host dispatches is a launch. So:
- a steady-state iteration of every algorithm (PPO, A2C, MAPPO, with and without a GRU; IQL, VDN, QMIX)
  makes no sync-like op and no Python read of a tensor: no ``item``/``tolist``/``bool``, ``nonzero``,
  ``masked_select``, no tensor built from Python data;
- the run loop reads one record per log interval (the learner statistics, the NaN/Inf watch and the episode
  sums, copied asynchronously and read one iteration late) and nothing else;
- a minibatch of the PPO update is one compiled region (gradient, clip and Adam), an update of QMIX one region
  and its target move;
- a rollout step is at most four kernels: the acting region, the copy of its results, the env kernel, the
  bookkeeping region;
- after the first two iterations nothing compiles again.

The compiled variants run compiled acting and learning (the steady state of a default run); the others run
eager (their Python paths are what these checks read; their compiled twins are held to them in
tests/test_ppo_loss.py and tests/test_q_learning.py).
"""
from __future__ import annotations

import pytest
import torch
import torch._dynamo.utils

from dist_helpers import VALUE_ARGS
from gpurl.profiling import HostWork
from gpurl.train import Trainer, build_config
from gpurl.train.cli import config_from_args
from gpurl.train.run import TrainingRun

from test_train_ppo import TINY

pytestmark = pytest.mark.cpu

#: variant -> (algo, recurrent, compiled). The compiled PPO config is tests/test_ppo_loss.py's (one compiled
#: learner graph for both files), the compiled QMIX one tests/test_q_learning.py's.
VARIANTS = {
    "ppo-compiled": ("ppo", "none", True), "a2c": ("a2c", "none", False), "mappo-compiled": ("mappo", "none", True),
    "ppo-gru": ("ppo", "gru", False), "mappo-gru": ("mappo", "gru", False),
    "iql": ("iql", "none", False), "vdn": ("vdn", "none", False), "qmix-compiled": ("qmix", "none", True),
}


def trainer_of(variant: str, **overrides) -> Trainer:
    algo, recurrent, compiled = VARIANTS[variant]
    backend = "compiled" if compiled else "eager"
    if algo in ("iql", "vdn", "qmix"):
        return Trainer(config_from_args([*VALUE_ARGS, "--algo", algo, "--iters", "8", "--policy-backend", backend,
                                         "--learner-backend", backend]))
    values = dict(env="tag_continuous", env_params=TINY, num_envs=4, rollout_len=8, iters=8, epochs=2, minibatches=3,
                  eval_episodes=0, seed=5, progress=False, device="cpu", max_grad_norm=0.05, frame_stack=2,
                  algo=algo, recurrent=recurrent, policy_backend=backend, learner_backend=backend)
    if algo == "a2c":  # one epoch, one minibatch: A2C fixes them and refuses others
        values.update(epochs=1, minibatches=1)
    values.update(overrides)
    return Trainer(build_config(**values))


@pytest.fixture(scope="module")
def warm():
    """Trainers after three iterations (compiled, buffers allocated, replay filled), built once per variant."""
    cache = {}

    def get(variant: str) -> Trainer:
        if variant not in cache:
            trainer = trainer_of(variant)
            for _ in range(3):
                trainer.iterate()
            cache[variant] = trainer
        return cache[variant]

    return get


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_steady_state_iteration_reads_nothing_from_the_host(variant, warm):
    trainer = warm(variant)
    with HostWork() as work:
        stats = trainer.iterate()
    assert not work.syncs, f"{variant}: sync-like ops in an iteration: {dict(work.syncs)}"
    assert stats.shape == (len(trainer.trained), len(trainer.algo.stat_names))
    if trainer.algo.uses_replay:  # the measured iteration learned (its update count moved)
        assert trainer.read_losses(stats)[f"updates/{trainer.trained[0]}"] > 0


@pytest.mark.parametrize("variant", ["ppo-compiled", "qmix-compiled"])
def test_nothing_compiles_after_the_first_two_iterations(variant, warm):
    trainer = warm(variant)
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    for _ in range(3):
        trainer.iterate()
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs


def test_a_ppo_minibatch_is_one_compiled_region(warm):
    """The learner's step over one minibatch, as its update loop calls it: gradient, clip and Adam in one
    compiled region, nothing else dispatched (82 host ops per minibatch before the update was one region)."""
    learner = warm("ppo-compiled").algo.learner
    names = list(learner.nets)
    inputs = [learner.samples.group_inputs(name, learner.moments[name]) for name in names]
    before = learner.adam.step.clone()
    with HostWork() as work:
        learner.step(learner.totals, learner.minibatch_ids[1], inputs)
    assert not work.syncs
    assert work.regions == 1 and work.kernel_count == 1, dict(work.kernels)
    assert learner.adam.step == before + 1


def test_a_qmix_update_is_one_compiled_region_and_its_target_move(warm):
    trainer = warm("qmix-compiled")
    learner, replay, cfg = trainer.algo.learner, trainer.replay, trainer.config
    p = cfg.algo_params
    rows = trainer.learn_context.batches.replay_rows(replay, learner.seed, learner.draw, p.q_updates, p.q_batch)
    with HostWork() as work:
        learner.step(learner.totals, learner.update_ids[0], rows, replay.buffers())
        learner.target_flat.data.lerp_(learner.flat.data, p.target_tau)
    assert not work.syncs
    assert work.regions == 1 and work.kernel_count == 2, dict(work.kernels)


@pytest.mark.parametrize("variant", ["ppo-compiled", "mappo-compiled"])
def test_a_rollout_step_is_at_most_four_kernels(variant, warm, monkeypatch):
    """Acting (one compiled region, MAPPO's critics of the global state inside it, and one multi-tensor copy
    of its results into the storage), the env (one kernel launch per step), the bookkeeping (starts, episode
    sums and the step counter: one region)."""
    trainer = warm(variant)
    launches = []
    step = trainer.env.step
    monkeypatch.setattr(trainer.env, "step", lambda *a, **k: launches.append(1) or step(*a, **k))
    with HostWork() as work:
        trainer.rollout()
    T = trainer.config.rollout_len
    assert len(launches) == T and not work.syncs
    per_step = (work.kernel_count + len(launches)) / T
    assert per_step <= 4, dict(work.kernels)
    assert work.regions == 2 * T and work.kernels["aten::_foreach_copy_"] == T


def test_the_run_loop_reads_one_record_per_log_interval(tmp_path):
    """A run's steady-state steps: the only host read is the record of a log interval (one ``tolist`` of a
    host copy), and with a log row every second iteration, one every second step."""
    cfg = trainer_of("ppo-compiled").config
    run = TrainingRun(build_config(**{**cfg.to_dict(), "preset": None, "log_dir": str(tmp_path), "log_every": 2,
                                      "checkpoint_every": 0, "iters": 9}), say=lambda *a, **k: None, lines=lambda *a, **k: None)
    run.build()
    run.begin()
    for _ in range(3):
        run.step()
    reads = []
    for _ in range(4):
        with HostWork() as work:
            run.step()
        assert set(work.syncs) <= {name for name in work.syncs if "iteration_records.py" in name}, dict(work.syncs)
        reads.append(sum(work.syncs.values()))
    assert reads == [0, 1, 0, 1] or reads == [1, 0, 1, 0]
    run.close()
