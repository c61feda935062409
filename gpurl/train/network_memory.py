"""Network widths refused before any parameter is allocated, with the bytes they would need."""
from __future__ import annotations

import torch

from ..algos.layers import mlp_parameters
from ..envs.memory import require_memory
from .config import TrainConfig

#: float32 copies of every trained parameter that any algorithm keeps at least: the weights, their gradients
#: and Adam's two moments.
PARAMETER_COPIES = 4


def check_networks_fit(cfg: TrainConfig, trained_groups: dict, device: torch.device) -> None:
    """Refuse network widths whose parameters cannot fit, before any is allocated (``--hidden 100000000,100000000``
    was killed by the OOM killer at 24 GB). A lower bound for every algorithm: each trained group has at least one
    MLP from its policy input through ``hidden`` to one output, kept PARAMETER_COPIES times in float32."""
    p = cfg.algo_params
    parameters = sum(mlp_parameters(g.obs_dim * p.frame_stack, p.hidden, 1) for g in trained_groups.values())
    require_memory(parameters * PARAMETER_COPIES * 4, device,
                   f"hidden={','.join(map(str, p.hidden))}: the networks of {len(trained_groups)} trained group(s) "
                   f"({parameters} parameters at least, each with its gradient and Adam's two moments)",
                   "pass smaller --hidden widths")


__all__ = ["PARAMETER_COPIES", "check_networks_fit"]
