"""Declared envs (gpurl.envs.KernelEnv): what the toolkit builds from a declaration, and the errors a
declaration mistake gets, each naming the env and what is wrong, raised when the env is made.

The env here is a tiny two-group game written only against the public toolkit: a "runner" group walks
along a line, a "chaser" group follows; its phases run on the CPU build (compiled once, a few seconds).
"""
from __future__ import annotations

import dataclasses

import gymnasium
import numpy as np
import pytest
import torch

import gpurl
from gpurl.envs import KernelEnv, field
from gpurl.kernels import per_agent, per_env

pytestmark = pytest.mark.cpu


@dataclasses.dataclass(frozen=True)
class LineParams:
    num_chasers: int = 2
    length: int = 3


def line_move(e, i, s, c, actions):
    s.pos[e, i] += actions[e, i, 0] - 1  # actions 0, 1, 2: left, stay, right


def line_end(e, s, c, actions):
    s.timestep[e] += 1
    s.moves[e] = np.float32(s.timestep[e])
    s.terminated[e] = False
    s.truncated[e] = s.timestep[e] >= c.length


def line_reward_observe(e, i, s, c, actions):
    s.reward[e, i] = np.float32(s.pos[e, i])
    s.obs[e, i, 0] = np.float32(s.pos[e, i])


def line_start(e, i, s, c, actions):
    s.pos[e, i] = i + 10 * s.episode[e]  # the episode counter keys each new start


def line_clock(e, s, c, actions):
    s.timestep[e] = 0


class Line(KernelEnv):
    name = "line"
    params_type = LineParams
    state = {"pos": field("int32", "agents"), "timestep": field("int32")}
    metrics = ("moves",)
    step_phases = [per_agent(line_move), per_env(line_end), per_agent(line_reward_observe)]
    start_phases = [per_agent(line_start), per_env(line_clock), per_agent(line_reward_observe)]

    def groups(self):
        space = gymnasium.spaces.Discrete(3)
        chasers = self.params.num_chasers
        return {"runner": gpurl.Group(slice(0, 1), 1, space), "chaser": gpurl.Group(slice(1, 1 + chasers), 1, space)}

    def constants(self):
        return {"length": np.int32(self.params.length)}


def test_a_declared_env_steps_resets_and_autoresets():
    env = Line(num_envs=2, seed=0, num_chasers=2, length=2)
    assert env.num_agents == 3 and list(env.groups) == ["runner", "chaser"]
    assert [f.name for f in dataclasses.fields(env.state)] == ["pos", "timestep", "episode"]
    np.testing.assert_array_equal(env.reset().numpy()[:, :, 0], [[0, 1, 2], [0, 1, 2]])
    np.testing.assert_array_equal(env.state.episode.numpy(), [1, 1])
    # The default global state: every agent's observation (obs_dim 1 in both groups), in agent order.
    assert env.global_state_dim == 3 and env.global_state.dtype == torch.float32
    np.testing.assert_array_equal(env.global_state.numpy(), [[0, 1, 2], [0, 1, 2]])
    right = torch.full((2, 3), 2)
    obs, reward, term, trunc, info = env.step(right)
    np.testing.assert_array_equal(reward.numpy(), [[1, 2, 3], [1, 2, 3]])
    assert not trunc.any() and env.step_metrics()["moves"].tolist() == [1.0, 1.0]
    obs, reward, term, trunc, info = env.step(right)  # length 2: truncated, and restarted in the same call
    assert trunc.all()
    np.testing.assert_array_equal(info["final_obs"].numpy()[:, :, 0], [[2, 3, 4], [2, 3, 4]])
    np.testing.assert_array_equal(obs.numpy()[:, :, 0], [[10, 11, 12], [10, 11, 12]])  # episode 1's start
    np.testing.assert_array_equal(env.state.timestep.numpy(), [0, 0])
    np.testing.assert_array_equal(info["final_global_state"].numpy(), [[2, 3, 4], [2, 3, 4]])
    np.testing.assert_array_equal(env.global_state.numpy(), [[10, 11, 12], [10, 11, 12]])


def test_global_state_false_skips_the_default_state():
    """The toolkit's default state (agents' observations) is skipped too; everything else as with it."""
    off, on = Line(num_envs=2, num_chasers=2, length=2, global_state=False), Line(num_envs=2, num_chasers=2, length=2)
    assert off.global_state is None and off.global_state_dim == 3 and off._consts.write_global_state == 0
    assert off._arrays.global_state.shape == off._arrays.final_global_state.shape == (2, 0)
    np.testing.assert_array_equal(off.reset().numpy(), on.reset().numpy())
    right = torch.full((2, 3), 2)
    for t in range(3):  # the second step truncates and restarts every env
        got, want = off.step(right), on.step(right)
        assert list(got[4]) == ["final_obs"]
        for a, b in zip((*got[:4], got[4]["final_obs"]), (*want[:4], want[4]["final_obs"])):
            np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=f"step {t}")
    with pytest.raises(TypeError, match="global_state must be True or False, got str .no."):
        Line(num_envs=2, global_state="no")


def line_state(e, s, c, actions):
    """An own global state: [sum of positions, timestep, episode]."""
    total = 0
    for i in range(s.pos.shape[1]):
        total += s.pos[e, i]
    s.global_state[e, 0] = np.float32(total)
    s.global_state[e, 1] = np.float32(s.timestep[e])
    s.global_state[e, 2] = np.float32(s.episode[e])


class LineWithState(Line):
    name = "line_with_state"
    state_phases = [per_env(line_state)]

    def global_state_dim(self):
        return 3


def test_an_own_global_state_is_written_after_steps_and_starts():
    env = LineWithState(num_envs=2, seed=0, num_chasers=2, length=2, autoreset=True)
    assert env.global_state_dim == 3 and "global_state_layout" not in env._tensors
    env.reset()
    # Written after the start phases, before the episode is counted (episode 0 is being drawn).
    np.testing.assert_array_equal(env.global_state.numpy(), [[3, 0, 0], [3, 0, 0]])
    right = torch.full((2, 3), 2)
    env.step(right)
    np.testing.assert_array_equal(env.global_state.numpy(), [[6, 1, 1], [6, 1, 1]])
    _, _, _, trunc, info = env.step(right)
    assert trunc.all()
    np.testing.assert_array_equal(info["final_global_state"].numpy(), [[9, 2, 1], [9, 2, 1]])
    np.testing.assert_array_equal(env.global_state.numpy(), [[33, 0, 1], [33, 0, 1]])  # episode 1 starts


def test_ended_envs_wait_for_reset_without_autoreset():
    env = Line(num_envs=2, seed=0, autoreset=False, length=1)
    env.reset()
    right = torch.full((2, 3), 2)
    _, _, _, trunc, _ = env.step(right)
    assert trunc.all()
    _, reward, _, trunc, _ = env.step(right)  # ended: skipped, reward 0, metric 0, flags kept
    assert (reward == 0).all() and trunc.all() and (env.step_metrics()["moves"] == 0).all()
    np.testing.assert_array_equal(env.state.pos.numpy(), [[1, 2, 3], [1, 2, 3]])
    env.reset(mask=torch.tensor([True, False]))
    assert env.truncated.tolist() == [False, True]
    _, reward, _, _, _ = env.step(right)
    np.testing.assert_array_equal(reward.numpy(), [[11, 12, 13], [0, 0, 0]])


def _variant(**attrs):
    return type("Broken", (Line,), {"name": "broken", **attrs})


def _groups(*slices):
    space = gymnasium.spaces.Discrete(3)

    def groups(self):
        return {name: gpurl.Group(s, 1, space) for name, s in zip(("runner", "chaser", "third"), slices)}
    return groups


@pytest.mark.parametrize("slices, message", [
    ((slice(0, 2), slice(1, 3)), "broken groups 'runner' and 'chaser' overlap: agents 1..1 are in both"),
    ((slice(0, 1), slice(2, 3)), "broken: agents 1..1 are in no group (between groups 'runner' and 'chaser')"),
    ((slice(1, 3),), "broken: agents 0..0 are in no group (before group 'runner')"),
    ((slice(0, 1), slice(1, 1)), "broken group 'chaser' is empty"),
    ((slice(0, 3, 2),), "broken group 'runner': agents must be a slice(start, stop) with step 1"),
])
def test_group_slices_must_tile_the_agents(slices, message):
    with pytest.raises(ValueError) as info:
        _variant(groups=_groups(*slices))(num_envs=1)
    assert message in str(info.value)


@pytest.mark.parametrize("attrs, error, message", [
    (dict(state={"pos": field("int32", "nobody")}), ValueError,
     "field 'pos': dim 'nobody' is neither one of ['agents', 'obs'] nor an attribute of LineParams"),
    (dict(scratch={"obs": field("float32")}), ValueError, "broken declares ['obs']: these names are the toolkit's own"),
    (dict(constants=lambda self: {"length": 2.5}), TypeError,
     "broken.constants()['length'] = 2.5 is a float; kernel constants are NumPy scalars"),
    (dict(constants=lambda self: {"seed": np.uint64(1)}), ValueError, "returns ['seed']: these names are the toolkit's"),
    (dict(state={"pos": field("int32", "agents"), "timestep": field("int32"), "moves": field("int32")}), ValueError,
     "broken: metrics ['moves'] must be float32 fields of shape [num_envs]"),
    (dict(start_phases=[]), ValueError, "broken.start_phases is empty"),
    (dict(step_phases=[per_agent(line_move, when=line_move)]), ValueError, "line_move has when=..."),
    (dict(state_phases=[per_env(line_state)]), ValueError,
     "broken declares state_phases but no global_state_dim(): an env's own global state needs both"),
    (dict(global_state_dim=lambda self: 3), ValueError, "broken declares global_state_dim() but no state_phases"),
    (dict(state_phases=[per_env(line_state)], global_state_dim=lambda self: 0), ValueError,
     "broken.global_state_dim() must be >= 1, got 0"),
    (dict(state_phases=[per_env(line_state)], global_state_dim=lambda self: 3.0), TypeError,
     "broken.global_state_dim() must return an int, got 3.0"),
    (dict(state_phases=[per_env(line_state, when=line_state)], global_state_dim=lambda self: 3), ValueError,
     "line_state has when=..."),
])
def test_declaration_mistakes_are_named_when_the_env_is_made(attrs, error, message):
    with pytest.raises(error) as info:
        _variant(**attrs)(num_envs=1)
    assert message in str(info.value)


def test_unknown_parameters_and_bad_field_dtypes():
    with pytest.raises(TypeError, match=r"line got an unknown parameter 'chasers'; valid parameters: \['num_chasers'"):
        Line(num_envs=1, chasers=3)
    with pytest.raises(ValueError, match="field dtype must be one of"):
        field("float64", "agents")


def test_a_lanes_interleaved_field_is_stored_by_column_for_cuda_builds_only(monkeypatch):
    from gpurl.kernels import fields
    from gpurl.kernels.fields import Field

    scratch = Field("int32", fill=-1, lanes_interleaved=True)
    gpu = scratch.allocate((6, 4), "cpu", "cuda")
    assert gpu.shape == (6, 4) and gpu.stride() == (1, 6) and (gpu == -1).all()
    gpu[2, 3] = 7  # [row, col] indexing is unchanged; the memory holds column 3's rows together
    assert gpu.t().contiguous().view(-1)[3 * 6 + 2] == 7
    assert scratch.allocate((6, 4), "cpu", "cpu").is_contiguous()
    assert Field("int32").allocate((6, 4), "cpu", "cuda").is_contiguous()
    assert scratch.allocate((6,), "cpu", "cuda").shape == (6,)
    monkeypatch.setattr(fields, "INTERLEAVE_LANES", False)  # the row-major layout, for side-by-side timing
    assert scratch.allocate((6, 4), "cpu", "cuda").is_contiguous()


def test_kernel_launch_bounds_must_allow_the_largest_block():
    from gpurl.kernels.program import MAX_THREADS_PER_BLOCK, EnvKernel

    phases = [per_agent(lambda e, i, s, c, a: None)]
    assert EnvKernel("k", phases, 3, launch_bounds=(MAX_THREADS_PER_BLOCK, 2)).launch_bounds == (256, 2)
    assert EnvKernel("k", phases, 3).launch_bounds is None
    for bad in ((128, 4), (256, 0), (256, 2, 1), (256.5,)):
        with pytest.raises(ValueError, match="launch_bounds is"):
            EnvKernel("k", phases, 3, launch_bounds=bad)


def _one_agent_groups(*spaces):
    return {f"g{k}": gpurl.Group(slice(k, k + 1), 2, space) for k, space in enumerate(spaces)}


def test_action_layout_pads_narrower_box_groups_and_refuses_mixed_kinds():
    from gpurl.envs.spaces import action_layout

    box = lambda w: gymnasium.spaces.Box(0.0, 1.0, (w,), dtype=np.float32)  # noqa: E731
    # mpe2's speaker (3 message components) and listener (5 movement components): one [E, N, 5] tensor.
    assert action_layout(_one_agent_groups(box(3), box(5)), "speaker_listener") == (5, False)
    discrete = gymnasium.spaces.Discrete
    assert action_layout(_one_agent_groups(discrete(3), discrete(5)), "d") == (1, True)
    with pytest.raises(ValueError, match=r"mixed: groups \['g0'\] have integer actions and \['g1'\] Box"):
        action_layout(_one_agent_groups(discrete(3), box(5)), "mixed")
    with pytest.raises(ValueError, match="same number of action dims"):
        action_layout(_one_agent_groups(gymnasium.spaces.MultiDiscrete([2, 2]), discrete(5)), "md")
