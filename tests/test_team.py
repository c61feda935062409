"""Team phases (gpurl.kernels.team) on the CPU: a team-only helper outside a team phase is refused when the
kernel is made; a team kernel gets a block per env, a team per warp of it; k_nearest_team's CPU build and its plain-Python team of one
(what the CUDA bounds check runs) give k_nearest_ref's answer. The CUDA build's team runs in the simulator
(tests/test_sim_k_nearest.py)."""
from __future__ import annotations

import numpy as np
import pytest

from gpurl.kernels import EnvKernel, per_agent, per_agent_team, per_env
from gpurl.kernels.neighbors import k_nearest_ref, knn_scratch_shapes
from gpurl.kernels.neighbors_team import k_nearest_team
from gpurl.kernels.targets import device
from gpurl.kernels.team import team_range

pytestmark = pytest.mark.cpu


@device
def _fill(e, i, out):
    for j in team_range(out.shape[2]):
        out[e, i, j] = i + j


@device
def _fills_through_a_helper(e, i, out):
    _fill(e, i, out)


def _uses_helper(e, i, out):
    _fills_through_a_helper(e, i, out)


def _env_guard(e, out):
    return len(team_range(2)) > 0


def test_team_helper_outside_a_team_phase_is_refused():
    with pytest.raises(ValueError, match=r"phase 0 \(_uses_helper, a per_agent phase\) calls team_range.*"
                                         r"per_agent_team\(_uses_helper\)"):
        EnvKernel("bad_agent", [per_agent(_uses_helper)], nargs=1)
    with pytest.raises(ValueError, match=r"phase 1 \(_env_guard, a per_env phase\) calls team_range"):
        EnvKernel("bad_env", [per_agent_team(_fill), per_env(_env_guard)], nargs=1)
    with pytest.raises(ValueError, match=r"phase 0 \(_fill, its when guard\) calls team_range"):
        EnvKernel("bad_guard", [per_agent_team(_fill, when=_env_guard)], nargs=1)
    EnvKernel("good", [per_agent_team(_uses_helper)], nargs=1)  # through a helper is fine


def test_team_kernel_gets_a_block_per_env_and_a_serial_agent_loop():
    team = EnvKernel("team_geometry", [per_agent_team(_fill)], nargs=1)
    plain = EnvKernel("plain_geometry", [per_agent(lambda e, i, out: None)], nargs=1)
    assert plain.geometry(4096, 4) == (128, 128, 4)  # packed: 32 envs a block
    assert team.geometry(4096, 4) == (4096, 32, 32)  # the block is the env's team
    assert team.geometry(10, 110) == plain.geometry(10, 110) == (10, 128, 128)
    source = team.source("cuda")  # a warp a team: team w of the block's W takes agents w, w + W, ...
    assert "i = lane // 32\n" in source and "i += lanes // 32\n" in source and "i += lanes\n" not in source


def test_team_phase_runs_every_iteration_on_the_cpu_and_in_plain_python():
    kernel = EnvKernel("team_fill", [per_agent_team(_uses_helper)], nargs=1)
    want = np.arange(3)[None, :, None] + np.arange(5)[None, None, :] + np.zeros((2, 1, 1), np.int64)
    for run in (lambda out: kernel.launch("cpu", 2, 3, out), lambda out: kernel.run_python(2, 3, out, target="cuda")):
        out = np.full((2, 3, 5), -1, np.int64)
        run(out)
        np.testing.assert_array_equal(out, want)


def _knn_team(e, i, x, y, alive, k, radius, dist_row, cand_idx, cand_dist, out_idx, result):
    k_nearest_team(x, y, alive, e, i, k, radius, dist_row, cand_idx, cand_dist, out_idx, e)
    for s in team_range(k):
        result[e, i, s] = out_idx[e, s]


knn_team = EnvKernel("knn_team_cpu", [per_agent_team(_knn_team)], nargs=10)


@pytest.mark.parametrize("target", ["cpu", "cuda"])
@pytest.mark.parametrize("case", ["uniform", "crowded_ties"])
def test_k_nearest_team_cpu_build_and_team_of_one_match_reference(target, case):
    rng = np.random.default_rng(3)
    E, N, k = 3, 45, 4
    if case == "uniform":
        x, y = rng.uniform(0, 5, (2, E, N)).astype(np.float32)
        alive = (rng.uniform(size=(E, N)) < 0.8).astype(np.int32)
    else:  # a lattice (ties at every radius) and 36 agents at one point (no radius holds <= 32: the fallback)
        x = np.concatenate([np.arange(N)[None] % 3, np.ones((2, N))]).astype(np.float32)
        y = np.concatenate([np.arange(N)[None] // 3 % 3, np.ones((2, N))]).astype(np.float32)
        alive = np.ones((E, N), np.int32)
    shapes = knn_scratch_shapes(target, E, N, k)
    scratch = [np.zeros(shapes["dist_row"], np.float32), np.zeros(shapes["cand_idx"], np.int32),
               np.zeros(shapes["cand_dist"], np.float32), np.zeros(shapes["out_idx"], np.int32)]
    result = np.full((E, N, k), -7, np.int32)
    args = (x, y, alive, np.int32(k), np.float32(0.3), *scratch, result)
    if target == "cpu":
        knn_team.launch("cpu", E, N, *args)
    else:  # CUDA-shaped scratch, the team functions' plain versions: what the CUDA bounds check runs
        knn_team.run_python(E, N, *args, target="cuda")
    for e in range(E):
        for i in range(N):
            np.testing.assert_array_equal(result[e, i], k_nearest_ref(x[e], y[e], alive[e], i, k), f"env {e} agent {i}")
