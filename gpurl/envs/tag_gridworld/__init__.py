"""``tag_gridworld``: WarpDrive's discrete gridworld Tag, GPU-resident (docs/specs/tag_gridworld.md)."""
from .env import TagGridworld
from .params import TAG_GRID_4, TAG_GRID_LARGE, TagGridworldParams

__all__ = ["TAG_GRID_4", "TAG_GRID_LARGE", "TagGridworld", "TagGridworldParams"]
