"""Fused fragments, each held to a torch definition (see DESIGN.md, layer "fusion").

- :mod:`gpurl.fusion.gae`: GAE(lambda) with terminated vs truncated episodes: :func:`gae_ref` (torch),
  :func:`gae_triton` (one fused reverse scan per column block) and :func:`gae`, which dispatches through
  the ``torch.ops.gpurl.gae`` op (CPU: reference, CUDA: Triton) or a forced backend.
- :mod:`gpurl.fusion.actor`: fused actor inference (MLP + categorical heads + counter-RNG sampling +
  log-prob + value in one kernel per group), held to ``gpurl.algos.nets.ActorCritic.act``, over the
  static padded weights of :class:`PackedPolicy` (:mod:`packing`).
- :mod:`gpurl.fusion.gru_actor`: one step of a recurrent (GRU) categorical actor in one kernel (state
  in, action, log-prob and next state out; no value), over :class:`PackedRecurrentPolicy`.
- :mod:`gpurl.fusion.q_actor`: epsilon-greedy acting of a Q-network in one kernel (MLP, argmax, the
  counter-RNG explore and random-action draws), held to ``gpurl.algos.q_nets.QNetwork.act``.
- :mod:`gpurl.fusion.activations`: the policies' tanh, one rational function in torch and in Triton.
- :mod:`gpurl.fusion.counter_rng`: the counter-based uniforms acting samples with.
- :mod:`gpurl.fusion.graph`: the CUDA-graph rollout.

Importing defines the ``gpurl::gae`` torch op and nothing else; Triton is optional.
"""
from .actor import actor_step_triton
from .gae import GAE_BLOCK, GAE_NUM_WARPS, gae, gae_fused_kernel, gae_ref, gae_triton
from .gru_actor import gru_actor_step_triton
from .packing import PackedPolicy, PackedRecurrentPolicy
from .q_actor import pack_q_network, q_actor_step_triton

__all__ = ["GAE_BLOCK", "GAE_NUM_WARPS", "PackedPolicy", "PackedRecurrentPolicy", "actor_step_triton", "gae",
           "gae_fused_kernel", "gae_ref", "gae_triton", "gru_actor_step_triton", "pack_q_network",
           "q_actor_step_triton"]
