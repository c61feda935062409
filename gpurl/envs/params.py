"""What every env's parameter dataclass shares: construction from ``make``'s keyword arguments."""
from __future__ import annotations

from dataclasses import fields


def checked_params(cls, env_name: str, kwargs: dict):
    """``cls(**kwargs)`` validated (by ``cls.validate()`` where it has one); an unknown key is a TypeError naming it and listing the valid ones
    (API.md), an out-of-range value the ValueError of ``cls.validate``."""
    valid = [f.name for f in fields(cls)]
    for key in kwargs:
        if key not in valid:
            raise TypeError(f"{env_name} got an unknown parameter {key!r}; valid parameters: {valid}")
    params = cls(**kwargs)
    if hasattr(params, "validate"):
        params.validate()
    return params
