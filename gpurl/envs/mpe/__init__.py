"""The MPE suite of mpe2 1.1.1 on one particle-world core (docs/specs/mpe.md).

:mod:`.world` declares worlds, :mod:`.physics` and :mod:`.phases` are the core, :class:`.env.ParticleEnv`
the base class; each scenario is one module.
"""
from .env import ParticleEnv
from .simple import Simple
from .simple_world_comm import SimpleWorldComm
from .world import AgentGroup, Kind, Landmarks, World

#: Scenario name -> class, registered with ``gpurl.make`` by :mod:`gpurl.envs`.
SCENARIOS = {"simple": Simple, "simple_world_comm": SimpleWorldComm}

__all__ = ["AgentGroup", "Kind", "Landmarks", "ParticleEnv", "SCENARIOS", "Simple", "SimpleWorldComm", "World"]
