"""What both adapters share: observation spaces, host copies, action checks and random actions.

The adapters live at the host edge of gpurl: every step hands numpy arrays to the caller, so a host copy
per step is their purpose, not a leak of one into the device rollout.
"""
from __future__ import annotations

import gymnasium
import numpy as np
import torch

from ..spaces import action_bounds


def observation_space(obs_dim: int) -> gymnasium.spaces.Box:
    """One agent's observation: float32 [obs_dim], unbounded (no built-in env promises tighter bounds)."""
    return gymnasium.spaces.Box(-np.inf, np.inf, (obs_dim,), dtype=np.float32)


def host_copy(tensor: torch.Tensor) -> np.ndarray:
    """A numpy array that owns its memory: env buffers are rewritten in place by the next step."""
    return tensor.detach().to("cpu", copy=True).numpy()  # host-ok: adapters hand numpy to the ecosystem


def host_arrays(*tensors: torch.Tensor) -> list[np.ndarray]:
    """Numpy arrays that own their memory, one per tensor of a step's outputs (all on one device), fetched
    with one wait for the device: CUDA tensors are copied into pinned host memory without blocking and the
    stream is waited on once, where a copy each would wait each time; CPU tensors are copied by numpy, which
    costs less than a torch copy for a step's small arrays."""
    if tensors and tensors[0].is_cuda:
        staged = [torch.empty(t.shape, dtype=t.dtype, pin_memory=True) for t in tensors]
        for host, tensor in zip(staged, tensors):
            host.copy_(tensor.detach(), non_blocking=True)
        torch.cuda.current_stream(tensors[0].device).synchronize()  # host-ok: the step's one wait
        return [host.numpy() for host in staged]  # host-ok: pinned host memory, copied in by then
    return [np.array(tensor.detach().numpy()) for tensor in tensors]  # host-ok: host memory already


def is_discrete(space: gymnasium.Space) -> bool:
    """Discrete or MultiDiscrete (integer actions); False for Box."""
    return action_bounds(space)[1] is not None


def check_host_actions(actions, space: gymnasium.Space, count: int, who) -> np.ndarray:
    """``count`` actions of one agent group as int64/float32 [count, action_dims]; ValueError if wrong.

    ``actions``: array-like [count, *space.shape] (a Discrete space's shape is ()); integer dtype for
    Discrete/MultiDiscrete, numeric for Box. ``who(k)`` names the k-th action in error messages.
    """
    dims, high = action_bounds(space)
    array = np.asarray(actions.detach().cpu() if isinstance(actions, torch.Tensor) else actions)  # host-ok
    expected = (count, *space.shape)
    if array.shape != expected:
        raise ValueError(f"actions must have shape {expected} for {count} agent(s) with action space {space}, "
                         f"got {array.shape}")
    if high is not None:
        # A float would be truncated silently by the int cast; demand integers as gymnasium's spaces do.
        if not (np.issubdtype(array.dtype, np.integer) or array.dtype == np.bool_):
            raise ValueError(f"actions for {space} must be integers, got dtype {array.dtype}")
        array = array.astype(np.int64).reshape(count, dims)
        bad = (array < 0) | (array >= high)
        if bad.any():
            k, d = (int(v) for v in np.argwhere(bad)[0])
            raise ValueError(f"action {int(array[k, d])} of {who(k)} is out of range [0, {int(high[d])}) "
                             f"(action space {space})")
        return array
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        raise ValueError(f"actions for {space} must be numbers, got dtype {array.dtype}")
    return array.astype(np.float32).reshape(count, dims)


def random_actions(space: gymnasium.Space, out: torch.Tensor, generator: torch.Generator) -> None:
    """Fill ``out`` [..., action_dims] with uniform actions of ``space`` drawn from ``generator``."""
    dims, high = action_bounds(space)
    shape = out.shape[:-1]
    if high is not None:
        # Integers drawn per action dimension, in place (the draws of torch.randint, without its temporary):
        # exact for every n, where rand() * n can round up to n in float32.
        for d in range(dims):
            out[..., d].random_(0, int(high[d]), generator=generator)
        return
    low = torch.as_tensor(space.low.reshape(dims), device=out.device)
    width = torch.as_tensor((space.high - space.low).reshape(dims), device=out.device)
    u = torch.rand((*shape, dims), generator=generator, device=out.device)
    torch.addcmul(low, u, width, out=out)


def check_random_space(space: gymnasium.Space, group: str) -> None:
    """Random actions need finite Box bounds; say so when the space cannot be sampled."""
    if not is_discrete(space) and not (np.isfinite(space.low).all() and np.isfinite(space.high).all()):
        raise ValueError(f"group {group!r} has an unbounded Box action space {space}: uniform random actions "
                         "are undefined, pass other_actions='noop' or a callable")


def without_own_settings(adapter: str, why: str, params: dict, **own) -> dict:
    """``params`` (``make``'s keyword arguments passed through an adapter) without the ones the adapter
    sets itself (``own``: name -> its value); passing one with another value is a ValueError naming it,
    where Python would only say "got multiple values for keyword argument". ``why``: the adapter's reason."""
    params = dict(params)
    for name, ours in own.items():
        if name in params:
            theirs = params.pop(name)
            # a flag only equals a flag: 1 is not autoreset=True, True is not num_envs=1
            is_flag = isinstance(theirs, (bool, np.bool_)), isinstance(ours, bool)
            if is_flag[0] != is_flag[1] or theirs != ours:
                raise ValueError(f"{adapter} makes its env with {name}={ours!r} ({why}); {name}={theirs!r} "
                                 f"clashes with it: leave {name} out")
    return params


def check_open(adapter) -> None:
    """RuntimeError when ``adapter.close()`` has been called: its env is released."""
    if adapter.closed:
        raise RuntimeError(f"this {type(adapter).__name__} is closed: close() released its gpurl env; "
                           "make a new adapter")
