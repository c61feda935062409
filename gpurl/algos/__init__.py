"""Algorithms as plug-ins: each declares its rollout fields, an actor fragment, a learner fragment and
its checkpoint state (:mod:`gpurl.algos.base`); the trainer and the distribution policies know only that.

``ALGORITHMS`` maps ``--algo`` names to classes; :func:`register_algorithm` adds one.
"""
import dataclasses

from ..storage.fields import Field
from .base import ActorFragment, Algorithm, EnvSpec, LearnContext, LearnerFragment
from .ddpg import IDDPG, MADDPG, MATD3
from .ddpg_params import DDPGParams, TD3Params
from .params import AlgoParams
from .ppo import A2C, MAPPO, PPO
from .ppo_params import A2CParams, MAPPOParams, PPOParams
from .q_learning import IQL, QMIX, VDN
from .q_params import QParams
from .sac import ISAC, MASAC
from .sac_params import SACParams

ALGORITHMS: dict[str, type[Algorithm]] = {}


def register_algorithm(cls: type[Algorithm]) -> type[Algorithm]:
    """Make ``cls`` available as ``--algo cls.name`` (usable as a class decorator)."""
    if not (isinstance(cls, type) and issubclass(cls, Algorithm)):
        raise TypeError(f"an algorithm is a subclass of gpurl.algos.Algorithm, got {cls!r}")
    params = getattr(cls, "params_type", None)
    if not (isinstance(params, type) and issubclass(params, AlgoParams) and dataclasses.is_dataclass(params)):
        raise TypeError(f"{cls.__qualname__}.params_type must be a dataclass subclassing gpurl.algos.AlgoParams, "
                        f"got {params!r}")
    if cls.name in ALGORITHMS and ALGORITHMS[cls.name] is not cls:
        raise ValueError(f"algorithm {cls.name!r} is already registered by {ALGORITHMS[cls.name].__qualname__}")
    ALGORITHMS[cls.name] = cls
    return cls


for _cls in (PPO, A2C, MAPPO, IQL, VDN, QMIX, MADDPG, IDDPG, MATD3, MASAC, ISAC):
    register_algorithm(_cls)
#: The algorithms gpurl ships, by ``--algo`` name (``ALGORITHMS`` also holds those registered since).
BUILT_IN = tuple(ALGORITHMS)

__all__ = ["ALGORITHMS", "BUILT_IN", "A2C", "A2CParams", "ActorFragment", "AlgoParams", "Algorithm", "DDPGParams",
           "EnvSpec", "Field", "IDDPG", "IQL", "ISAC", "LearnContext", "LearnerFragment", "MADDPG", "MAPPO",
           "MAPPOParams", "MASAC", "MATD3", "PPO", "PPOParams", "QMIX", "QParams", "SACParams", "TD3Params", "VDN",
           "register_algorithm"]
