"""Built-in envs, the registry and the env API."""
from .base import KernelEnv, StepOutputs
from .registry import make, register, registered, resolve_device
from .spaces import Group
from .tag_continuous import TagContinuous


def _tag_continuous(**kwargs):
    return TagContinuous(**kwargs)


register("tag_continuous", _tag_continuous)

__all__ = ["Group", "KernelEnv", "StepOutputs", "TagContinuous", "make", "register", "registered", "resolve_device"]
