"""``simple_tag``: MPE's predator-prey as in mpe2 1.1.1, exact up to float32 (docs/specs/simple_tag.md), a
scenario of the particle-world core (:mod:`gpurl.envs.mpe`)."""
from .env import SimpleTag
from .params import SimpleTagParams

__all__ = ["SimpleTag", "SimpleTagParams"]
