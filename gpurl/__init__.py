"""gpurl: multi-agent RL end to end on GPUs (and fast on CPUs).

    import gpurl
    env = gpurl.make("tag_continuous", num_envs=1024, device="cpu", **params)
"""
from .envs import Group, make, register, registered

__version__ = "0.1.0"
__all__ = ["Group", "make", "register", "registered", "__version__"]
