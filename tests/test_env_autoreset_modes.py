"""Episode ends with autoreset=True (same-step reset, final_obs) and autoreset=False (frozen until reset).

Ends are forced through the documented state injection: timestep = episode_length - 1 truncates in
the next step; one runner left with tagger 0 on top of it (both at rest, no-op actions) terminates.
"""
import numpy as np
import pytest
import torch

from gpurl.envs.tag_continuous.reference import observe_ref, reset_ref, step_ref

from tag_env_helpers import (STATE_KEYS, force_termination, force_truncation, noop_for, numpy_outputs, snapshot,
                             take_envs)
from tag_harness import make_small, random_actions

pytestmark = pytest.mark.cpu

E = 5
TRUNCATE = [1, 3]
TERMINATE = 2
# tagging radius 0.05 on L = 5: the forced tag is (for these seeds) the only one.
CONFIG = dict(num_envs=E, num_taggers=3, num_runners=5, tagging_distance=0.01, episode_length=20)


def _force_ends(env, gen):
    """Step once, then force ends in TRUNCATE and TERMINATE; return the actions for the next step."""
    env.step(random_actions(env, gen))
    force_truncation(env, TRUNCATE)
    runner = force_termination(env, TERMINATE)
    return noop_for(random_actions(env, gen), TERMINATE, [0, runner]), runner


def _assert_state(got, want, envs, where):
    for k in STATE_KEYS:
        if k in want:
            np.testing.assert_array_equal(got[k][envs], want[k][envs], err_msg=f"{where}: state.{k}")


@pytest.mark.parametrize("full", [True, False], ids=["full_obs", "k_nearest"])
def test_autoreset_same_step(full):
    env = make_small(use_full_observation=full, num_other_agents_observed=3, **CONFIG)
    p = env.params
    env.reset()
    gen = torch.Generator().manual_seed(0)
    actions, runner = _force_ends(env, gen)
    before = snapshot(env)
    ref = {k: v.copy() for k, v in before.items()}
    ref_obs, ref_reward, ref_term, ref_trunc = step_ref(p, ref, actions.numpy())

    obs, reward, terminated, truncated, info = env.step(actions)
    obs, reward, terminated, truncated = numpy_outputs(obs, reward, terminated, truncated)
    after = snapshot(env)
    ended = np.zeros(E, bool)
    ended[TRUNCATE + [TERMINATE]] = True
    others = ~ended

    want_trunc = np.zeros(E, bool)
    want_trunc[TRUNCATE] = True
    want_term = np.zeros(E, bool)
    want_term[TERMINATE] = True
    np.testing.assert_array_equal(truncated, want_trunc)
    np.testing.assert_array_equal(terminated, want_term)
    np.testing.assert_array_equal(ref_trunc, want_trunc)  # the reference agrees the ends were forced
    np.testing.assert_array_equal(ref_term, want_term)

    # The rewards are the final step's, ends included (bonus, tag), by hand and by the reference.
    np.testing.assert_array_equal(reward, ref_reward)
    assert reward[TERMINATE, 0] == np.float32(p.tag_reward_for_tagger)
    assert reward[TERMINATE, runner] == np.float32(p.tag_penalty_for_runner)  # tagged: no end bonus
    for e in TRUNCATE:
        alive_runners = ref["alive"][e, p.num_taggers:] == 1
        np.testing.assert_array_equal(reward[e, p.num_taggers:][alive_runners],
                                      np.float32(p.end_of_game_reward_for_runner))

    # final_obs holds the last obs of the finished episodes.
    final_obs = info["final_obs"].numpy()
    np.testing.assert_array_equal(final_obs[ended], ref_obs[ended])
    in_game = before["alive"][TRUNCATE] == 1  # at observation time (before this step's tags)
    assert (final_obs[TRUNCATE][:, :, -1][in_game] == np.float32(1.0)).all()  # timestep / episode_length

    # The finished envs start a new episode: the reference draw of their next episode.
    fresh = reset_ref(p, E, env.seed, before["episode"])
    _assert_state(after, fresh, ended, "new episode")
    np.testing.assert_array_equal(after["timestep"][ended], 0)
    np.testing.assert_array_equal(after["episode"], before["episode"] + ended)
    np.testing.assert_array_equal(obs[ended], observe_ref(p, fresh)[ended])
    assert (obs[ended][:, :, -1] == 0).all()

    # The other envs just stepped.
    _assert_state(after, ref, others, "continuing envs")
    np.testing.assert_array_equal(obs[others], ref_obs[others])
    np.testing.assert_array_equal(after["timestep"][others], 2)

    # And everything keeps stepping next time.
    obs2, *_ = env.step(random_actions(env, gen))
    np.testing.assert_array_equal(env.state.timestep.numpy(), np.where(ended, 1, 3))


def test_no_autoreset_freezes_finished_envs_until_masked_reset():
    env = make_small(autoreset=False, **CONFIG)
    p = env.params
    env.reset()
    gen = torch.Generator().manual_seed(1)
    actions, runner = _force_ends(env, gen)
    obs, reward, terminated, truncated, info = env.step(actions)
    assert "final_obs" not in info
    ended = np.zeros(E, bool)
    ended[TRUNCATE + [TERMINATE]] = True
    live = np.flatnonzero(~ended)
    np.testing.assert_array_equal(truncated.numpy(), np.isin(np.arange(E), TRUNCATE))
    np.testing.assert_array_equal(terminated.numpy(), np.arange(E) == TERMINATE)
    assert reward[TERMINATE, 0] == np.float32(p.tag_reward_for_tagger)  # the final step is still rewarded
    frozen_state = snapshot(env)
    frozen_obs = obs.numpy()[ended].copy()
    flags = (terminated.clone(), truncated.clone())

    for t in range(3):
        before = snapshot(env)
        actions = random_actions(env, gen)  # finished envs get moving actions too: they must be ignored
        ref = take_envs(before, live)
        ref_obs, ref_reward, ref_term, ref_trunc = step_ref(p, ref, actions.numpy()[live])
        obs, reward, terminated, truncated, info = env.step(actions)
        after = snapshot(env)
        where = f"step {t} after the end"
        _assert_state(after, frozen_state, ended, where + " (frozen)")
        np.testing.assert_array_equal(obs.numpy()[ended], frozen_obs, err_msg=where)
        np.testing.assert_array_equal(reward.numpy()[ended], 0, err_msg=where)
        assert torch.equal(terminated[ended], flags[0][ended]) and torch.equal(truncated[ended], flags[1][ended])
        # the live envs step as the reference says
        _assert_state(take_envs(after, live), ref, slice(None), where + " (live)")
        np.testing.assert_array_equal(obs.numpy()[live], ref_obs, err_msg=where)
        np.testing.assert_array_equal(reward.numpy()[live], ref_reward, err_msg=where)
        np.testing.assert_array_equal(terminated.numpy()[live], ref_term)
        np.testing.assert_array_equal(truncated.numpy()[live], ref_trunc)
        assert "final_obs" not in info

    # reset(mask) resets only the masked env and clears only its flags.
    before = snapshot(env)
    before_obs = env.obs.clone()
    before_reward = env.reward.clone()
    e = TRUNCATE[0]
    mask = torch.zeros(E, dtype=torch.bool)
    mask[e] = True
    obs = env.reset(mask=mask)
    after = snapshot(env)
    untouched = np.arange(E) != e
    _assert_state(after, before, untouched, "masked reset: others")
    assert torch.equal(obs[untouched], before_obs[untouched])
    assert torch.equal(env.reward, before_reward)
    fresh = reset_ref(p, E, env.seed, before["episode"])
    _assert_state(after, fresh, [e], "masked reset: reset env")
    np.testing.assert_array_equal(obs[e].numpy(), observe_ref(p, fresh)[e])
    assert not env.truncated[e] and not env.terminated[e]
    assert env.truncated[TRUNCATE[1]] and env.terminated[TERMINATE]

    # Now env e steps again while the others that ended stay frozen.
    still = snapshot(env)
    env.step(random_actions(env, gen))
    assert env.state.timestep[e] == 1
    frozen = np.array(sorted(set(TRUNCATE[1:] + [TERMINATE])))
    _assert_state(snapshot(env), still, frozen, "still frozen")
    assert (env.reward[frozen] == 0).all()

    # A full reset brings everyone back.
    env.reset()
    assert not env.terminated.any() and not env.truncated.any()
    assert (env.state.timestep == 0).all()
    env.step(random_actions(env, gen))
    assert (env.state.timestep == 1).all()
