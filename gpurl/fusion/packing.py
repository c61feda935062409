"""Static, padded copies of a policy's weights: what the fused actor kernel reads.

A CUDA graph captures pointers, not values, so the rollout reads weights from buffers allocated once;
``PackedPolicy.sync()`` copies the current parameters in after every update (a handful of small
copies per iteration, not per step). Padding makes every tile a power of two the kernel can load
without masks: hidden widths pad to HP with zero weights (tanh(0) = relu(0) = 0, so padded units
contribute nothing), each categorical head pads to NP logits whose bias is -1e30 (probability 0).

:class:`PackedPolicy` packs a feed-forward actor-critic (the critic left out when the policy has none),
:class:`PackedRecurrentPolicy` a recurrent actor (first layer, GRU cell, the rest of the MLP; never a
critic: the GRU kernel computes no value).
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
    ``nn.Sequential`` MLPs of the same widths, ``critic`` may be None, ``obs_norm`` has ``mean``/``var``
    buffers or is an identity, ``dist.nvec`` lists the head sizes).

    Buffers (float32 unless noted), L = hidden layers, HP = padded width, IP = padded input, NP =
    padded head size, HEADS = number of heads:
    ``norm_mean``/``norm_rstd`` [IP]; ``a_w0``/``c_w0`` [IP, HP]; ``a_wh``/``c_wh`` [max(L-1,1), HP, HP];
    ``a_b``/``c_b`` [L, HP]; ``a_wo`` [HP, HEADS * NP]; ``a_bo`` [HEADS * NP]; ``c_wo`` [HP];
    ``c_bo`` [1]; ``nvec`` int32 [HEADS]. Without a critic (``with_value`` false) the ``c_*`` buffers
    are one-element placeholders the kernel never reads.
    """

    def __init__(self, policy: nn.Module, activation: str):
        _check_categorical(policy)
        if getattr(policy, "recurrent", False):
            raise TypeError("a recurrent policy packs as PackedRecurrentPolicy (the GRU actor kernel)")
        self.policy = policy
        self.activation = activation
        self.with_value = policy.critic is not None
        actor = _linears(policy.actor)
        widths = [layer.out_features for layer in actor[:-1]]
        if self.with_value and widths != [layer.out_features for layer in _linears(policy.critic)[:-1]]:
            raise ValueError("actor and critic must have the same hidden widths")
        self.in_dim = actor[0].in_features
        self.layers = len(widths)
        self.nvec = list(policy.dist.nvec)
        self.heads = len(self.nvec)
        self.IP, self.HP = next_pow2(self.in_dim), next_pow2(max(widths))
        # At 128 and more hidden units, 16-wide heads make ptxas spill (the last dot's 16-column layout
        # carries back into the hidden layers' registers); 32 do not (the compile tier checks).
        self.NP = next_pow2(max(self.nvec), at_least=16 if self.HP <= 64 else 32)
        dev = actor[0].weight.device
        z = lambda *shape: torch.zeros(shape, dtype=torch.float32, device=dev)  # noqa: E731
        L, IP, HP = self.layers, self.IP, self.HP
        self.norm_mean, self.norm_rstd = z(IP), z(IP)
        self.a_w0, self.a_wh, self.a_b = z(IP, HP), z(max(L - 1, 1), HP, HP), z(L, HP)
        if self.with_value:
            self.c_w0, self.c_wh, self.c_b = z(IP, HP), z(max(L - 1, 1), HP, HP), z(L, HP)
            self.c_wo, self.c_bo = z(HP), z(1)
        else:
            self.c_w0, self.c_wh, self.c_b, self.c_wo, self.c_bo = z(1), z(1), z(1), z(1), z(1)
        _output_buffers(self, policy, dev)
        self.sync()

    @torch.no_grad()
    def sync(self) -> None:
        """Copy the policy's current parameters (and normalisation statistics) into the buffers."""
        p = self.policy
        _sync_norm(p.obs_norm, self.norm_mean, self.norm_rstd, self.in_dim)
        mlps = [(_linears(p.actor), self.a_w0, self.a_wh, self.a_b)]
        if self.with_value:
            mlps.append((_linears(p.critic), self.c_w0, self.c_wh, self.c_b))
        for linears, w0, wh, b in mlps:
            first, *hidden, _ = linears
            w0[:first.in_features, :first.out_features].copy_(first.weight.T)
            b[0, :first.out_features].copy_(first.bias)
            _sync_hidden(hidden, wh, b[1:])
        _sync_heads(_linears(p.actor)[-1], self.nvec, self.NP, self.a_wo, self.a_bo)
        if self.with_value:
            value_out = _linears(p.critic)[-1]
            self.c_wo[:value_out.in_features].copy_(value_out.weight[0])
            self.c_bo.copy_(value_out.bias)

    def tensors(self) -> list[torch.Tensor]:
        """The buffers in the order the kernel and the op take them."""
        return [self.norm_mean, self.norm_rstd, self.a_w0, self.a_wh, self.a_b, self.a_wo, self.a_bo,
                self.c_w0, self.c_wh, self.c_b, self.c_wo, self.c_bo, self.nvec_t]


class PackedRecurrentPolicy:
    """Padded weights of a recurrent actor with categorical heads (``ActorCritic(recurrent=True)``: its
    ``actor`` a :class:`~gpurl.algos.gru.RecurrentActor`, with ``embed``, ``input_gates``,
    ``hidden_gates`` and ``head``); what ``gpurl.fusion.gru_actor`` reads. The critic, if any, is not
    packed (the GRU kernel computes no value).

    Every width, the GRU's H = widths[0] included, pads to HP = next_pow2(max(widths)): a padded unit
    has zero weights and biases everywhere, so from a zero state (the kernel loads padded units as 0)
    its gates are r = z = 1/2 and its candidate tanh(0) = 0, and it stays 0, feeding nothing (its
    weights in every later layer are zero too).

    Buffers (float32 unless noted), G = head layers (``len(widths) - 1``): ``norm_mean``/``norm_rstd``
    [IP]; ``w0`` [IP, HP], ``b0`` [HP] (the first layer); ``wx``/``wh`` [3 * HP, HP] (input and hidden
    gates as PyTorch stores them, [out, in]: row blocks r, z, n of HP each), ``bx``/``bh`` [3 * HP];
    ``a_wh`` [max(G, 1), HP, HP], ``a_b`` [max(G, 1), HP] (the rest of the MLP); ``a_wo`` [HP, HEADS *
    NP], ``a_bo`` [HEADS * NP]; ``nvec`` int32 [HEADS].
    """

    def __init__(self, policy: nn.Module, activation: str):
        _check_categorical(policy)
        if not getattr(policy, "recurrent", False):
            raise TypeError("PackedRecurrentPolicy packs recurrent policies (ActorCritic(recurrent=True))")
        self.policy = policy
        self.activation = activation
        actor = policy.actor
        first, head = _linears(actor.embed)[0], _linears(actor.head)
        widths = [first.out_features] + [layer.out_features for layer in head[:-1]]
        self.in_dim, self.hidden_size = first.in_features, actor.hidden_size
        self.head_layers = len(widths) - 1
        self.nvec = list(policy.dist.nvec)
        self.heads = len(self.nvec)
        self.IP, self.HP, self.NP = next_pow2(self.in_dim), next_pow2(max(widths)), next_pow2(max(self.nvec))
        dev = first.weight.device
        z = lambda *shape: torch.zeros(shape, dtype=torch.float32, device=dev)  # noqa: E731
        G, IP, HP = self.head_layers, self.IP, self.HP
        self.norm_mean, self.norm_rstd = z(IP), z(IP)
        self.w0, self.b0 = z(IP, HP), z(HP)
        self.wx, self.bx, self.wh, self.bh = z(3 * HP, HP), z(3 * HP), z(3 * HP, HP), z(3 * HP)
        self.a_wh, self.a_b = z(max(G, 1), HP, HP), z(max(G, 1), HP)
        _output_buffers(self, policy, dev)
        self.sync()

    @torch.no_grad()
    def sync(self) -> None:
        """Copy the policy's current parameters (and normalisation statistics) into the buffers."""
        p, actor, HP = self.policy, self.policy.actor, self.HP
        _sync_norm(p.obs_norm, self.norm_mean, self.norm_rstd, self.in_dim)
        first = _linears(actor.embed)[0]
        self.w0[:first.in_features, :first.out_features].copy_(first.weight.T)
        self.b0[:first.out_features].copy_(first.bias)
        for gates, w, b in ((actor.input_gates, self.wx, self.bx), (actor.hidden_gates, self.wh, self.bh)):
            H = gates.out_features // 3
            for g, (wg, bg) in enumerate(zip(gates.weight.chunk(3, 0), gates.bias.chunk(3, 0))):
                w[g * HP:g * HP + H, :gates.in_features].copy_(wg)
                b[g * HP:g * HP + H].copy_(bg)
        *hidden, out = _linears(actor.head)
        _sync_hidden(hidden, self.a_wh, self.a_b)
        _sync_heads(out, self.nvec, self.NP, self.a_wo, self.a_bo)

    def tensors(self) -> list[torch.Tensor]:
        """The buffers in the order the kernel takes them."""
        return [self.norm_mean, self.norm_rstd, self.w0, self.b0, self.wx, self.bx, self.wh, self.bh,
                self.a_wh, self.a_b, self.a_wo, self.a_bo, self.nvec_t]


def _check_categorical(policy: nn.Module) -> None:
    if not hasattr(policy.dist, "nvec"):
        raise TypeError("the fused actor supports categorical heads (Discrete/MultiDiscrete) only")


def _output_buffers(packed, policy: nn.Module, device: torch.device) -> None:
    """What both packings end with: the heads' output layer ``a_wo`` [HP, HEADS * NP] and ``a_bo`` [HEADS * NP]
    (padding logits NEG: never sampled), the head sizes ``nvec_t`` int32 [HEADS] and the normalisation clip."""
    width = packed.heads * packed.NP
    packed.a_wo = torch.zeros(packed.HP, width, dtype=torch.float32, device=device)
    packed.a_bo = torch.full((width,), NEG, device=device)
    packed.nvec_t = torch.tensor(packed.nvec, dtype=torch.int32, device=device)
    packed.norm_clip = _norm_clip(policy)


def _norm_clip(policy: nn.Module) -> float | None:
    return float(policy.obs_norm.clip) if hasattr(policy.obs_norm, "clip") else None


def _sync_norm(norm: nn.Module, mean: torch.Tensor, rstd: torch.Tensor, in_dim: int) -> None:
    if hasattr(norm, "mean"):
        mean[:in_dim].copy_(norm.mean)
        rstd[:in_dim].copy_(torch.rsqrt(norm.var + 1e-8))
    else:
        rstd[:in_dim].fill_(1.0)


def _sync_hidden(hidden: list[nn.Linear], wh: torch.Tensor, b: torch.Tensor) -> None:
    """Hidden layers k = 0.. into wh[k] [HP, HP] (transposed) and b[k] [HP]."""
    for k, layer in enumerate(hidden):
        wh[k, :layer.in_features, :layer.out_features].copy_(layer.weight.T)
        b[k, :layer.out_features].copy_(layer.bias)


def _sync_heads(out: nn.Linear, nvec: list[int], NP: int, wo: torch.Tensor, bo: torch.Tensor) -> None:
    """The output layer's rows of head h into columns h * NP .. h * NP + nvec[h] of wo (bo)."""
    start = 0
    for h, n in enumerate(nvec):
        cols = slice(h * NP, h * NP + n)
        wo[:out.in_features, cols].copy_(out.weight[start:start + n].T)
        bo[cols].copy_(out.bias[start:start + n])
        start += n


__all__ = ["NEG", "PackedPolicy", "PackedRecurrentPolicy", "next_pow2"]
