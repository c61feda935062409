"""Distribution policies (single, data_parallel, central_learner), their communication and process groups.

A policy sees buffers, never an algorithm (:class:`Placement`); ``init_placement`` builds the one of
this process from torchrun's environment (NCCL between GPUs, gloo between CPU processes).
"""
from .minibatches import LearnerBatches
from .placement import EnvShard, LocalComm, Placement
from .policies import POLICIES, CentralLearner, DataParallel, ReplicationError, SingleDevice, StalenessError

__all__ = ["POLICIES", "CentralLearner", "DataParallel", "EnvShard", "LearnerBatches", "LocalComm", "Placement",
           "ReplicationError",
           "SingleDevice", "StalenessError"]
