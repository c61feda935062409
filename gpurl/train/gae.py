"""GAE for the trainer: the reference now lives in :mod:`gpurl.fusion.gae` beside its fused Triton kernel
(and the ``gpurl::gae`` op, :func:`gpurl.fusion.gae.gae`); this module re-exports it."""
from __future__ import annotations

from ..fusion.gae import gae_ref

__all__ = ["gae_ref"]
