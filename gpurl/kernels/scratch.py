"""Per-agent scratch space that costs the CPU build nothing extra.

An agent phase sometimes needs a private working array (e.g. neighbour candidates). On the GPU every
agent of an env runs at once, so each needs its own row: ``E * N`` lanes. On the CPU an env's agents run
one after another inside that env's loop iteration, so one row per env suffices (``E`` lanes) and stays
hot in L1. Author code indexes ``scratch[lane(e, i, num_agents), ...]`` and never sees the difference.

Declare such an array as ``Field(dtype, shape_of=..., lanes_interleaved=True)`` (:class:`~.fields.Field`;
:func:`~.neighbors.knn_scratch` does): a CUDA build then stores it column by column, so that a warp's lanes
reading the same column of their rows make one coalesced access; the indexing stays ``[lane, column]``.
"""
from .targets import device


@device
def lane(e, i, num_agents):
    """Row of a scratch array owned by agent ``i`` of env ``e`` while a phase runs (CPU: per env)."""
    return e


@lane.override("cuda")
def _lane_cuda(e, i, num_agents):
    return e * num_agents + i


def num_lanes(target: str, num_envs: int, num_agents: int) -> int:
    """How many scratch rows ``target`` needs for ``num_envs`` x ``num_agents``."""
    return num_envs if target == "cpu" else num_envs * num_agents
