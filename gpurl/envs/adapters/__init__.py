"""Gymnasium and PettingZoo adapters at the edge of gpurl (host numpy in, host numpy out), and TorchRL's
(device tensors in, device TensorDicts out).

    from gpurl.envs.adapters import gym_vector_env, parallel_env, torchrl_env
    venv = gym_vector_env("simple_tag", num_envs=64, group="adversary", device="cpu")  # VectorEnv
    penv = parallel_env("simple_tag", env_index=3, seed=0)                              # pettingzoo
    tenv = torchrl_env("simple_tag", num_envs=64, device="cpu")                         # torchrl EnvBase

``GymVectorEnv`` needs only gymnasium (a gpurl dependency); ``ParallelEnv``/``parallel_env`` import
pettingzoo when first used, and ``GpurlTorchRLEnv``/``torchrl_env`` torchrl (the ``torchrl`` extra), so this
package imports without them. Nothing here runs at import.
"""
from __future__ import annotations

import numbers

from ..checks import ENV_ID_LIMIT
from ..registry import make
from ._common import without_own_settings
from .gym_vector import GymVectorEnv, OtherPolicy

__all__ = ["GpurlTorchRLEnv", "GymVectorEnv", "OtherPolicy", "ParallelEnv", "gym_vector_env", "parallel_env",
           "torchrl_env"]


def gym_vector_env(name: str, num_envs: int, group: str | None = None, *, other_actions="random",
                   device=None, seed: int = 0, **params) -> GymVectorEnv:
    """``GymVectorEnv`` over ``gpurl.make(name, num_envs=num_envs, device=device, seed=seed, **params)``.

    Its ``num_envs`` is ``num_envs * size of group``; ``other_actions`` drives the other groups (see
    ``GymVectorEnv``). ``device=None`` picks CUDA when usable, as ``gpurl.make`` does. The env is made
    with ``autoreset=True``: passing ``autoreset=False`` is a ValueError.
    """
    params = without_own_settings("gym_vector_env", "Gymnasium's SAME_STEP autoreset", params,
                                  autoreset=True)
    env = make(name, num_envs=num_envs, device=device, seed=seed, autoreset=True, **params)
    return GymVectorEnv(env, group=group, other_actions=other_actions)


def parallel_env(name: str, *, env_index: int = 0, seed: int = 0, device="cpu", agent_prefixes=None,
                 **params) -> "ParallelEnv":
    """PettingZoo ``ParallelEnv`` of env ``env_index`` of a ``gpurl.make(name, seed=seed, **params)`` batch.

    Built as a one-env batch at global env id ``env_index`` (``env_id_offset``), so its episodes are that
    batch env's episodes. CPU by default: one env per step is host-bound anyway. The env is made with
    ``num_envs=1`` and ``autoreset=False``: passing other values for them is a ValueError, and so is passing
    ``env_id_offset`` (``env_index`` is it). ``env_index`` is an int in [0, 2**32 - 1]: a TypeError or
    ValueError naming it otherwise, before anything is built.
    """
    env_index = _check_env_index(env_index)
    if "env_id_offset" in params:
        raise ValueError(f"parallel_env makes its env with env_id_offset=env_index ({env_index}); pass the batch "
                         f"env's id as env_index, not env_id_offset={params['env_id_offset']!r}")
    params = without_own_settings("parallel_env", "one env; PettingZoo ends the episode and the caller "
                                  "resets", params, autoreset=False, num_envs=1)
    env = make(name, num_envs=1, device=device, seed=seed, autoreset=False, env_id_offset=env_index, **params)
    return _parallel().ParallelEnv(env, agent_prefixes=agent_prefixes)


def _check_env_index(env_index) -> int:
    """``env_index`` as an int: the global env id of the one env ``parallel_env`` plays, in [0, 2**32 - 1].

    Checked here, not left to ``make``'s ``env_id_offset`` check: the error must name the caller's argument."""
    highest = ENV_ID_LIMIT - 1
    if isinstance(env_index, bool) or not isinstance(env_index, numbers.Integral):
        raise TypeError(f"env_index must be an int in [0, {highest}] (the global env id of the batch env to "
                        f"play), got {type(env_index).__name__} {env_index!r}")
    if not 0 <= env_index <= highest:
        raise ValueError(f"env_index must be in [0, {highest}] (the global env id of the batch env to play: "
                         f"gpurl's RNG keys env ids below 2**32 exactly), got {env_index}")
    return int(env_index)


def torchrl_env(name: str, num_envs: int, *, device=None, seed: int = 0, categorical_actions: bool = True,
                **params) -> "GpurlTorchRLEnv":
    """TorchRL ``EnvBase`` (``GpurlTorchRLEnv``) over ``gpurl.make(name, num_envs=num_envs, device=device,
    seed=seed, autoreset=False, **params)``: ``batch_size [num_envs]``, one TensorDict entry per agent group.

    ``device=None`` picks CUDA when usable, as ``gpurl.make`` does. The env is made with ``autoreset=False``
    (TorchRL resets ended envs through ``_reset``): passing ``autoreset=True`` is a ValueError.
    """
    params = without_own_settings("torchrl_env", "TorchRL resets ended envs through _reset", params,
                                  autoreset=False)
    torchrl_adapter = _torchrl()  # before make: a missing torchrl is reported before any build
    env = make(name, num_envs=num_envs, device=device, seed=seed, autoreset=False, **params)
    return torchrl_adapter.GpurlTorchRLEnv(env, categorical_actions=categorical_actions)


def _torchrl():
    try:
        from . import torchrl as torchrl_adapter
    except ImportError as err:
        if err.name is None or err.name.split(".")[0] not in ("torchrl", "tensordict"):
            raise
        raise ImportError("gpurl's TorchRL adapter needs torchrl: pip install 'gpurl[torchrl]'") from err
    return torchrl_adapter


def _parallel():
    try:
        from . import parallel
    except ImportError as err:
        if err.name is None or not err.name.startswith("pettingzoo"):
            raise
        raise ImportError("gpurl's PettingZoo adapter needs pettingzoo: pip install 'pettingzoo>=1.24'") from err
    return parallel


def __getattr__(name: str):
    # PEP 562: `from gpurl.envs.adapters import ParallelEnv` imports pettingzoo only then.
    if name == "ParallelEnv":
        return _parallel().ParallelEnv
    if name == "GpurlTorchRLEnv":  # likewise torchrl
        return _torchrl().GpurlTorchRLEnv
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
