"""Checks of the arguments an env takes (num_envs, seed, env_id_offset) and of the tensors it is handed
(actions, masks, ``out=`` buffers, state assignments): host metadata only, never a device read, raised
before anything changes."""
from __future__ import annotations

import numbers

import numpy as np
import torch


def check_num_envs(num_envs) -> int:
    if isinstance(num_envs, bool) or not isinstance(num_envs, numbers.Integral):
        raise TypeError(f"num_envs must be an int >= 1, got {type(num_envs).__name__} {num_envs!r}")
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    return int(num_envs)


def check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed must be an int in [0, 2**64), got {type(seed).__name__} {seed!r}")
    if not 0 <= seed < 2**64:
        raise ValueError(f"seed must be in [0, 2**64), got {seed}")
    return int(seed)


def derived_seed(seed: int, offset: int) -> int:
    """``seed + offset`` modulo 2**64: a seed in [0, 2**64) derived from another one (the evaluation's, a rank's
    sampling stream), so that every seed of the documented range works, 2**64 - 1 included."""
    return (int(seed) + int(offset)) % 2**64


def check_flag(name: str, value) -> bool:
    """``value`` of the on/off argument ``name`` as a bool: True or False (also NumPy's), nothing else (a string
    "no" or an int 0 would otherwise read as a truth value)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    return bool(value)


def refuse_state_outputs(out, env_name: str) -> None:
    """A ValueError when ``out`` (a StepOutputs) gives a global state to an env made with global_state=False."""
    given = [f"out.{name}" for name in ("global_state", "final_global_state") if getattr(out, name) is not None]
    if given:
        raise ValueError(f"{' and '.join(given)} given, but this {env_name} env was made with global_state=False "
                         "and writes no global state: leave it None, or make the env with global_state=True")


#: Global env ids (``env_id_offset + e``) key the counter RNG with 32 bits (:func:`gpurl.kernels.random_u32`):
#: every id of a batch must be below this, or env ``2**32 + k`` would draw env k's numbers.
ENV_ID_LIMIT = 2**32


def check_env_id_offset(env_id_offset, num_envs: int) -> int:
    """``env_id_offset`` as an int, after checking that the batch's global env ids
    ``env_id_offset .. env_id_offset + num_envs - 1`` are all keyed exactly by the RNG (below 2**32)."""
    highest = ENV_ID_LIMIT - num_envs
    if isinstance(env_id_offset, bool) or not isinstance(env_id_offset, numbers.Integral):
        raise TypeError(f"env_id_offset must be an int in [0, {highest}] (2**32 - num_envs), "
                        f"got {type(env_id_offset).__name__} {env_id_offset!r}")
    if not 0 <= env_id_offset <= highest:
        raise ValueError(f"env_id_offset must be in [0, {highest}] (2**32 - num_envs: global env ids "
                         f"env_id_offset + 0..{num_envs - 1} must stay below 2**32, the ids the counter RNG "
                         f"keys exactly), got {env_id_offset}")
    return int(env_id_offset)


def check_buffer(tensor, name: str, shape: tuple, dtypes: tuple, device: torch.device, placed: torch.device, *,
                 in_place: bool = False, shapes: tuple | None = None, shape_text: str | None = None) -> None:
    """Raise TypeError/ValueError naming ``name``, the expected and the received type, dtype, shape, device
    or layout, unless ``tensor`` is a strided torch tensor of one of ``dtypes``, of shape ``shape`` (or one
    of ``shapes``), on ``placed`` (``device`` as the message says it), and contiguous when the kernels write
    it ``in_place``. Host metadata only: no device read."""
    dtype_text = " or ".join(str(d) for d in dtypes)
    shape_text = shape_text or str(tuple(shape))
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor ({dtype_text} {shape_text} on {device}), "
                        f"got {type(tensor).__name__}")
    if tensor.dtype not in dtypes:
        raise TypeError(f"{name} must have dtype {dtype_text}, got {tensor.dtype}")
    if tuple(tensor.shape) not in (shapes or (tuple(shape),)):
        raise ValueError(f"{name} must have shape {shape_text}, got {tuple(tensor.shape)}")
    if tensor.device != placed:
        raise ValueError(f"{name} must be on {device}, got {tensor.device}")
    if tensor.layout != torch.strided:
        raise ValueError(f"{name} must be a dense (strided) tensor, got layout {tensor.layout}")
    if in_place and not tensor.is_contiguous():
        raise ValueError(f"{name} must be contiguous (kernels write it in place), got strides {tensor.stride()}")
