"""Algorithms as plug-ins: each declares its rollout fields, an actor fragment, a learner fragment and
its checkpoint state (:mod:`gpurl.algos.base`); the trainer and the distribution policies know only that.

``ALGORITHMS`` maps ``--algo`` names to classes; :func:`register_algorithm` adds one.
"""
from .base import ALGORITHM_SPECIFIC_FIELDS, ActorFragment, Algorithm, EnvSpec, Field, LearnContext, LearnerFragment
from .ppo import A2C, MAPPO, PPO
from .q_learning import IQL, QMIX, VDN

ALGORITHMS: dict[str, type[Algorithm]] = {}


def register_algorithm(cls: type[Algorithm]) -> type[Algorithm]:
    """Make ``cls`` available as ``--algo cls.name`` (usable as a class decorator)."""
    if not (isinstance(cls, type) and issubclass(cls, Algorithm)):
        raise TypeError(f"an algorithm is a subclass of gpurl.algos.Algorithm, got {cls!r}")
    if cls.name in ALGORITHMS and ALGORITHMS[cls.name] is not cls:
        raise ValueError(f"algorithm {cls.name!r} is already registered by {ALGORITHMS[cls.name].__qualname__}")
    ALGORITHMS[cls.name] = cls
    return cls


for _cls in (PPO, A2C, MAPPO, IQL, VDN, QMIX):
    register_algorithm(_cls)

__all__ = ["ALGORITHMS", "ALGORITHM_SPECIFIC_FIELDS", "A2C", "ActorFragment", "Algorithm", "EnvSpec", "Field", "IQL", "LearnContext",
           "LearnerFragment", "MAPPO", "PPO", "QMIX", "VDN", "register_algorithm"]
