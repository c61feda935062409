"""Every registered algorithm, feed-forward and recurrent, under every distribution policy, on gloo with 2
ranks (CPU processes).

An algorithm is written once; a distribution policy decides where its fragments run. So for each
algorithm of ``gpurl.algos.ALGORITHMS``, with an MLP actor and with a GRU one (``--recurrent gru``; see
VARIANTS):
- ``data_parallel`` on 2 ranks x E envs ends with the weights of ``single`` on 2E envs;
- ``central_learner`` with ``--max-staleness 0`` ends with them too;
compared after 2 iterations to float tolerance (1e-5), together with the env state of all ranks in
global env order; for the off-policy algorithms the logged statistics of each iteration (TD loss, Q taken,
epsilon, updates; the DDPG family's critic and actor losses) are the single run's too. A new algorithm enters the matrix by registering. The 2-rank data-parallel
checkpoints of PPO and QMIX also resume in one process where the single run does.

Each policy is one real ``torchrun`` launch (tests/dist_matrix_worker.py trains every variant in turn,
so the process start is paid once per policy); the single-device references run in this process.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch

import reinforce_algo  # noqa: F401  (registers --algo reinforce, written outside gpurl: it must run here too)
from dist_helpers import REPO, torchrun
from dist_matrix_worker import ITERS, variant_args
from gpurl.algos import ALGORITHMS, BUILT_IN
from gpurl.algos.params import param_fields
from gpurl.multigpu import POLICIES
from gpurl.train.checkpoint import load_checkpoint
from gpurl.train.cli import config_from_args
from gpurl.train.resume import resume_config
from gpurl.train.run import train

pytestmark = pytest.mark.cpu

MULTI_RANK = sorted(name for name in POLICIES if name != "single")
#: Every algorithm with an MLP actor, and with a GRU actor where its recurrent path is its own: A2C's is
#: PPO's learner with other config values (one epoch, one minibatch), so "a2c:gru" adds no code path.
VARIANTS = [f"{algo}:{recurrent}" for algo in sorted(ALGORITHMS) for recurrent in ("none", "gru")
            if (algo, recurrent) != ("a2c", "gru")
            and (recurrent == "none" or "recurrent" in param_fields(ALGORITHMS[algo].params_type))]
#: Variants whose 2-rank data-parallel checkpoint is resumed in one process: PPO, QMIX (its replay buffer,
#: gathered from both ranks, is sliced back by env; its mixer reads the global state), MADDPG (continuous
#: actions in the replay, two optimisers, target networks) and MASAC (a third optimiser, the learned temperature).
RESUMED = ["ppo:none", "qmix:none", "maddpg:none", "masac:none"]
MATRIX = [(variant, dist) for variant in VARIANTS for dist in MULTI_RANK]
WORKER = str(REPO / "tests" / "dist_matrix_worker.py")


def metrics(log_dir: Path) -> list[dict]:
    with open(log_dir / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def assert_same_tensors(a: dict, b: dict, atol: float = 1e-5) -> None:
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], atol=atol, rtol=0, msg=key)


@pytest.fixture(scope="module")
def single_runs(tmp_path_factory):
    """Per variant: one process, all 4 envs, ITERS iterations (and, for PPO, that run resumed to
    ITERS + 2: a resume, not a fresh longer run, since the learning rate anneals over ``iters``)."""
    runs = {}
    for variant in VARIANTS:
        algo, recurrent = variant.split(":")
        root = tmp_path_factory.mktemp(f"single-{algo}-{recurrent}")
        train(config_from_args([*variant_args(algo, recurrent), "--dist", "single", "--log-dir", str(root / "a")]),
              say=lambda *a: None)
        runs[variant] = {"short": load_checkpoint(root / "a" / "checkpoint.pt"), "metrics": metrics(root / "a")}
        if variant in RESUMED:
            short = runs[variant]["short"]
            longer = resume_config(short, {"iters": ITERS + 2, "log_dir": str(root / "b"), "dist": "single"})
            train(longer, short, say=lambda *a: None)
            runs[variant]["long"] = load_checkpoint(root / "b" / "checkpoint.pt")
    return runs


@pytest.fixture(scope="module")
def multi_rank_runs(tmp_path_factory):
    """One torchrun launch per policy, training every variant; launched lazily, once."""
    done = {}

    def run(variant: str, dist: str):
        if dist not in done:
            root = tmp_path_factory.mktemp(dist)
            out = torchrun(2, [dist, str(root), *VARIANTS], script=WORKER)
            results = [json.loads(line.removeprefix("VARIANT ")) for line in out.stdout.splitlines()
                       if line.startswith("VARIANT ")]
            assert [r["variant"] for r in results] == VARIANTS, out.stdout[-2000:]
            folders = {r["variant"]: root / r["variant"].replace(":", "-") for r in results}
            done[dist] = {r["variant"]: (r, load_checkpoint(folders[r["variant"]] / "checkpoint.pt"),
                                         metrics(folders[r["variant"]])) for r in results}
        return done[dist][variant]

    return run


def test_the_matrix_covers_every_algorithm_and_policy():
    assert {*BUILT_IN, "reinforce"} <= set(ALGORITHMS)
    assert set(BUILT_IN) >= {"ppo", "a2c", "mappo", "iql", "vdn", "qmix", "maddpg", "iddpg", "matd3", "masac", "isac"}
    assert {v.split(":")[0] for v in VARIANTS} == set(ALGORITHMS)
    assert set(MULTI_RANK) == {"data_parallel", "central_learner"}


@pytest.mark.parametrize("variant,dist", MATRIX, ids=[f"{v.replace(':', '-')}-{d}" for v, d in MATRIX])
def test_two_ranks_end_where_one_device_does(variant, dist, single_runs, multi_rank_runs):
    result, saved, logged = multi_rank_runs(variant, dist)
    reference = single_runs[variant]["short"]
    algo, recurrent = variant.split(":")
    assert (result["world_size"], result["dist"], result["algo"], result["num_envs"]) == (2, dist, algo, 4)
    assert saved["config"]["algo_params"].get("recurrent", "none") == recurrent
    assert result["comm_bytes_per_iteration"] > 0
    assert (saved["world_size"], saved["iteration"], saved["algorithm"]) == (2, ITERS, algo)
    assert_same_tensors(saved["algo_state"]["nets"], reference["algo_state"]["nets"])
    # The env state of both ranks, gathered in global env order, is the single run's; so are the
    # states the next rollout continues from (global state, recurrent states).
    assert_same_tensors(saved["env_state"], reference["env_state"])
    assert_same_tensors(saved["carried"], reference["carried"])
    if ALGORITHMS[algo].uses_replay:  # the logged learner statistics are the one device's too
        single = single_runs[variant]["metrics"]
        names = [k for k in single[0] if k.split("/")[0] in ("q_loss", "q_taken", "epsilon", "updates", "critic_loss",
                                                              "actor_loss")]
        assert names and len(logged) == len(single) == ITERS
        for row, want in zip(logged, single):
            for name in names:
                assert float(row[name]) == pytest.approx(float(want[name]), rel=1e-4, abs=1e-6), (row["iteration"], name)


@pytest.mark.parametrize("variant", RESUMED)
def test_two_rank_checkpoint_resumes_on_one_rank(variant, single_runs, multi_rank_runs, tmp_path):
    """Continuing a 2-rank data-parallel checkpoint in one process for 2 more iterations lands where the
    single run resumed to ITERS + 2 does (the env state, and QMIX's replay buffer, of both ranks were saved
    in global env order)."""
    _, checkpoint, _ = multi_rank_runs(variant, "data_parallel")
    if variant.startswith("qmix"):
        assert checkpoint["replay"]["buffers"]["inputs"].shape[1] == 4  # both ranks' envs
        assert_same_tensors(checkpoint["replay"]["buffers"], single_runs[variant]["short"]["replay"]["buffers"])
    cfg = resume_config(checkpoint, {"iters": ITERS + 2, "log_dir": str(tmp_path), "dist": "single"})
    result = train(cfg, checkpoint, say=lambda *a: None)
    assert (result["iterations"], result["world_size"]) == (ITERS + 2, 1)
    assert_same_tensors(load_checkpoint(tmp_path / "checkpoint.pt")["algo_state"]["nets"],
                        single_runs[variant]["long"]["algo_state"]["nets"])
