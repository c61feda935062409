"""Distribution policies (single, data_parallel, central_learner), process groups and the run launcher.

``gpurl.multigpu.launch.run(cfg)`` trains under the policy ``cfg.dist`` names, on the ranks torchrun
started (NCCL between GPUs, gloo between CPU processes). See the README's multi-GPU section.
"""
from .policies import POLICIES, CentralLearner, DataParallel, ReplicationError, SingleDevice, StalenessError

__all__ = ["POLICIES", "CentralLearner", "DataParallel", "ReplicationError", "SingleDevice", "StalenessError"]
