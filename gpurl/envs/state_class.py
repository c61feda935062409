"""``env.state``'s dataclass and the type check of kernel constants: the declared env's set-up helpers that
need no env (:class:`~.base.KernelEnv` calls them)."""
from __future__ import annotations

import dataclasses

import numpy as np
import torch

from .checks import check_buffer


def check_constant_types(constants: dict, env_name: str) -> None:
    """A kernel constant must be a NumPy scalar: a Python float is float64 in the kernels (and a Python int
    int64), which promotes the float32 math it touches."""
    for name, value in constants.items():
        if not isinstance(value, np.generic):
            raise TypeError(f"{env_name}.constants()[{name!r}] = {value!r} is a {type(value).__name__}; kernel "
                            "constants are NumPy scalars (np.float32(...), np.int32(...)): a Python float would "
                            "compute in float64")


def check_state_dim(value, env_name: str) -> int:
    """``global_state_dim()``'s value as an int: S >= 1 (a TypeError/ValueError naming the env otherwise)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{env_name}.global_state_dim() must return an int, got {value!r}")
    if value < 1:
        raise ValueError(f"{env_name}.global_state_dim() must be >= 1, got {value}")
    return int(value)


def state_dataclass(cls) -> type:
    """``env.state``'s class for ``cls``: its declared state fields, then ``episode``, as torch tensors."""
    if "_state_class" not in cls.__dict__:
        names = [*cls.state, "episode"]
        cls._state_class = dataclasses.make_dataclass(f"{cls.__name__}State", [(n, torch.Tensor) for n in names],
                                                      namespace={"__setattr__": set_state_field})
        cls._state_class.__doc__ = (f"{cls.__name__}'s state, tensors on env.device [num_envs, ...]: write in place "
                                    "to inject a state (then env.step); assigning a tensor to a field copies its "
                                    "values in (same shape, dtype and device). episode: episodes started since "
                                    "the seed was set (keys the reset draws).")
    return cls._state_class


def set_state_field(state, name: str, value) -> None:
    """``env.state.<name> = value``: the kernels keep their views of the env's own tensors, so a new tensor
    cannot replace a field; its values are copied into the field instead, after the field's metadata checks
    (shape, dtype, device, layout: ValueError/TypeError before anything changes). The first assignment of
    each field (the dataclass's ``__init__``) binds it; any other name is an AttributeError."""
    fields = type(state).__dataclass_fields__
    if name not in fields:
        raise AttributeError(f"{type(state).__name__} has no field {name!r} (fields: {', '.join(fields)})")
    current = state.__dict__.get(name)
    if current is None:
        object.__setattr__(state, name, value)
        return
    check_buffer(value, f"env.state.{name}", tuple(current.shape), (current.dtype,), current.device, current.device)
    if value is not current:
        current.copy_(value.clone() if value.untyped_storage().data_ptr() == current.untyped_storage().data_ptr()
                      else value)

