"""gpurl's envs as BenchMARL tasks, over the TorchRL adapter (the ``benchmarl`` extra).

    from gpurl.envs.adapters.benchmarl import GpurlTask   # first: it readies TorchRL for BenchMARL (below)
    from benchmarl.experiment import Experiment, ExperimentConfig
    task = GpurlTask.SIMPLE_TAG.get_task(config={"max_cycles": 25})   # config: the gpurl env's parameters

Each member of :class:`GpurlTask` is a registered gpurl env (its name upper-cased); the env is
``torchrl_env(name, num_envs, device=..., seed=..., **config)``, batched: BenchMARL takes its ``batch_size`` as
its number of vectorised envs. Its groups are gpurl's agent groups, and gpurl's global state
(docs/specs/global_state.md) is BenchMARL's ``state_spec``, which MAPPO's critic reads.

**Versions.** Tested with BenchMARL 1.5.1 on TorchRL 0.14.1 (:data:`TESTED`, the pins of the ``benchmarl``
extra). BenchMARL 1.5.2, the newest release, asks for TorchRL < 0.12 in its metadata, older than gpurl's TorchRL
adapter supports (0.14). BenchMARL 1.5.1 asks for TorchRL ~= 0.10 and runs on 0.14 but for two names TorchRL
renamed since; importing this module restores them for it (:func:`restore_renamed_torchrl_names`), which
changes nothing for code that uses the new names:

- ``torchrl.collectors.SyncDataCollector``, named ``Collector`` since TorchRL 0.13 (BenchMARL imports it from
  ``benchmarl.experiment``: import this module before that, or call the function first);
- ``ClipPPOLoss(critic_coef=..., entropy_coef=...)``, ``critic_coeff``/``entropy_coeff`` since TorchRL 0.11
  (BenchMARL's MAPPO and IPPO pass the old ones).

Another BenchMARL version gets a warning naming the tested one. BenchMARL's own requirements bring
torchvision, which BenchMARL's MAPPO path never imports (beside the CPU build of torch, PyPI's torchvision
fails to import).
"""
from __future__ import annotations

import functools
import warnings
from importlib import metadata

from . import torchrl_env

#: The versions this module was tested with (the ``benchmarl`` extra's pins).
TESTED = {"benchmarl": "1.5.1", "torchrl": "0.14.1"}


def restore_renamed_torchrl_names() -> None:
    """Give TorchRL back the two old names BenchMARL 1.5.1 uses (see the module docstring); idempotent."""
    import torchrl.collectors as collectors
    from torchrl.objectives import ClipPPOLoss

    if not hasattr(collectors, "SyncDataCollector"):
        collectors.SyncDataCollector = collectors.Collector
    if not getattr(ClipPPOLoss.__init__, "_gpurl_old_names", False):
        init = ClipPPOLoss.__init__

        @functools.wraps(init)
        def init_taking_old_names(self, *args, critic_coef=None, entropy_coef=None, **kwargs):
            if critic_coef is not None:
                kwargs.setdefault("critic_coeff", critic_coef)
            if entropy_coef is not None:
                kwargs.setdefault("entropy_coeff", entropy_coef)
            init(self, *args, **kwargs)

        init_taking_old_names._gpurl_old_names = True
        ClipPPOLoss.__init__ = init_taking_old_names


def _warn_if_untested() -> None:
    try:
        found = {name: metadata.version(name) for name in TESTED}
    except metadata.PackageNotFoundError as err:
        raise ImportError(f"gpurl's BenchMARL tasks need {err.name}: pip install 'gpurl[benchmarl]'") from err
    if found != TESTED:
        warnings.warn(f"gpurl's BenchMARL tasks were tested with {TESTED}; found {found}", stacklevel=3)


_warn_if_untested()
restore_renamed_torchrl_names()

from benchmarl.environments.common import Task, TaskClass  # noqa: E402 - after the names are back
from torchrl.data import Composite  # noqa: E402


#: The built-in envs without a ``continuous_actions`` parameter (the MPE suite has one: Box actions).
WITHOUT_BOX_ACTIONS = frozenset({"tag_continuous", "tag_gridworld"})


def episode_limit(params) -> int | None:
    """The episode length an env's parameters set (``max_cycles`` for the MPE suite, ``episode_length`` for
    Tag), or None for an env without one."""
    for name in ("max_cycles", "episode_length"):
        if hasattr(params, name):
            return int(getattr(params, name))
    return None


class GpurlTask(Task):
    """A gpurl env as a BenchMARL task: ``GpurlTask.SIMPLE_SPREAD.get_task(config={...})``, the config being the
    env's parameters (``gpurl.make``'s keyword arguments; none needed)."""

    COLLECT_TREASURE = None
    SIMPLE = None
    SIMPLE_ADVERSARY = None
    SIMPLE_CRYPTO = None
    SIMPLE_FORMATION = None
    SIMPLE_LINE = None
    SIMPLE_PUSH = None
    SIMPLE_REFERENCE = None
    SIMPLE_SPEAKER_LISTENER = None
    SIMPLE_SPREAD = None
    SIMPLE_TAG = None
    SIMPLE_WORLD_COMM = None
    TAG_CONTINUOUS = None
    TAG_GRIDWORLD = None

    @staticmethod
    def associated_class():
        return GpurlTaskClass

    def get_task(self, config: dict | None = None) -> "GpurlTaskClass":
        """The task with ``config`` as the env's parameters; None: gpurl's defaults (BenchMARL would look for a
        YAML file of its own, which gpurl does not ship)."""
        return super().get_task({} if config is None else config)


class GpurlTaskClass(TaskClass):
    """BenchMARL's view of one gpurl env (the :class:`~gpurl.envs.adapters.torchrl.GpurlTorchRLEnv` it makes)."""

    @property
    def env_name_gpurl(self) -> str:
        return self.name.lower()

    def get_env_fun(self, num_envs, continuous_actions, seed, device):
        params = dict(self.config)
        if continuous_actions:
            if not self.supports_continuous_actions():
                raise ValueError(f"gpurl's {self.env_name_gpurl} has no continuous actions; set BenchMARL's "
                                 "prefer_continuous_actions=False")
            params["continuous_actions"] = True
        return lambda: torchrl_env(self.env_name_gpurl, num_envs, device=device, seed=seed or 0, **params)

    def supports_continuous_actions(self) -> bool:
        return self.env_name_gpurl not in WITHOUT_BOX_ACTIONS

    def supports_discrete_actions(self) -> bool:
        return True

    def has_render(self, env) -> bool:
        return False

    def max_steps(self, env) -> int:
        limit = episode_limit(env.env.params)
        if limit is None:
            raise ValueError(f"gpurl's {self.env_name_gpurl} sets no episode length BenchMARL could read")
        return limit

    def group_map(self, env) -> dict[str, list[str]]:
        return env.group_map

    def observation_spec(self, env) -> Composite:
        spec = env.full_observation_spec_unbatched.clone()
        if "state" in spec.keys():
            del spec["state"]  # BenchMARL reads it through state_spec
        return spec

    def state_spec(self, env) -> Composite | None:
        spec = env.full_observation_spec_unbatched
        return Composite(state=spec["state"].clone()) if "state" in spec.keys() else None

    def action_spec(self, env) -> Composite:
        return env.full_action_spec_unbatched

    def action_mask_spec(self, env) -> None:
        return None

    def info_spec(self, env) -> None:
        return None

    @staticmethod
    def env_name() -> str:
        return "gpurl"


__all__ = ["GpurlTask", "GpurlTaskClass", "TESTED", "WITHOUT_BOX_ACTIONS", "episode_limit",
           "restore_renamed_torchrl_names"]
