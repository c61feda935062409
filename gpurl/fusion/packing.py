"""Static, padded copies of a policy's weights: what the fused actor kernel reads.

A CUDA graph captures pointers, not values, so the rollout reads weights from buffers allocated once;
``PackedPolicy.sync()`` copies the current parameters in after every update (a handful of small
copies per iteration, not per step). Padding makes every tile a power of two the kernel can load
without masks: hidden widths pad to HP with zero weights (tanh(0) = relu(0) = 0, so padded units
contribute nothing), each categorical head pads to NP logits whose bias is -1e30 (probability 0).
"""
from __future__ import annotations

import torch
from torch import nn

NEG = -1.0e30


def next_pow2(n: int, at_least: int = 16) -> int:
    p = at_least
    while p < n:
        p *= 2
    return p


def _linears(seq: nn.Sequential) -> list[nn.Linear]:
    return [m for m in seq if isinstance(m, nn.Linear)]


class PackedPolicy:
    """Padded weights of an actor-critic with categorical heads (duck-typed: ``actor``/``critic`` are
    ``nn.Sequential`` MLPs of the same widths, ``obs_norm`` has ``mean``/``var`` buffers or is an
    identity, ``dist.nvec`` lists the head sizes).

    Buffers (float32 unless noted), L = hidden layers, HP = padded width, IP = padded input, NP =
    padded head size, HEADS = number of heads:
    ``norm_mean``/``norm_rstd`` [IP]; ``a_w0``/``c_w0`` [IP, HP]; ``a_wh``/``c_wh`` [max(L-1,1), HP, HP];
    ``a_b``/``c_b`` [L, HP]; ``a_wo`` [HP, HEADS * NP]; ``a_bo`` [HEADS * NP]; ``c_wo`` [HP];
    ``c_bo`` [1]; ``nvec`` int32 [HEADS].
    """

    def __init__(self, policy: nn.Module, activation: str):
        if not hasattr(policy.dist, "nvec"):
            raise TypeError("the fused actor supports categorical heads (Discrete/MultiDiscrete) only")
        self.policy = policy
        self.activation = activation
        actor, critic = _linears(policy.actor), _linears(policy.critic)
        widths = [layer.out_features for layer in actor[:-1]]
        if widths != [layer.out_features for layer in critic[:-1]]:
            raise ValueError("actor and critic must have the same hidden widths")
        self.in_dim = actor[0].in_features
        self.layers = len(widths)
        self.nvec = list(policy.dist.nvec)
        self.heads = len(self.nvec)
        self.IP, self.HP, self.NP = next_pow2(self.in_dim), next_pow2(max(widths)), next_pow2(max(self.nvec))
        dev = actor[0].weight.device
        z = lambda *shape: torch.zeros(shape, dtype=torch.float32, device=dev)  # noqa: E731
        L, IP, HP, NP, H = self.layers, self.IP, self.HP, self.NP, self.heads
        self.norm_mean, self.norm_rstd = z(IP), z(IP)
        self.a_w0, self.c_w0 = z(IP, HP), z(IP, HP)
        self.a_wh, self.c_wh = z(max(L - 1, 1), HP, HP), z(max(L - 1, 1), HP, HP)
        self.a_b, self.c_b = z(L, HP), z(L, HP)
        self.a_wo, self.a_bo = z(HP, H * NP), torch.full((H * NP,), NEG, device=dev)
        self.c_wo, self.c_bo = z(HP), z(1)
        self.nvec_t = torch.tensor(self.nvec, dtype=torch.int32, device=dev)
        self.norm_clip = float(policy.obs_norm.clip) if hasattr(policy.obs_norm, "clip") else None
        self.sync()

    @torch.no_grad()
    def sync(self) -> None:
        """Copy the policy's current parameters (and normalisation statistics) into the buffers."""
        p = self.policy
        norm = p.obs_norm
        if hasattr(norm, "mean"):
            self.norm_mean[:self.in_dim].copy_(norm.mean)
            self.norm_rstd[:self.in_dim].copy_(torch.rsqrt(norm.var + 1e-8))
        else:
            self.norm_rstd[:self.in_dim].fill_(1.0)
        for linears, w0, wh, b in ((_linears(p.actor), self.a_w0, self.a_wh, self.a_b),
                                   (_linears(p.critic), self.c_w0, self.c_wh, self.c_b)):
            first, *hidden, _ = linears
            w0[:first.in_features, :first.out_features].copy_(first.weight.T)
            b[0, :first.out_features].copy_(first.bias)
            for k, layer in enumerate(hidden):
                wh[k, :layer.in_features, :layer.out_features].copy_(layer.weight.T)
                b[k + 1, :layer.out_features].copy_(layer.bias)
        out = _linears(p.actor)[-1]
        start = 0
        for h, n in enumerate(self.nvec):
            cols = slice(h * self.NP, h * self.NP + n)
            self.a_wo[:out.in_features, cols].copy_(out.weight[start:start + n].T)
            self.a_bo[cols].copy_(out.bias[start:start + n])
            start += n
        value_out = _linears(p.critic)[-1]
        self.c_wo[:value_out.in_features].copy_(value_out.weight[0])
        self.c_bo.copy_(value_out.bias)

    def tensors(self) -> list[torch.Tensor]:
        """The buffers in the order the kernel and the op take them."""
        return [self.norm_mean, self.norm_rstd, self.a_w0, self.a_wh, self.a_b, self.a_wo, self.a_bo,
                self.c_w0, self.c_wh, self.c_b, self.c_wo, self.c_bo, self.nvec_t]
