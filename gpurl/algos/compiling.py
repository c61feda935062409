"""How gpurl compiles its torch definitions (acting steps, losses) into fast paths.

``torch.compile`` with inductor: on the CPU, C++ loops with vectorised, fused elementwise work around
the GEMMs (which stay MKL/oneDNN calls); on CUDA, Triton kernels. Options:
- automatic dynamic shapes (``dynamic=None``): the first call compiles for its exact sizes, with every
  Python float a constant (``dynamic=True`` would pass module-level floats as host scalar tensors built on
  every call); a size that changes later (a one-env evaluation beside a training batch) recompiles once
  with that size symbolic, never once per size;
- ``fullgraph=True``: a definition that cannot be captured whole is an error, never a silent fall
  back to eager;
- on the CPU, multiply-adds contract into FMA instructions (inductor's default keeps them apart, for
  bit-compatibility with eager; the policies' tanh polynomial is mostly multiply-adds);
- on x86-64, loops vectorise 256 bits wide (AVX2) even where AVX-512 exists: these kernels are short
  elementwise passes over a few MB, where 512-bit code runs slower (lower clocks, longer warm-up of
  the wide units) on the Xeon (Sapphire Rapids) gpurl was measured on.

Compilation is lazy (the first call compiles) and cached on disk by inductor's FX graph cache, whose
directory the entry point chooses (:func:`gpurl.train.process.configure_process`): a second run of
the same configuration loads the compiled code instead of building it again.
"""
from __future__ import annotations

import platform
from typing import Callable

import torch

#: inductor options of every gpurl fast path (see the module docstring)
COMPILE_OPTIONS = {"cpp.enable_floating_point_contract_flag": "fast",
                   **({"cpp.simdlen": 256} if platform.machine().lower() in ("x86_64", "amd64") else {})}


#: inductor options of a fast path that evaluates the counter RNG (:mod:`gpurl.fusion.counter_rng`): its
#: chained integer mixes, fused into one expression, took inductor's CPU code generation over a minute on
#: 2 vCPUs (an acting step 77 s, cold cache); keeping intermediate results as buffers brought it to 23 s,
#: at the same speed per call.
RNG_COMPILE_OPTIONS = {**COMPILE_OPTIONS, "realize_opcount_threshold": 8}


def compile_step(fn: Callable, rng: bool = False) -> Callable:
    """``fn`` compiled as every gpurl fast path is (see the module docstring); ``rng``: ``fn`` draws from
    the counter RNG (RNG_COMPILE_OPTIONS)."""
    return torch.compile(fn, dynamic=None, fullgraph=True, options=RNG_COMPILE_OPTIONS if rng else COMPILE_OPTIONS)


__all__ = ["COMPILE_OPTIONS", "RNG_COMPILE_OPTIONS", "compile_step"]
