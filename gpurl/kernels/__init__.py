"""gpurl's kernel-authoring toolkit: write an env once in plain Python, run it on CPU and CUDA.

- :func:`device` marks helpers; :func:`per_agent` / :func:`per_env` make phases; :class:`EnvKernel`
  compiles a list of phases for ``"cpu"`` (Numba, parallel over envs) or ``"cuda"`` (numba-cuda).
- :func:`per_agent_team` makes a team phase (:mod:`.team`): a team of threads (a warp on CUDA) works on one
  agent at a time, sharing out ``team_range`` loops and the work of :func:`k_nearest_team`, with scratch rows
  of its own (:func:`team_row`).
- :func:`clamp_action` / :func:`clip_action`: a discrete action value read as an index, clamped into its
  space; a Box component clipped into its bounds (NaN: the lower one).
- Counter-based RNG (:func:`random_uniform`, ...), float32 math with one meaning everywhere
  (:func:`cos32`, :func:`sin32`), k nearest neighbours (:func:`k_nearest`; :func:`k_nearest_team` in a team
  phase), per-lane scratch
  (:func:`lane`), torch zero-copy views (:mod:`.interop`).
- Build constants (:func:`freeze_constants`): module globals, sizes say, fixed for one build so that
  Numba compiles them as literals (``EnvKernel.launch(..., constants=...)``).
- Errors in author code name the phase and the author's file and line (:class:`KernelTypingError` and
  its kinds: a helper without ``@device``, a phase of the wrong kind, accidental float64, an allocation;
  :class:`KernelIndexError`); :meth:`EnvKernel.run_python` runs the phases uncompiled for debugging.

Importing this package compiles nothing; builds happen on first launch.
"""
from .actions import clamp_action, clip_action
from .errors import (KernelAllocationError, KernelFloat64Error, KernelHelperError, KernelIndexError,
                     KernelSignatureError, KernelTypingError)
from .math32 import cos32, fmod32, sin32
from .neighbors import count_within, k_nearest, pair_distance
from .neighbors_team import k_nearest_team, team_knn_scratch
from .program import EnvKernel, Phase, block_size, per_agent, per_agent_team, per_env
from .rng import mix64, random_below, random_u32, random_uniform
from .scratch import lane, num_lanes
from .targets import DeviceFunction, device, freeze_constants
from .team import team_barrier, team_count, team_leader, team_range, team_row, team_shuffle, team_tally

__all__ = [
    "DeviceFunction", "EnvKernel", "KernelAllocationError", "KernelFloat64Error", "KernelHelperError",
    "KernelIndexError", "KernelSignatureError", "KernelTypingError", "Phase", "block_size", "clamp_action", "clip_action", "cos32",
    "count_within", "device", "fmod32", "freeze_constants", "k_nearest", "k_nearest_team", "lane", "mix64",
    "num_lanes", "pair_distance", "per_agent", "per_agent_team", "per_env", "random_below", "random_u32",
    "random_uniform", "sin32", "team_barrier", "team_count", "team_knn_scratch", "team_leader", "team_range",
    "team_row", "team_shuffle", "team_tally",
]
