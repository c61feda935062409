"""gpurl.render: episodes of the built-in envs drawn into GIFs, tags marked, trained-policy episodes,
clear errors. Frame counts and states are checked against the env stepped directly (the reference)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("matplotlib")
from PIL import Image  # noqa: E402

import gpurl  # noqa: E402
from gpurl.render import record_episode, render_random_episode, save_animation, snapshot  # noqa: E402
from gpurl.train.config import build_config  # noqa: E402
from gpurl.train.trainer import Trainer  # noqa: E402

pytestmark = pytest.mark.cpu

TAG = dict(num_taggers=2, num_runners=3, grid_length=4.0, episode_length=12, use_full_observation=False,
           num_other_agents_observed=3, tagging_distance=0.05)


def gif_frames(path) -> int:
    with Image.open(path) as im:
        return im.n_frames


@pytest.mark.parametrize("name, params, length", [
    ("tag_continuous", TAG, 12),
    ("simple_tag", dict(max_cycles=9), 9),
    ("tag_gridworld", dict(num_taggers=2, grid_length=30, episode_length=10), 10),
], ids=["tag_continuous", "simple_tag", "tag_gridworld"])
def test_random_episode_gif_has_a_frame_per_step(tmp_path, name, params, length):
    path = render_random_episode(name, tmp_path / f"{name}.gif", seed=3, **params)
    frames = gif_frames(path)
    # reset frame + one per step; an episode may end early (all runners tagged, the runner caught)
    assert 2 <= frames <= length + 1
    if name == "simple_tag":  # never terminates by default: always the full max_cycles
        assert frames == length + 1
    assert [p.name for p in tmp_path.iterdir()] == [f"{name}.gif"]  # no temporary file left behind


def test_record_episode_follows_the_env_to_its_end():
    """Frames are env 0's state after reset and after every step until truncation, as stepping by hand."""
    env = gpurl.make("tag_gridworld", num_envs=2, device="cpu", seed=1, autoreset=False, num_taggers=2,
                     grid_length=40, episode_length=7)
    twin = gpurl.make("tag_gridworld", num_envs=2, device="cpu", seed=1, autoreset=False, num_taggers=2,
                      grid_length=40, episode_length=7)
    env.reset(), twin.reset()
    actions = torch.ones(2, 3, dtype=torch.int64)  # everyone moves x+1
    frames = record_episode(env, lambda: env.step(actions))
    expected = [(twin.state.x[0].clone(), twin.state.timestep[0].item())]
    for _ in range(len(frames) - 1):
        _, _, terminated, truncated, _ = twin.step(actions)
        expected.append((twin.state.x[0].clone(), twin.state.timestep[0].item()))
    assert bool(terminated[0] or truncated[0])
    assert len(frames) <= 8
    for frame, (x, timestep) in zip(frames, expected):
        np.testing.assert_array_equal(frame["x"], x.numpy())
        assert frame["timestep"] == timestep
    assert "reward" in frames[1] and frames[1]["reward"].shape == (3,)


def test_a_tag_is_marked_in_the_frame_it_happens():
    """Runner 3 leaves the game between frames 1 and 2: the drawer adds a 'tagged' marker at its place."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    env = gpurl.make("tag_continuous", num_envs=1, device="cpu", seed=0, **TAG)
    env.reset()
    frames = [snapshot(env) for _ in range(3)]
    frames[2]["alive"] = frames[2]["alive"].copy()
    frames[2]["alive"][3] = 0
    draw = type(env).draw_frame  # each env's drawer lives with the env (gpurl/envs/tag_continuous/draw.py)
    fig, ax = plt.subplots()
    draw(ax, env, frames, 1)
    assert "tagged" not in ax.get_legend_handles_labels()[1]
    ax.clear()
    draw(ax, env, frames, 2)
    handles, labels = ax.get_legend_handles_labels()
    tagged = handles[labels.index("tagged")]
    np.testing.assert_allclose(tagged.get_offsets(), [[frames[2]["x"][3], frames[2]["y"][3]]])
    plt.close(fig)


def test_trained_policy_episode_is_drawn(tmp_path):
    cfg = build_config(env="tag_continuous", env_params=TAG, num_envs=4, rollout_len=8, iters=1, eval_episodes=0,
                       frame_stack=2, device="cpu", log_dir=str(tmp_path), progress=False,
                       policy_backend="eager", learner_backend="eager")
    trainer = Trainer(cfg)
    trainer.iterate()
    env, frames = trainer.record_episode(seed=9)
    assert env.num_envs == 1 and 2 <= len(frames) <= TAG["episode_length"] + 1
    assert [f["timestep"].item() for f in frames] == list(range(len(frames)))
    path = save_animation(env, frames, tmp_path / "final.gif", title="trained")
    assert gif_frames(path) == len(frames)


def test_bad_requests_are_named(tmp_path):
    env = gpurl.make("tag_gridworld", num_envs=1, device="cpu", num_taggers=1, grid_length=5)
    env.reset()
    frames = [snapshot(env)]
    with pytest.raises(ValueError, match=r"\.gif or \.mp4"):
        save_animation(env, frames, tmp_path / "x.png")

    class Unknown:
        pass

    with pytest.raises(TypeError, match="no drawer for Unknown"):
        save_animation(Unknown(), frames, tmp_path / "x.gif")
    assert not any(tmp_path.iterdir())
