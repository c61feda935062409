"""Declared ranges of parameters and config fields, the one checker that reads them, and ``make``'s
construction of an env's parameters from its keyword arguments.

A numeric field declares its allowed values once, beside its default::

    max_speed: float = ranged(1.0, gt=0)   # then its docstring, as for every field

``ranged`` is a ``dataclasses.field`` whose metadata holds a :class:`Range`. :func:`check_fields` reads
every field's annotation (``int``, ``float``, ``bool``, optionally ``| None``) and declared range; a class
adds rules between fields with a ``rules()`` method (:func:`check_rules`). Errors are ValueErrors
(:class:`ParameterError`) naming the owner, the parameter, the value and the allowed range::

    tag_continuous: max_speed=-1.0 is out of range; allowed: > 0

A float field refuses nan and inf unless its range says ``nonfinite=True``.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import MISSING, dataclass, field, fields

import numpy as np

#: The metadata key under which ``ranged`` stores a field's :class:`Range`.
RANGE = "range"
#: The largest float32. An env's float parameters become float32 kernel constants; a larger magnitude
#: would be inf there.
FLOAT32_MAX = float(np.finfo(np.float32).max)
#: Largest agent count of one env: agent ids key the counter RNG as uint32, and obs rows and neighbour
#: lists are indexed with int32 on the GPU (with room for 7 features per observed agent).
MAX_AGENTS = 2**20
#: Largest episode length: the kernels count steps in int32 (``timestep``); one below int32's largest
#: value (tag_gridworld's bound before ranges were declared) leaves no increment room to overflow.
MAX_EPISODE_LENGTH = 2**31 - 2


class ParameterError(ValueError):
    """A parameter or config value of the wrong type, outside its declared range, or breaking a rule
    between fields, or naming what does not exist (an env, a device, a group): a usage error (``gpurl train``
    reports it as one line, exit status 2, without a traceback)."""


class UnknownParameterError(ParameterError, TypeError):
    """An env parameter the env does not have (a TypeError, as an unknown keyword argument is)."""


@dataclass(frozen=True)
class Range:
    """The allowed values of one number: ``low``/``high`` bounds (None: unbounded), each inclusive unless
    ``low_open``/``high_open``; ``nonfinite``: nan and +-inf are allowed too."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    nonfinite: bool = False

    def __contains__(self, value) -> bool:
        if self.nonfinite and not _finite(value):
            return True
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def __str__(self) -> str:
        low, high = _number(self.low), _number(self.high)
        if self.low is not None and self.high is not None:
            text = f"in {'(' if self.low_open else '['}{low}, {high}{')' if self.high_open else ']'}"
        elif self.low is not None:
            text = f"{'>' if self.low_open else '>='} {low}"
        elif self.high is not None:
            text = f"{'<' if self.high_open else '<='} {high}"
        else:
            text = "any value"
        return text + (", nan or inf" if self.nonfinite else "")


def span(*, ge=None, gt=None, le=None, lt=None, nonfinite: bool = False) -> Range:
    """A :class:`Range` from comparison keywords: ``span(gt=0)`` is ``> 0``, ``span(ge=0, le=1)`` ``[0, 1]``."""
    if (ge is not None and gt is not None) or (le is not None and lt is not None):
        raise TypeError("give at most one lower bound (ge or gt) and one upper bound (le or lt)")
    return Range(low=gt if gt is not None else ge, high=lt if lt is not None else le,
                 low_open=gt is not None, high_open=lt is not None, nonfinite=nonfinite)


def ranged(default=MISSING, *, ge=None, gt=None, le=None, lt=None, nonfinite: bool = False,
           metadata: dict | None = None, **field_kwargs):
    """A dataclass field with a default and its allowed range (see :func:`span`), read by :func:`check_fields`."""
    allowed = span(ge=ge, gt=gt, le=le, lt=lt, nonfinite=nonfinite)
    return field(default=default, metadata={**(metadata or {}), RANGE: allowed}, **field_kwargs)


def declared_range(f) -> Range | None:
    """The :class:`Range` a dataclass field declares, or None."""
    return f.metadata.get(RANGE)


def field_kind(f) -> tuple[str, bool]:
    """``(kind, optional)`` of a dataclass field's annotation: kind ``int``, ``float``, ``bool`` or
    another name (not checked); optional when it admits None (``int | None``)."""
    name = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    parts = [p.strip() for p in name.split("|")]
    optional = "None" in parts
    parts = [p for p in parts if p != "None"]
    return (parts[0] if len(parts) == 1 else name), optional


def check_fields(obj, owner: str, float32: bool = False) -> None:
    """Check every field of the dataclass instance ``obj`` against its annotation and declared range.

    ``float32``: float fields must also be finite as float32 (env parameters become float32 constants).
    Raises ValueError naming ``owner``, the field, the value and the allowed range.
    """
    for f in fields(obj):
        kind, optional = field_kind(f)
        value = getattr(obj, f.name)
        if optional and value is None:
            continue
        check_value(owner, f.name, value, kind, declared_range(f) or Range(), float32)


def check_value(owner: str, name: str, value, kind: str, allowed: Range, float32: bool = False) -> None:
    """One value of kind ``int``/``float``/``bool`` against ``allowed`` (other kinds pass); see :func:`check_fields`."""
    is_bool = isinstance(value, (bool, np.bool_))
    if kind == "bool":
        if not is_bool:
            raise ParameterError(f"{owner}: {name}={_show(value)} is not a bool; allowed: True or False")
        return
    if kind not in ("int", "float"):
        return
    if kind == "int" and (is_bool or not isinstance(value, numbers.Integral)):
        raise ParameterError(f"{owner}: {name}={_show(value)} is not an int; allowed: {_describe(kind, allowed)}")
    if kind == "float" and (is_bool or not isinstance(value, numbers.Real)):
        raise ParameterError(f"{owner}: {name}={_show(value)} is not a number; allowed: {_describe(kind, allowed)}")
    if kind == "float" and not _finite(value) and not allowed.nonfinite:
        raise ParameterError(f"{owner}: {name}={_show(value)} is not finite; allowed: {_describe(kind, allowed)}")
    if value not in allowed:
        raise ParameterError(f"{owner}: {name}={_show(value)} is out of range; allowed: {allowed}")
    if kind == "float" and float32 and _finite(value) and abs(value) > FLOAT32_MAX:
        raise ParameterError(f"{owner}: {name}={_show(value)} is out of range; allowed: {_describe(kind, allowed)} "
                         f"within float32 (|value| <= {FLOAT32_MAX:.8g})")


def check_rules(obj, owner: str) -> None:
    """The rules between fields that ``obj.rules()`` declares, ``(name, holds, allowed)`` each, e.g.
    ``("min_acceleration", self.min_acceleration <= self.max_acceleration, "<= max_acceleration")``."""
    rules = getattr(obj, "rules", None)
    for name, holds, allowed in (rules() if rules is not None else ()):
        if not holds:
            raise ParameterError(f"{owner}: {name}={_show(getattr(obj, name))} is out of range; allowed: {allowed}")


def checked_params(cls, env_name: str, kwargs: dict):
    """``cls(**kwargs)``, checked: an unknown key is a TypeError naming it and listing the valid ones
    (API.md); a value of the wrong type or outside its declared range (:func:`check_fields`, as float32),
    or breaking one of ``cls.rules()``, a ValueError; then ``cls.validate()`` where the class has one."""
    valid = [f.name for f in fields(cls)]
    for key in kwargs:
        if key not in valid:
            raise UnknownParameterError(f"{env_name} got an unknown parameter {key!r}; valid parameters: {valid}")
    params = cls(**kwargs)
    check_fields(params, env_name, float32=True)
    check_rules(params, env_name)
    if hasattr(params, "validate"):
        params.validate()
    return params


def _number(value) -> str:
    """A bound as written in messages: powers of two (and one less) as ``2**k``, else ``repr``."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 2**16:
        for delta, suffix in ((0, ""), (1, " - 1"), (2, " - 2")):
            k = (value + delta).bit_length() - 1
            if value + delta == 2**k:
                return f"2**{k}{suffix}"
    return repr(value)


def _finite(value) -> bool:
    """``math.isfinite``, true for ints too large for a float (they are finite; their range check says more)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return True


def _describe(kind: str, allowed: Range) -> str:
    """What a field of ``kind`` accepts, for type errors: "an int >= 1", "a finite number", ..."""
    bounded = allowed.low is not None or allowed.high is not None
    what = "an int" if kind == "int" else ("a number" if allowed.nonfinite else "a finite number")
    return f"{what} {allowed}" if bounded or allowed.nonfinite else what


def _show(value) -> str:
    """``repr`` of a value, NumPy scalars as the Python number they hold (``-1.0``, not ``np.float64(-1.0)``)."""
    return repr(value.item() if isinstance(value, np.generic) else value)  # host-ok: a NumPy scalar, in a message
