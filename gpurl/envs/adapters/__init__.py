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
    ``num_envs=1`` and ``autoreset=False``: passing other values for them is a ValueError.
    """
    params = without_own_settings("parallel_env", "one env; PettingZoo ends the episode and the caller "
                                  "resets", params, autoreset=False, num_envs=1)
    env = make(name, num_envs=1, device=device, seed=seed, autoreset=False, env_id_offset=env_index, **params)
    return _parallel().ParallelEnv(env, agent_prefixes=agent_prefixes)


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
