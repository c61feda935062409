"""Built-in envs, the registry and the env API."""
from .base import KernelEnv, StepOutputs
from .params import ParameterError, ranged
from ..kernels.fields import Field, field
from .registry import import_env_module, make, register, registered, resolve_device
from .spaces import Group
from .tag_continuous import TagContinuous
from .tag_gridworld import TagGridworld
from .mpe import SCENARIOS as _MPE_SCENARIOS


def _tag_continuous(**kwargs):
    return TagContinuous(**kwargs)


register("tag_continuous", _tag_continuous)


def _tag_gridworld(**kwargs):
    return TagGridworld(**kwargs)


register("tag_gridworld", _tag_gridworld)
for _name, _scenario in _MPE_SCENARIOS.items():
    register(_name, _scenario)

__all__ = ["Field", "Group", "KernelEnv", "ParameterError", "field", "ranged", "StepOutputs", "TagContinuous", "TagGridworld", "import_env_module", "make",
           "register", "registered", "resolve_device"]
