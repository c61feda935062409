"""Launching bench/tag_ppo.py on several gloo ranks for the multigpu tests (CPU processes)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TAG_PPO = str(REPO / "bench" / "tag_ppo.py")

#: A tiny Tag run with every code path (two trained groups, truncation, frame stacking, obs norm).
TINY_ARGS = [
    "--env", "tag_continuous", "--env-param", "num_taggers=2", "--env-param", "num_runners=3",
    "--env-param", "grid_length=4.0", "--env-param", "episode_length=12",
    "--env-param", "use_full_observation=False", "--env-param", "num_other_agents_observed=3",
    "--env-param", "tagging_distance=0.05", "--env-param", "runner_exits_game_after_tagged=False",
    "--num-envs", "4", "--rollout-len", "8", "--epochs", "2", "--minibatches", "2", "--frame-stack", "2",
    "--eval-episodes", "0", "--seed", "5", "--device", "cpu", "--torch-threads", "1", "--no-progress",
    # Eager acting and learning: quick to start in every process; the compiled paths are held to
    # them in tests/test_acting.py and tests/test_ppo_loss.py.
    "--policy-backend", "eager", "--learner-backend", "eager",
]


#: The value-based algorithms (iql, vdn, qmix) act in Discrete spaces: tag_gridworld, small. The replay buffer
#: holds 12 of the 16 rollout steps (it wraps), and 16 transitions per update are there from the first
#: iteration on, so both iterations update.
VALUE_ARGS = [
    "--env", "tag_gridworld", "--env-param", "num_taggers=2", "--env-param", "grid_length=4",
    "--env-param", "episode_length=6", "--num-envs", "4", "--rollout-len", "8", "--frame-stack", "2",
    "--eval-episodes", "0", "--seed", "5", "--device", "cpu", "--torch-threads", "1", "--no-progress",
    "--replay-capacity", "12", "--q-batch", "16", "--q-updates", "2",
    "--policy-backend", "eager", "--learner-backend", "eager",  # as TINY_ARGS (compiled: tests/test_q_acting.py)
]


#: The off-policy Box algorithms (maddpg, iddpg, matd3, masac, isac) act in Box spaces: simple_spread with mpe2's continuous
#: actions, 2 agents. As VALUE_ARGS, the buffer wraps and both iterations update.
CONTINUOUS_ARGS = [
    "--env", "simple_spread", "--env-param", "continuous_actions=True", "--env-param", "N=2",
    "--num-envs", "4", "--rollout-len", "8", "--frame-stack", "2",
    "--eval-episodes", "0", "--seed", "5", "--device", "cpu", "--torch-threads", "1", "--no-progress",
    "--replay-capacity", "12", "--q-batch", "16", "--q-updates", "2",
    "--policy-backend", "eager", "--learner-backend", "eager",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_env() -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "tests"), env.get("PYTHONPATH", "")])
    return env


def torchrun(nproc: int, args: list[str], timeout: float = 600, script: str = TAG_PPO) -> subprocess.CompletedProcess:
    """``torchrun --nproc_per_node=nproc script args`` (bench/tag_ppo.py by default); raises with the
    output on failure."""
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
           f"--master_port={free_port()}", script, *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=worker_env(), cwd=REPO)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}")
    return done


def spawn_ranks(world: int, args: list[str]) -> list[subprocess.Popen]:
    """``world`` ranks of bench/tag_ppo.py with torchrun's variables set by hand (no torchrun agent,
    which would itself stop the survivors when one rank dies)."""
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(worker_env(), RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                   LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, TAG_PPO, *args], env=env, cwd=REPO, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    return procs
