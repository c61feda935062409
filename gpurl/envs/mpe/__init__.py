"""The MPE suite of mpe2 1.1.1 on one particle-world core (docs/specs/mpe.md).

:mod:`.world` declares worlds, :mod:`.physics` and :mod:`.phases` are the core, :class:`.env.ParticleEnv`
the base class; each scenario is one module (its params, kinds, phases and env class), with shared helpers
(:mod:`.matching`: the assignment simple_line and simple_formation share; :mod:`.goals`: goal landmarks and
uniform resets; :mod:`.nearest`: mpe2's nearest-neighbour observations). The idioms their kernel code uses
for speed: docs/envs.md#performance-idioms-of-scenario-code.
"""
from .collect_treasure import CollectTreasure
from .env import ParticleEnv
from .simple import Simple
from .simple_adversary import SimpleAdversary
from .simple_crypto import SimpleCrypto
from .simple_formation import SimpleFormation
from .simple_line import SimpleLine
from .simple_push import SimplePush
from .simple_reference import SimpleReference
from .simple_speaker_listener import SimpleSpeakerListener
from .simple_spread import SimpleSpread
from .simple_tag import SimpleTag
from .simple_world_comm import SimpleWorldComm
from .world import AgentGroup, Kind, Landmarks, World

#: Scenario name -> class, registered with ``gpurl.make`` by :mod:`gpurl.envs`.
SCENARIOS = {"simple": Simple, "simple_adversary": SimpleAdversary, "simple_crypto": SimpleCrypto,
             "simple_push": SimplePush, "simple_reference": SimpleReference,
             "simple_speaker_listener": SimpleSpeakerListener, "simple_spread": SimpleSpread,
             "simple_tag": SimpleTag, "simple_world_comm": SimpleWorldComm, "simple_line": SimpleLine,
             "simple_formation": SimpleFormation, "collect_treasure": CollectTreasure}

__all__ = ["AgentGroup", "CollectTreasure", "Kind", "Landmarks", "ParticleEnv", "SCENARIOS", "Simple",
           "SimpleAdversary", "SimpleCrypto", "SimpleFormation", "SimpleLine", "SimplePush", "SimpleReference",
           "SimpleSpeakerListener", "SimpleSpread", "SimpleTag", "SimpleWorldComm", "World"]
