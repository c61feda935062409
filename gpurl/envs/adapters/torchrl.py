"""``GpurlTorchRLEnv``: a batched gpurl env as a TorchRL ``EnvBase``, one TensorDict entry per agent group.

    from gpurl.envs.adapters import torchrl_env
    env = torchrl_env("simple_tag", num_envs=1024, device="cuda", max_cycles=25)
    data = env.rollout(100)                  # data["adversary", "observation"]: [1024, 100, 3, 16]

The layout follows TorchRL's ``VmasEnv`` (agents grouped, one nested TensorDict per group) with the per-group
done flags of its ``PettingZooWrapper``; ``batch_size`` is ``[E]`` (E = ``num_envs``), n is the group's agent
count:

- ``(group, "observation")``: float32 [E, n, group obs_dim], the group's rows of gpurl's obs [E, N, obs_dim]
  cut to its own obs_dim (the zero padding is dropped);
- ``(group, "action")``: Discrete: int64 [E, n] (``Categorical``) or one-hot [E, n, k] (``OneHot``,
  ``categorical_actions=False``); MultiDiscrete: int64 [E, n, dims] (``MultiCategorical``) or [E, n, sum(nvec)]
  (``MultiOneHot``); Box: float32 [E, n, dims] (``Bounded``);
- ``(group, "reward")``: float32 [E, n, 1];
- ``(group, "done" | "terminated" | "truncated")``: bool [E, n, 1] (gpurl ends whole envs: the env's flags
  repeated for each agent, the shape TorchRL's GAE wants beside the group's reward);
- ``"done" | "terminated" | "truncated"``: bool [E, 1]; ``"state"``: float32 [E, S], gpurl's global state
  (docs/specs/global_state.md), when the env writes one (``global_state=True``, gpurl's default).

Episodes: the gpurl env is made with ``autoreset=False``. A step reports an ended env's last observation in
``("next", group, "observation")`` and its flags; TorchRL then calls ``_reset`` with a ``"_reset"`` mask (its
collectors and ``rollout`` do so in ``step_and_maybe_reset``) and gpurl restarts exactly those envs
(``env.reset(mask=...)``). gpurl's ``autoreset=True`` plus ``final_obs`` would fit TorchRL only through its
auto-reset API, which puts NaN where the last observation goes (the value of a truncated episode's last state
is then lost), or through a ``torch.where(done, final_obs, obs)`` over every observation of every step and a
``_reset`` that hands back observations it kept from the step; with ``autoreset=False`` every TorchRL tool
(``check_env_specs``, ``rollout``, the collectors) works unchanged and a step copies nothing.

An env that ended and was not reset is frozen by gpurl (its state unchanged, reward 0, its flags kept). With
``validate=True`` (gpurl's default; one device read per step) stepping one is a ValueError, unless TorchRL's
``"_step"`` mask leaves it out; with ``validate=False`` it is stepped frozen and its rows of that step's
observations (and global state) are not written: their values are unspecified until its reset.

Copies (all on the device; nothing goes to the host):

- a step copies no observation, reward or global state: TorchRL keeps every step's TensorDict until a rollout
  or a collector's batch is stacked, so the env's own buffers (rewritten in place by the next step) cannot be
  handed out, and copying them would cost a pass per step; instead the kernel writes each step's results
  straight into tensors allocated for that step (gpurl's ``step(out=StepOutputs(...))``) and the TensorDict
  holds views of them (a group's observation is a strided view of the step's [E, N, obs_dim] tensor, its
  reward a view of the step's [E, N] rewards);
- a reset makes one new [E, N, obs_dim] observation tensor (and [E, S] global state): a copy of the env's
  buffers for a full reset, ``torch.where(mask, reset rows, the latest rows)`` for a partial one. gpurl's reset
  writes into the env's own buffers, TorchRL keeps the reset observation (the next step's
  ``(group, "observation")``), and the next reset rewrites those buffers;
- the done flags are new small tensors (``done = terminated | truncated``, bool [E]; per agent [E, N, 1], the
  groups' [E, n, 1] are slices of it); a step's terminated/truncated start as a copy of the last ones
  (bool [E]), so a frozen env keeps reporting its end;
- actions of an env with several groups (or one-hot actions) are gathered into one [E, N, action_dims] buffer
  (gpurl steps all agents with one tensor); a one-group env's categorical or Box actions go to gpurl as they are.
"""
from __future__ import annotations

import gymnasium
import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Bounded, Categorical, Composite, MultiCategorical, MultiOneHot, OneHot, Unbounded
from torchrl.envs import EnvBase

from ..checks import check_seed
from ..spaces import action_bounds
from ..step_inputs import StepOutputs
from ._common import check_open, is_discrete

DONE_KEYS = ("done", "terminated", "truncated")
# A TensorDict without checking each entry's shape and device (the entries are this module's own views, of the
# shapes the specs declare): what TorchRL's own env wrappers build their steps with; a plain TensorDict where a
# tensordict release has no such constructor.
_new_tensordict = getattr(TensorDict, "_new_unsafe", TensorDict)


def agent_names(env) -> dict[str, list[str]]:
    """TorchRL's ``group_map``: group -> agent names ``f"{prefix}_{k}"``, prefix from the env's own
    ``agent_prefixes`` (mpe2's names for the MPE envs) or the group name."""
    prefixes = getattr(env, "agent_prefixes", None) or {}
    return {name: [f"{prefixes.get(name, name)}_{k}" for k in range(g.agents.stop - g.agents.start)]
            for name, g in env.groups.items()}


def action_spec(space: gymnasium.Space, n: int, categorical: bool, device):
    """The TorchRL spec of n agents' actions in ``space`` (VmasEnv's mapping; shapes without the env axis)."""
    if isinstance(space, gymnasium.spaces.Discrete):
        if categorical:
            return Categorical(int(space.n), shape=(n,), dtype=torch.int64, device=device)
        return OneHot(int(space.n), shape=(n, int(space.n)), dtype=torch.int64, device=device)
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        sizes = [int(k) for k in space.nvec]  # the space's own numpy vector: no tensor is read
        if categorical:
            nvec = torch.tensor(sizes, dtype=torch.int64).expand(n, -1)
            return MultiCategorical(nvec, shape=(n, len(sizes)), dtype=torch.int64, device=device)
        return MultiOneHot(sizes, shape=(n, sum(sizes)), dtype=torch.int64, device=device)
    low = torch.tensor(np.broadcast_to(space.low, (n, *space.shape)), dtype=torch.float32)
    high = torch.tensor(np.broadcast_to(space.high, (n, *space.shape)), dtype=torch.float32)
    if low.isinf().all() and high.isinf().all():
        return Unbounded((n, *space.shape), dtype=torch.float32, device=device)
    return Bounded(low, high, (n, *space.shape), dtype=torch.float32, device=device)


def flag_spec(shape: tuple, device) -> Composite:
    return Composite({key: Categorical(2, shape=shape, dtype=torch.bool, device=device) for key in DONE_KEYS},
                     shape=shape[:-1])


class GpurlTorchRLEnv(EnvBase):
    """A gpurl env (made with ``autoreset=False``) as a TorchRL env of ``batch_size [num_envs]``; see the module
    docstring for the TensorDict layout, the episode handling and the copies it makes.

    ``categorical_actions``: Discrete/MultiDiscrete groups take index actions (``Categorical`` /
    ``MultiCategorical``, TorchRL's and VmasEnv's default) or one-hot ones (``OneHot`` / ``MultiOneHot``).
    ``group_map`` (group -> agent names) is VmasEnv's attribute of that name. ``set_seed(s)`` re-keys the env at
    its next reset: a full reset then starts what ``gpurl.make(..., seed=s)`` starts. The adapter owns the env
    from here on: stepping or resetting it directly desynchronises both. After ``close()``, ``reset``, ``step``
    (and so ``rand_step``, ``rollout``) and ``set_seed`` are a RuntimeError, as in the other adapters.
    """

    def __init__(self, env, *, categorical_actions: bool = True):
        if env.autoreset:
            raise ValueError("GpurlTorchRLEnv needs a gpurl env made with autoreset=False (TorchRL resets ended "
                             "envs through _reset); got autoreset=True")
        super().__init__(device=env.device, batch_size=torch.Size([env.num_envs]))
        self.env = env
        # Our own flag: TorchRL's is_closed starts True for an EnvBase that holds nothing to close.
        self.closed = False
        self.categorical_actions = bool(categorical_actions)
        self.group_map = agent_names(env)
        self._sizes = {name: g.agents.stop - g.agents.start for name, g in env.groups.items()}
        self._make_specs()
        self._action_rules = {name: self._action_rule(name) for name in env.groups}
        # Root keys of a step's input besides the groups' (an unknown group carrying actions is an error).
        self._known_keys = {*env.groups, *DONE_KEYS, "state", "_reset", "_step"}
        E, N = env.num_envs, env.num_agents
        self._pending_seed: int | None = None
        # The latest observations float32 [E, N, obs_dim] and global state [E, S] of every env (the last step's
        # tensors, or a reset's): a partial reset fills the rows of the envs it does not restart from them.
        self._obs = torch.zeros(E, N, env.obs_dim, device=env.device)
        self._state = None
        # gpurl's view of each env's end: the last step's flags, cleared where a reset restarted the env.
        self._terminated = torch.zeros(E, dtype=torch.bool, device=env.device)
        self._truncated = torch.zeros(E, dtype=torch.bool, device=env.device)
        # All agents' actions in one step, [E, N, D]; a narrower Box group's columns after its own stay 0.
        self._actions = torch.zeros(E, N, env.action_dims, dtype=env.action_dtype, device=env.device)
        # One group's index or Box actions are already gpurl's [E, N, action_dims]: no gather.
        spaces = [g.action_space for g in env.groups.values()]
        self._direct_actions = len(spaces) == 1 and (self.categorical_actions or not is_discrete(spaces[0]))

    # ---- specs -----------------------------------------------------------------------------------

    def _make_specs(self) -> None:
        env, device = self.env, self.env.device
        observation = Composite(device=device)
        actions, rewards = Composite(device=device), Composite(device=device)
        done = flag_spec((1,), device)
        for name, g in env.groups.items():
            n = self._sizes[name]
            observation[name] = Composite(
                observation=Unbounded((n, g.obs_dim), dtype=torch.float32, device=device), shape=(n,))
            actions[name] = Composite(action=action_spec(g.action_space, n, self.categorical_actions, device),
                                      shape=(n,))
            rewards[name] = Composite(reward=Unbounded((n, 1), dtype=torch.float32, device=device), shape=(n,))
            done[name] = flag_spec((n, 1), device)
        if env.global_state is not None:
            observation["state"] = Unbounded((env.global_state_dim,), dtype=torch.float32, device=device)
        self.full_observation_spec_unbatched = observation
        self.full_action_spec_unbatched = actions
        self.full_reward_spec_unbatched = rewards
        self.full_done_spec_unbatched = done

    # ---- EnvBase ---------------------------------------------------------------------------------

    def _set_seed(self, seed: int | None) -> None:
        check_open(self)
        if seed is not None:
            self._pending_seed = check_seed(seed)  # [0, 2**64): refused here, not at the next reset

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        """Reset the envs of the ``"_reset"`` entries of ``tensordict`` (root [E, 1] or per group [E, n, 1]: an
        env restarts when any is true), or every env when there is none. Every row of the result is right: a
        restarted env's first observation, the others' current one (TorchRL takes them all when only a group's
        ``"_reset"`` is given)."""
        check_open(self)
        mask = self._reset_mask(tensordict)
        env = self.env
        obs = env.reset(seed=self._pending_seed, mask=mask)
        self._pending_seed = None
        state = env.global_state
        # New tensors, never views of the env's buffers: TorchRL keeps the reset observation (the next step's
        # (group, "observation")) while the next reset rewrites those buffers.
        if mask is None:
            self._obs = obs.clone()
            self._state = None if state is None else state.clone()
            self._terminated = torch.zeros_like(self._terminated)
            self._truncated = torch.zeros_like(self._truncated)
        else:
            self._obs = torch.where(mask.view(-1, 1, 1), obs, self._obs)
            self._state = None if state is None else torch.where(mask.view(-1, 1), state, self._state)
            self._terminated = self._terminated & ~mask
            self._truncated = self._truncated & ~mask
        return self._tensordict(self._obs, None, self._terminated, self._truncated, self._state)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        check_open(self)
        actions = self._gathered_actions(tensordict)
        if self.env.validate:
            self._check_not_ended(tensordict.get("_step", None))
        env = self.env
        E, N, D = env.num_envs, env.num_agents, env.obs_dim
        empty = lambda *shape: torch.empty(shape, dtype=torch.float32, device=env.device)  # noqa: E731
        # The kernel writes this step's results into tensors of their own (see the module docstring); a frozen
        # env's flags are not rewritten, so they start as the last ones.
        out = StepOutputs(obs=empty(E, N, D), reward=empty(E, N), terminated=self._terminated.clone(),
                          truncated=self._truncated.clone(), final_obs=env.final_obs,
                          global_state=None if env.global_state is None else empty(E, env.global_state_dim))
        obs, reward, terminated, truncated, _ = env.step(actions, out=out)
        self._obs, self._state = obs, out.global_state
        self._terminated, self._truncated = terminated, truncated
        return self._tensordict(obs, reward, terminated, truncated, out.global_state)

    def _tensordict(self, obs: torch.Tensor, reward: torch.Tensor | None, terminated: torch.Tensor,
                    truncated: torch.Tensor, state: torch.Tensor | None) -> TensorDictBase:
        """The TensorDict of the module docstring, of views of obs float32 [E, N, obs_dim], rewards [E, N] (None
        at a reset), flags bool [E] and the global state [E, S] (or None)."""
        E, N = self.env.num_envs, self.env.num_agents
        flags = dict(done=terminated | truncated, terminated=terminated, truncated=truncated)
        # Each flag once for all agents, bool [E, N, 1], the three in one copy: the groups take slices of it.
        per_agent = torch.stack(tuple(flags.values())).view(3, E, 1, 1).expand(3, E, N, 1).contiguous()
        source = {key: flag.unsqueeze(-1) for key, flag in flags.items()}
        for name, g in self.env.groups.items():
            group = {key: per_agent[k, :, g.agents] for k, key in enumerate(flags)}
            group["observation"] = obs[:, g.agents, :g.obs_dim]
            if reward is not None:
                group["reward"] = reward[:, g.agents].unsqueeze(-1)
            source[name] = _new_tensordict(group, batch_size=(E, self._sizes[name]), device=self.device)
        if state is not None:
            source["state"] = state
        return _new_tensordict(source, batch_size=self.batch_size, device=self.device)

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Release the gpurl env (it holds no OS resources: dropping the reference frees its buffers); a later
        ``reset``/``step``/``set_seed`` is a RuntimeError. Closing twice is harmless."""
        self.env = None
        self.closed = True
        super().close(raise_if_closed=raise_if_closed)

    def to(self, device) -> "GpurlTorchRLEnv":
        """The env itself: it lives on the device gpurl built it for, and moving it elsewhere is a ValueError
        (make it there: ``torchrl_env(..., device=...)``)."""
        wanted = torch.device(device)
        if wanted.type != self.device.type or wanted.index not in (None, self.device.index):
            raise ValueError(f"a GpurlTorchRLEnv stays on the device its gpurl env was made on ({self.device}); "
                             f"cannot move it to {wanted}: make the env there (torchrl_env(..., device=...))")
        return self

    # ---- inputs ----------------------------------------------------------------------------------

    def _reset_mask(self, tensordict: TensorDictBase | None) -> torch.Tensor | None:
        """bool [E] of the envs to reset, or None (all) when ``tensordict`` has no ``"_reset"`` entry; each entry
        checked first (``_check_reset_entry``), so a wrong one changes nothing."""
        if tensordict is None:
            return None
        E = self.env.num_envs
        keys = ["_reset"] + [(name, "_reset") for name in self.env.groups]
        given = {key: tensordict.get(key, None) for key in keys}
        given = {key: m for key, m in given.items() if m is not None}
        for key, m in given.items():
            self._check_reset_entry(key, m)
        masks = [m.reshape(E, -1).any(-1) for m in given.values()]
        if not masks:
            return None
        mask = masks[0]
        for other in masks[1:]:
            mask = mask | other
        return mask

    def _check_reset_entry(self, key, mask) -> None:
        """TypeError (not a tensor, not bool) or ValueError (shape, device, layout) naming ``key`` unless ``mask``
        is a bool tensor of TorchRL's done shape on the env's device: root ``"_reset"`` [E, 1] (or [E]), a group's
        [E, n, 1] (or [E, n]). TorchRL itself would fail only after the env has reset (a float mask indexes its
        done check), or read a wrong shape as another mask. Host metadata only: no device read."""
        E = self.env.num_envs
        batch = (E,) if key == "_reset" else (E, self._sizes[key[0]])
        named = repr(key)
        expected = (f"a torch.bool tensor of shape {(*batch, 1)} (TorchRL's done shape: batch {batch} + 1; {batch} "
                    f"is accepted too) on {self.env.device}")
        if not isinstance(mask, torch.Tensor):
            raise TypeError(f"{named} must be {expected}, got {type(mask).__name__}")
        got = f"got dtype {mask.dtype}, shape {tuple(mask.shape)} on {mask.device}"
        if mask.dtype != torch.bool:
            raise TypeError(f"{named} (the envs to reset) must be {expected}; {got}")
        if (tuple(mask.shape) not in ((*batch, 1), batch) or mask.device != self._actions.device
                or mask.layout != torch.strided):
            raise ValueError(f"{named} (the envs to reset) must be {expected}; {got}"
                             + ("" if mask.layout == torch.strided else f", layout {mask.layout}"))

    def _gathered_actions(self, tensordict: TensorDictBase) -> torch.Tensor:
        """The groups' actions as gpurl's [E, N, action_dims], checked before anything changes (ValueError or
        TypeError naming the group, the expected and the received)."""
        groups = self.env.groups
        sent = {name: tensordict.get((name, "action"), None) for name in groups}
        extra = [key for key in tensordict.keys() if key not in self._known_keys]
        if any(action is None for action in sent.values()) or any(self._carries_action(tensordict, key)
                                                                  for key in extra):
            missing = [name for name, action in sent.items() if action is None]
            unknown = sorted(key for key in extra if self._carries_action(tensordict, key))
            raise ValueError(f"the input tensordict must hold (group, 'action') for each group {list(groups)}; "
                             f"missing {missing}, unknown group(s) {unknown}")
        checked = {name: self._checked_action(name, action) for name, action in sent.items()}
        if self._direct_actions:
            return next(iter(checked.values()))
        for name, action in checked.items():
            g = groups[name]
            self._actions[:, g.agents, :action.shape[-1]] = action
        return self._actions

    @staticmethod
    def _carries_action(tensordict: TensorDictBase, key) -> bool:
        value = tensordict.get(key)
        return isinstance(value, TensorDictBase) and "action" in value.keys()

    def _action_rule(self, name: str) -> tuple:
        """What :meth:`_checked_action` checks group ``name``'s action against, read from the specs once (indexing
        a TorchRL spec costs tens of microseconds): (spec, space, expected shape, dims per agent)."""
        spec = self.full_action_spec_unbatched[name, "action"]
        space = self.env.groups[name].action_space
        return spec, space, (self.env.num_envs, *spec.shape), action_bounds(space)[0] if is_discrete(space) else 0

    def _checked_action(self, name: str, action) -> torch.Tensor:
        """Group ``name``'s action as [E, n, dims] int64/float32 on the env's device (categorical for one-hot)."""
        E, n = self.env.num_envs, self._sizes[name]
        spec, space, expected, dims = self._action_rules[name]
        if not isinstance(action, torch.Tensor):
            raise TypeError(f"({name!r}, 'action') must be a torch.Tensor, got {type(action).__name__}")
        if tuple(action.shape) != expected:
            raise ValueError(f"({name!r}, 'action') must have shape {expected} [num_envs, {n} agents"
                             f"{'' if len(spec.shape) == 1 else ', ' + str(spec.shape[-1])}] for {space} "
                             f"({type(spec).__name__}), got {tuple(action.shape)}")
        if action.device != self._actions.device:
            raise ValueError(f"({name!r}, 'action') must be on {self.env.device}, got {action.device}")
        if not is_discrete(space):
            if action.dtype != torch.float32:
                raise TypeError(f"({name!r}, 'action') must have dtype torch.float32 for {space}, got {action.dtype}")
            return action
        if action.dtype.is_floating_point or action.dtype.is_complex:
            raise TypeError(f"({name!r}, 'action') must have an integer dtype for {space}, got {action.dtype}")
        if isinstance(spec, (OneHot, MultiOneHot)):
            if self.env.validate and not spec.is_in(action.long()):  # host-ok: validate=True reads the device
                raise ValueError(f"({name!r}, 'action') must be one-hot ({type(spec).__name__} {space}): one 1 "
                                 "per action dimension")
            action = spec.to_categorical(action.long())
        return action.reshape(E, n, dims)

    def _check_not_ended(self, stepping: torch.Tensor | None) -> None:
        """validate=True: a ValueError when an env that ended and was not reset is stepped (one device read);
        ``stepping`` is TorchRL's ``"_step"`` mask [E, 1] (``rollout(break_when_all_done=True)`` steps only the
        envs still running, and gpurl keeps the others frozen)."""
        ended = self._terminated | self._truncated
        if stepping is not None:
            ended = ended & stepping.reshape(-1).to(ended.device)
        if bool(ended.any()):  # host-ok: validate=True is the documented opt-in check
            envs = ended.nonzero().flatten().tolist()[:8]  # host-ok: the error message
            raise ValueError(f"env(s) {envs} ended and were not reset: reset them first (TorchRL's rollout() and "
                             "collectors do, through step_and_maybe_reset; by hand: "
                             "env.reset(td.set('_reset', td['done'])) on the step_mdp'd tensordict)")
