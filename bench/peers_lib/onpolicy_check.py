"""Checks of :mod:`.onpolicy_mappo`'s env against mpe2's: their MPE env, made mpe2's task, played beside mpe2's from
the same states with the same actions, its rewards mapped to mpe2's. bench/learning_parity.py runs
:func:`check_reward_map` before it trains the MAPPO paper's code."""
from __future__ import annotations

import numpy as np

from .onpolicy_mappo import (LOCAL_RATIO, MOVE_TO_THEIRS, all_args, gpurl_agent_rewards, gpurl_group_rewards, groups,
                             import_onpolicy, make_env)


def _mpe2_env(scenario: str, args):
    import importlib

    if scenario == "simple_spread":
        module = importlib.import_module("mpe2.simple_spread_v3")
        return module.parallel_env(N=args.num_agents, local_ratio=LOCAL_RATIO, max_cycles=args.episode_length)
    module = importlib.import_module("mpe2.simple_speaker_listener_v4")
    return module.parallel_env(max_cycles=args.episode_length)


def _copy_state(src_world, dst_world) -> None:
    """mpe2's world state (positions, velocities, messages, the speaker's goal) into theirs."""
    for a, b in zip(src_world.agents, dst_world.agents):
        b.state.p_pos, b.state.p_vel = np.array(a.state.p_pos), np.array(a.state.p_vel)
        b.state.c = np.array(a.state.c)
    for a, b in zip(src_world.landmarks, dst_world.landmarks):
        b.state.p_pos, b.state.p_vel = np.array(a.state.p_pos), np.array(a.state.p_vel)
    speaker = src_world.agents[0]
    if getattr(speaker, "_goal_b", None) is not None:
        dst_world.agents[0].goal_b = dst_world.landmarks[src_world.landmarks.index(speaker._goal_b)]


def _their_action(env, i: int, a: int) -> np.ndarray:
    """mpe2's Discrete label ``a`` of agent ``i`` as their one-hot (moves relabelled)."""
    space = env.action_space[i]
    onehot = np.zeros(space.n)
    onehot[MOVE_TO_THEIRS[a] if env.agents[i].movable else a] = 1.0
    return onehot


def check_reward_map(scenario: str, steps: int = 100, seed: int = 0, path: str | None = None,
                     match_mpe2: bool = True, tol: float = 1e-9) -> dict:
    """Run their env and mpe2's from the same state with the same (random) actions for ``steps`` steps,
    copying mpe2's state into theirs at each reset; compare the converted rewards (team -> group mean, and
    per agent from ``individual_reward``), the observations and the episode ends. Returns the largest
    differences and the landmarks' largest |coordinate| over their resets; raises AssertionError where they
    exceed ``tol`` (with ``match_mpe2=False`` it only returns them: their integration order then differs)."""
    import_onpolicy(path)
    saved = np.random.get_state()  # their env draws from numpy's global generator
    try:
        return _check_reward_map(scenario, steps, seed, match_mpe2, tol)
    finally:
        np.random.set_state(saved)


def _check_reward_map(scenario: str, steps: int, seed: int, match_mpe2: bool, tol: float) -> dict:
    args = all_args(scenario)
    theirs, ref = make_env(args, match_mpe2), _mpe2_env(scenario, args)
    world = ref.aec_env.unwrapped.world
    names = ref.possible_agents
    rng = np.random.default_rng(seed)
    np.random.seed(seed)
    err = {"group_reward": 0.0, "agent_reward": 0.0, "obs": 0.0, "done": 0}
    ref.reset(seed=seed)
    theirs.reset()
    _copy_state(world, theirs.world)
    for _ in range(steps):
        labels = {n: int(rng.integers(ref.action_space(n).n)) for n in names}
        obs, rew, done, info = theirs.step([_their_action(theirs, i, labels[n]) for i, n in enumerate(names)])
        ref_obs, ref_rew, term, trunc, _ = ref.step(labels)
        mine = gpurl_group_rewards(scenario, np.array(rew)[None, :, 0])
        for g, idx in groups(scenario, len(names)).items():
            want = np.mean([ref_rew[names[i]] for i in idx])
            err["group_reward"] = max(err["group_reward"], float(abs(mine[g][0] - want)))
        agent = gpurl_agent_rewards(scenario, [i["individual_reward"] for i in info])
        err["agent_reward"] = max(err["agent_reward"],
                                  max(float(abs(agent[i] - ref_rew[n])) for i, n in enumerate(names)))
        err["obs"] = max(err["obs"], max(float(np.abs(np.float32(obs[i]) - ref_obs[n]).max())
                                         for i, n in enumerate(names)))
        ended = bool(trunc[names[0]] or term[names[0]])
        err["done"] += int(ended != bool(np.all(done)))
        if ended:
            ref.reset()
            theirs.reset()
            _copy_state(world, theirs.world)
    err["landmark_max_abs"] = _landmark_extent(theirs)
    if match_mpe2:
        bad = {k: v for k, v in err.items() if k != "landmark_max_abs" and v > tol}
        assert not bad, f"{scenario}: their env converted differs from mpe2's: {bad}"
        assert err["landmark_max_abs"] > 0.9, f"{scenario}: landmarks still drawn in 0.8 x U(-1, 1)^2"
    return err


def _landmark_extent(env, resets: int = 300) -> float:
    """The largest |coordinate| of any landmark over ``resets`` of their env (mpe2's U(-1, 1)^2 reaches ~1)."""
    top = 0.0
    for _ in range(resets):
        env.reset()
        top = max(top, max(float(np.abs(lm.state.p_pos).max()) for lm in env.world.landmarks))
    return top


if __name__ == "__main__":  # cd bench && ONPOLICY_PATH=/path/to/on-policy python -m peers_lib.onpolicy_check
    import json

    found = {scenario: check_reward_map(scenario) for scenario in ("simple_spread", "simple_speaker_listener")}
    print("RESULT " + json.dumps({"bench": "onpolicy_check", "largest_differences": found}, sort_keys=True,
                                 default=float))
