"""gpurl: multi-agent RL end to end on GPUs (and fast on CPUs).

    import gpurl
    env = gpurl.make("tag_continuous", num_envs=1024, device="cpu", **params)
"""
from .envs import Group, make, register, registered

__version__ = "0.1.0"
__all__ = ["Group", "load_policy", "make", "register", "registered", "__version__"]


def load_policy(path, env=None, deterministic: bool = False, seed: int = 0, device=None):
    """A run's trained policies (run dir or checkpoint file) as a callable obs -> actions: see
    :func:`gpurl.train.policy.load_policy`."""
    from .train.policy import load_policy as load

    return load(path, env=env, deterministic=deterministic, seed=seed, device=device)
