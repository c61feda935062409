"""``tag_continuous``: WarpDrive's continuous Tag, exact and GPU-resident (docs/specs/tag_continuous.md)."""
from .env import TagContinuous
from .params import TAG_5V1000, TAG_10V100, TagContinuousParams

__all__ = ["TAG_10V100", "TAG_5V1000", "TagContinuous", "TagContinuousParams"]
