"""Evaluation and play of trained policies: ``gpurl.load_policy``, ``gpurl eval`` and what they rest on.

Checkpoints here come from trainers that never trained (weights perturbed so that acting is not the
initial near-uniform policy): what is checked is that a loaded policy acts exactly as the run's own actor
does, that episodes are counted whole, and that every wrong input is refused by name.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import gpurl
from gpurl.fusion.counter_rng import seed_tensor
from gpurl.train.checkpoint import CheckpointError, save_checkpoint
from gpurl.train.config import build_config
from gpurl.train.eval_cli import main as eval_main
from gpurl.train.evaluation import Lineup, RandomPolicy, play_episodes, summarize, t_quantile_975
from gpurl.train.trainer import Trainer

pytestmark = pytest.mark.cpu

REPO = Path(__file__).resolve().parent.parent


def write_checkpoint(path: Path, env: str = "simple_tag", seed: int = 0, **config) -> Trainer:
    """A checkpoint of an untrained run whose policy weights were moved at random; returns its trainer."""
    cfg = build_config(env=env, num_envs=4, rollout_len=4, iters=1, seed=seed, policy_backend="eager",
                       learner_backend="eager", eval_episodes=0, device="cpu", **config)
    trainer = Trainer(cfg)
    gen = torch.Generator().manual_seed(seed + 7)
    with torch.no_grad():
        for p in trainer.algo.nets.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.5)
    trainer.algo.sync_actors()
    save_checkpoint(path, {**trainer.state_dict(), "extras": {}, "run_id": f"test-{seed}"})
    return trainer


@pytest.fixture(scope="module")
def tag_run(tmp_path_factory) -> tuple[Path, Trainer]:
    run_dir = tmp_path_factory.mktemp("tag_run")
    return run_dir, write_checkpoint(run_dir / "checkpoint.pt")


# ---- statistics ------------------------------------------------------------------------------------


def test_t_quantiles_match_scipy():
    from scipy import stats  # the dev extra brings it (mpe2's checks)

    for df in list(range(1, 40)) + [50, 99, 500, 10_000]:
        assert t_quantile_975(df) == pytest.approx(stats.t.ppf(0.975, df), abs=5e-4), df


def test_summary_of_a_hand_computed_case():
    s = summarize(torch.tensor([1.0, 2.0, 3.0, 6.0]))
    # mean 3, sample variance (4 + 1 + 0 + 9) / 3 = 14/3; t(0.975, 3) = 3.182446
    assert s["mean"] == pytest.approx(3.0)
    assert s["std"] == pytest.approx((14 / 3) ** 0.5)
    assert s["ci95"] == pytest.approx(3.182446 * (14 / 3) ** 0.5 / 2, rel=1e-3)
    assert summarize(torch.tensor([4.0]))["ci95"] is None


# ---- episodes counted whole ------------------------------------------------------------------------


def test_every_env_plays_its_episodes_and_their_totals_match_a_plain_loop():
    """simple_tag's episodes last 25 steps: 3 envs x 2 episodes, every total summed by hand alongside."""
    env = gpurl.make("simple_tag", num_envs=3, seed=5, device="cpu")
    recorder = RandomPolicy(env, seed=9)
    played = play_episodes(env, recorder, episodes_per_env=2)
    assert played["episode_length"].tolist() == [25.0] * 6

    ref_env = gpurl.make("simple_tag", num_envs=3, seed=5, device="cpu")
    policy = RandomPolicy(ref_env, seed=9)
    obs = ref_env.reset()
    groups = ref_env.groups
    returns = {name: [] for name in groups}
    running = {name: torch.zeros(3, dtype=torch.float64) for name in groups}
    for _ in range(50):
        obs, reward, terminated, truncated, _ = ref_env.step(policy(obs))
        for name, g in groups.items():
            running[name] += reward[:, g.agents].double().mean(1)
        ended = terminated | truncated
        for name in groups:
            returns[name] += running[name][ended].tolist()
            running[name][ended] = 0
    for name in groups:
        assert played[f"return/{name}"].double().sort().values.tolist() == \
            pytest.approx(sorted(returns[name]), rel=1e-5, abs=1e-5)
    assert (played["collisions_per_episode"] >= 0).all()


# ---- a loaded policy acts as the run's actor ----------------------------------------------------------


def test_loaded_policy_acts_as_the_trainers_actor(tag_run):
    run_dir, trainer = tag_run
    env = gpurl.make("simple_tag", num_envs=6, seed=3, device="cpu")
    policy = gpurl.load_policy(run_dir, env=env, seed=11)
    obs = env.reset()
    actions = policy(obs).clone()

    storage = trainer._storage(6, steps=1, env=env)
    storage.start(obs)
    step = torch.zeros(1, dtype=torch.int64)
    trainer.algo.actor.run(storage, 0, step, seed_tensor(11, torch.device("cpu")))
    assert torch.equal(actions, storage.actions[0])
    assert actions.dtype == torch.int64 and actions.shape == (6, env.num_agents, 1)


def test_deterministic_actions_are_each_agents_argmax(tag_run):
    run_dir, trainer = tag_run
    env = gpurl.make("simple_tag", num_envs=5, seed=4, device="cpu")
    policy = gpurl.load_policy(run_dir / "checkpoint.pt", env=env, deterministic=True)
    obs = env.reset()
    actions = policy(obs)
    for name, g in env.groups.items():
        net = trainer.algo.nets[name]
        x = obs[:, g.agents, :g.obs_dim].reshape(-1, g.obs_dim)
        with torch.no_grad():
            expected = net.actor(net.normalize(x)).argmax(-1)
        assert torch.equal(actions[:, g.agents, 0].reshape(-1), expected), name
    # a sampling policy differs somewhere on the same observations (weights are far from uniform)
    sampled = gpurl.load_policy(run_dir, env=env)(obs)
    assert not torch.equal(sampled, actions)


@pytest.mark.parametrize("deterministic", [True, False])
def test_a_value_based_policy_acts_greedily(tmp_path, deterministic):
    trainer = write_checkpoint(tmp_path / "checkpoint.pt", env="simple_spread", algo="iql")
    env = gpurl.make("simple_spread", num_envs=4, seed=6, device="cpu")
    policy = gpurl.load_policy(tmp_path, env=env, deterministic=deterministic)
    obs = env.reset()
    net, g = trainer.algo.nets["agent"], env.groups["agent"]
    with torch.no_grad():
        expected = net(obs[:, g.agents, :g.obs_dim].reshape(-1, g.obs_dim)).argmax(-1)
    assert torch.equal(policy(obs)[..., 0].reshape(-1), expected)


def test_frame_stack_restarts_where_an_episode_begins(tmp_path):
    """frame_stack=2: the input is [obs_t, obs_t-1], the older frame zeroed at an episode start."""
    trainer = write_checkpoint(tmp_path / "checkpoint.pt", env="simple_spread", frame_stack=2)
    env = gpurl.make("simple_spread", num_envs=2, seed=1, device="cpu")
    policy = gpurl.load_policy(tmp_path, env=env, deterministic=True)
    net = trainer.algo.nets["agent"]
    first = env.reset().clone()
    second = first + 0.5
    policy(first)
    got = policy(second, starts=torch.tensor([False, True]))

    def argmax(stacked):
        with torch.no_grad():
            return net.actor(net.normalize(stacked.reshape(-1, stacked.shape[-1]))).argmax(-1).view(2, -1)

    expected = argmax(torch.cat([second, first * torch.tensor([1.0, 0.0]).view(2, 1, 1)], -1))
    assert torch.equal(got[..., 0], expected)
    assert not torch.equal(expected, argmax(torch.cat([second, first], -1)))  # the restart matters here


def test_untrained_groups_act_at_random_and_trained_ones_by_policy(tmp_path):
    write_checkpoint(tmp_path / "checkpoint.pt", train_groups=("adversary",))
    env = gpurl.make("simple_tag", num_envs=64, seed=2, device="cpu")
    policy = gpurl.load_policy(tmp_path, env=env, deterministic=True)
    obs = env.reset()
    a1, a2 = policy(obs).clone(), policy(obs).clone()
    adv, good = env.groups["adversary"].agents, env.groups["good"].agents
    assert torch.equal(a1[:, adv], a2[:, adv])  # deterministic on the same input
    assert not torch.equal(a1[:, good], a2[:, good])  # random draws
    assert set(a1[:, good].unique().tolist()) == set(range(5))


# ---- opponents ---------------------------------------------------------------------------------------


def test_a_lineup_takes_each_group_from_its_player(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    write_checkpoint(tmp_path / "a" / "checkpoint.pt", seed=1)
    write_checkpoint(tmp_path / "b" / "checkpoint.pt", seed=2)
    env = gpurl.make("simple_tag", num_envs=8, seed=2, device="cpu")
    a = gpurl.load_policy(tmp_path / "a", env=env, deterministic=True)
    b = gpurl.load_policy(tmp_path / "b", env=env, deterministic=True)
    obs = env.reset()
    mixed = Lineup(env, [(a, ["adversary"]), (b, ["good"])], seed=0)(obs)
    adv, good = env.groups["adversary"].agents, env.groups["good"].agents
    assert torch.equal(mixed[:, adv], a(obs)[:, adv])
    assert torch.equal(mixed[:, good], b(obs)[:, good])
    assert not torch.equal(a(obs)[:, good], b(obs)[:, good])  # the two runs differ, so the test can fail


def run_eval(*argv) -> dict:
    return eval_main([str(a) for a in argv] + ["--device", "cpu"], prog="gpurl eval")


def test_eval_with_an_opponent_reports_both_runs(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    write_checkpoint(tmp_path / "a" / "checkpoint.pt", seed=1, train_groups=("adversary",))
    write_checkpoint(tmp_path / "b" / "checkpoint.pt", seed=2, train_groups=("good",))
    result = run_eval(tmp_path / "a", "--opponent", tmp_path / "b", "--episodes", 4, "--no-random")
    assert result["opponent"]["groups"] == ["good"]
    assert result["episodes"] == 4 and result["random"] is None
    assert set(result["trained"]) == {"return/adversary", "return/good", "episode_length", "collisions_per_episode"}


# ---- refusals ------------------------------------------------------------------------------------------


def test_a_corrupt_checkpoint_is_refused_by_name(tag_run, tmp_path, capsys):
    data = (tag_run[0] / "checkpoint.pt").read_bytes()
    bad = tmp_path / "checkpoint.pt"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"checkpoint .*checkpoint.pt is truncated or corrupt"):
        gpurl.load_policy(bad)
    with pytest.raises(SystemExit) as exit_info:
        run_eval(tmp_path)
    assert exit_info.value.code == 2
    assert "truncated or corrupt" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CheckpointError, match="holds no checkpoint"):
        gpurl.load_policy(empty)


def test_a_checkpoint_of_another_env_is_refused(tag_run):
    env = gpurl.make("simple_spread", num_envs=2, device="cpu")
    with pytest.raises(CheckpointError, match="trained on env 'simple_tag'; this env is 'simple_spread'"):
        gpurl.load_policy(tag_run[0], env=env)


def test_observations_of_the_wrong_shape_are_refused(tag_run):
    policy = gpurl.load_policy(tag_run[0], device="cpu")
    with pytest.raises(ValueError, match=r"observations must be a float32 tensor \[num_envs, 4, 16\]"):
        policy(torch.zeros(3, 4, 15))
    with pytest.raises(ValueError, match="starts must be a bool tensor"):
        policy(torch.zeros(3, 4, 16), starts=torch.zeros(3))


def test_an_opponent_with_other_spaces_is_refused(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    write_checkpoint(tmp_path / "a" / "checkpoint.pt", train_groups=("adversary",))
    # two good agents: the adversaries see one more agent, so every group's observation is wider
    write_checkpoint(tmp_path / "b" / "checkpoint.pt", train_groups=("good",), env_params={"num_good": 2})
    with pytest.raises(SystemExit):
        run_eval(tmp_path / "a", "--opponent", tmp_path / "b", "--episodes", 2)
    err = capsys.readouterr().err
    assert "opponent" in err and "its group 'good' has obs_dim" in err
    (tmp_path / "c").mkdir()
    write_checkpoint(tmp_path / "c" / "checkpoint.pt", env="simple_spread")
    with pytest.raises(SystemExit):
        run_eval(tmp_path / "a", "--opponent", tmp_path / "c", "--episodes", 2)
    assert "was trained on env 'simple_spread'; this run's env is 'simple_tag'" in capsys.readouterr().err


def test_the_opponent_groups_must_be_named_when_both_runs_trained_them(tag_run, tmp_path, capsys):
    write_checkpoint(tmp_path / "checkpoint.pt", seed=3)
    with pytest.raises(SystemExit):
        run_eval(tag_run[0], "--opponent", tmp_path, "--episodes", 2)
    assert "--opponent-groups" in capsys.readouterr().err


# ---- the command, as a user runs it ---------------------------------------------------------------------


def test_gpurl_eval_prints_trained_and_random_and_draws_an_episode(tag_run, tmp_path):
    gif = tmp_path / "episode.gif"
    done = subprocess.run([sys.executable, "-m", "gpurl.cli", "eval", str(tag_run[0]), "--episodes", "3",
                           "--device", "cpu", "--render", str(gif), "--deterministic"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "trained (mean +- 95% CI)" in done.stdout and "random" in done.stdout
    result = json.loads(done.stdout.strip().splitlines()[-1].removeprefix("RESULT "))
    assert result["deterministic"] and result["episodes"] == 3
    assert result["random"]["episode_length"]["mean"] == 25.0
    assert gif.stat().st_size > 0 and result["episode_gif"] == str(gif)
