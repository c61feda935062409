"""A policy's input from stacked observation frames, written once in torch.

A rollout storage hands a policy the frames it reads as views (:meth:`RolloutStorage.frame_views`), and this
function makes the input of them, so that a compiled acting step does the stacking inside its region.
"""
from __future__ import annotations

import torch


def stack_frames(frames: tuple[torch.Tensor, ...], starts: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """The policy input [..., E, n, d * len(frames)] of ``frames`` (float32 [..., E, n, d] each: the current
    observation, then 1, 2, ... steps back) and ``starts`` (bool [..., E], one fewer: ``starts[h - 1]`` says an
    episode starts between frame h and frame h - 1). A frame of an earlier episode than the current one is
    zeroed."""
    if len(frames) == 1:
        return frames[0]
    out, valid = [frames[0]], None
    for frame, start in zip(frames[1:], starts):
        valid = ~start if valid is None else valid & ~start
        out.append(frame * valid[..., None, None])
    return torch.cat(out, -1)


__all__ = ["stack_frames"]
