"""Fused Triton fragments, each beside its torch reference (see DESIGN.md, layer "fusion").

- :mod:`gpurl.fusion.gae`: GAE(lambda) with terminated vs truncated episodes: :func:`gae_ref` (torch),
  :func:`gae_triton` (one fused reverse scan per column block) and :func:`gae`, which dispatches through
  the ``torch.ops.gpurl.gae`` op (CPU: reference, CUDA: Triton) or a forced backend.

- :mod:`gpurl.fusion.actor`: fused actor inference (MLP + categorical heads + counter-RNG sampling +
  log-prob + value in one kernel per group): :func:`actor_step_ref` (torch), :func:`actor_step_triton`,
  the ``torch.ops.gpurl.actor_step`` op and :class:`FusedActor` (:mod:`actor_op`), over the static
  padded weights of :class:`PackedPolicy` (:mod:`packing`).
- :mod:`gpurl.fusion.graph`: the CUDA-graph rollout.

Importing defines the ``gpurl::gae`` and ``gpurl::actor_step`` torch ops and nothing else; Triton is optional (only
:func:`gae_triton` needs it).
"""
from .actor import actor_step_ref, actor_step_triton
from .actor_op import FusedActor
from .gae import GAE_BLOCK, GAE_NUM_WARPS, gae, gae_fused_kernel, gae_ref, gae_triton
from .packing import PackedPolicy

__all__ = ["GAE_BLOCK", "GAE_NUM_WARPS", "FusedActor", "PackedPolicy", "actor_step_ref", "actor_step_triton", "gae",
           "gae_fused_kernel", "gae_ref", "gae_triton"]
