"""The PPO update of one group on the CPU without autograd: torch GEMMs, Numba for the rest.

:func:`gpurl.train.ppo.group_loss` + ``backward()`` spend more than half of a small-MLP minibatch on
the CPU outside the GEMMs (autograd's bookkeeping and ~100 small elementwise ops per group). This
path computes the same loss, gradients and statistics with the minimum of passes:

- per update: the policy inputs are normalised once (the statistics are fixed during an update), side
  by side with the old log-prob, advantage, return and value columns, so a minibatch is one row gather;
- forward: the actor's and critic's first layers are one GEMM (their weights stacked), later layers one
  GEMM each, activations in place;
- :func:`~gpurl.fusion.learner_cpu.head_loss_backward`: last activation, both heads, log-softmax,
  clipped surrogate, clipped value loss, entropy and their gradients back to the last hidden
  pre-activations, in one call (one pass over each chunk of rows per phase);
- backward: per layer a weight-gradient GEMM and an input-gradient GEMM, written straight into the
  parameters' ``.grad``, then one pass of :func:`~gpurl.fusion.learner_cpu.activation_backward`;
- a minibatch of more than :data:`BLOCK_ROWS` rows runs forward and backward in equal blocks, their
  gradients summed, so that the layer buffers stay in cache.

It covers the policies gpurl's envs train (:class:`~.policy.ActorCritic` MLPs with categorical heads)
on the CPU, on one rank or several (each writes its share of the gradients; the placement sums them as
it sums autograd's); :func:`fused_cpu_groups` says which runs qualify, others keep autograd
(``learner_backend='torch'`` forces it). The optimizer step is shared with the autograd path, the
gradient clipping is the same arithmetic on one flat buffer. Tests hold gradients, statistics and
whole updates to autograd's. Simple-tag PPO on 2 vCPUs: 0.27 -> 0.20 s per iteration (update 228 ->
153 ms), most of what is left being the GEMMs (~88 ms).
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..fusion.fast_tanh import Tanh
from ..kernels.interop import kernel_view
from ..fusion.learner_cpu import NUM_STATS, activate_, activation_backward, advantage_sums, head_loss_backward
from .distributions import Categoricals
from .policy import ActorCritic

#: Rows per block of a minibatch: a large minibatch is processed in equal blocks of at most this many rows
#: (their gradients summed), so that a block's layer buffers (~2 KB per row for 64-64 MLPs) stay in cache.
#: At 1024 simple-tag envs (38,400-row minibatches) the unblocked GEMMs ran ~1.4x slower per row than
#: at 256 envs (9,600 rows), where one block is the whole minibatch.
BLOCK_ROWS = 12288


def _np(t: torch.Tensor) -> np.ndarray:
    return kernel_view(t, "cpu")  # CPU tensors only (fused_cpu_groups checks): zero-copy views


def _linears(net: nn.Sequential) -> list[nn.Linear] | None:
    """The Linear layers of ``Linear, act, ..., Linear`` (one activation kind), else None."""
    mods = list(net)
    if len(mods) % 2 != 1 or len(mods) < 3:
        return None
    linears, acts = mods[0::2], mods[1::2]
    if not all(type(m) is nn.Linear for m in linears):
        return None
    if not (all(isinstance(m, Tanh) for m in acts) or all(isinstance(m, nn.ReLU) for m in acts)):
        return None
    return linears


def unsupported_reason(policy: nn.Module) -> str | None:
    """Why ``policy`` cannot use the fused CPU update (None: it can)."""
    if not isinstance(policy, ActorCritic):
        return f"{type(policy).__name__} is not an ActorCritic"
    if not isinstance(policy.dist, Categoricals):
        return "the action space is not categorical"
    actor, critic = _linears(policy.actor), _linears(policy.critic)
    if actor is None or critic is None:
        return "actor or critic is not an MLP of Linear layers and one activation"
    if [m.out_features for m in actor[:-1]] != [m.out_features for m in critic[:-1]]:
        return "actor and critic widths differ"
    if type(policy.actor[1]) is not type(policy.critic[1]):
        return "actor and critic activations differ"
    if any(p.device.type != "cpu" or p.dtype != torch.float32 for p in policy.parameters()):
        return "parameters are not float32 on the CPU"
    return None


class FusedGroupUpdate:
    """Loss and gradients of one group's minibatches (rows of ``inputs``) for a fixed policy structure.

    ``inputs`` float32 [B, in_dim], ``columns`` float32 [B, 4] (old log-prob, advantage, return, old
    value), ``actions`` int64 [B, heads]; ``max_rows``: the largest minibatch.
    """

    def __init__(self, policy: ActorCritic, inputs: torch.Tensor, columns: torch.Tensor, actions: torch.Tensor,
                 max_rows: int):
        self.policy = policy
        self.actor, self.critic = _linears(policy.actor), _linears(policy.critic)
        self.relu = isinstance(policy.actor[1], nn.ReLU)
        self.nvec = np.asarray(policy.dist.nvec, np.int64)
        widths = [m.out_features for m in self.actor[:-1]]
        self.w1 = widths[0]
        with torch.no_grad():
            self.table = torch.cat([policy.obs_norm(inputs), columns], 1)  # [B, in_dim + 4]
        self.in_dim = inputs.shape[1]
        self.actions = actions
        new = lambda *shape: torch.empty(*shape)  # noqa: E731
        self.rows = new(max_rows, self.table.shape[1])
        self.action_rows = torch.empty(max_rows, actions.shape[1], dtype=torch.int64)
        max_rows = min(max_rows, BLOCK_ROWS)  # the layer buffers hold one block of rows
        # Pre-activations (then activations, then their gradients) of each hidden layer: the first
        # layer's actor and critic columns side by side, later ones per network.
        self.z1, self.grad_z1 = new(max_rows, 2 * self.w1), new(max_rows, 2 * self.w1)
        self.za = [None] + [new(max_rows, w) for w in widths[1:]]
        self.zc = [None] + [new(max_rows, w) for w in widths[1:]]
        self.grad_za = [None] + [new(max_rows, w) for w in widths[1:-1]]
        self.grad_zc = [None] + [new(max_rows, w) for w in widths[1:-1]]
        self.grad_ha = [new(max_rows, w) for w in widths[:-1]]
        self.grad_hc = [new(max_rows, w) for w in widths[:-1]]
        self.w1_both, self.b1_both = new(2 * self.w1, self.in_dim), new(2 * self.w1)
        self.grad_w1_both, self.grad_b1_both = new(2 * self.w1, self.in_dim), new(2 * self.w1)
        self.no_columns = np.empty((max_rows, 0), np.float32)
        self.stats = np.zeros(NUM_STATS, np.float64)
        # Every gradient is a view of one flat buffer: clipping is one norm and one scale, not a
        # norm per tensor (~80 us of the ~90 us clip_grad_norm_ takes per group and minibatch).
        # An empty parameter (a categorical policy's log_std) gets an empty one, as autograd gives it
        # on several ranks (where the all-reduce needs every gradient).
        params = list(policy.parameters())
        self.flat_grad = torch.zeros(sum(p.numel() for p in params))
        # The sum over blocks, when a minibatch has more than one.
        self.block_grad_sum = torch.zeros_like(self.flat_grad) if self.rows.shape[0] > BLOCK_ROWS else None
        for p, g in zip(params, self.flat_grad.split([p.numel() for p in params])):
            p.grad = g.view_as(p)

    @torch.no_grad()
    def clip_grad_norm_(self, max_norm: float) -> None:
        """``nn.utils.clip_grad_norm_(policy.parameters(), max_norm)`` on the flat gradient."""
        total = torch.linalg.vector_norm(self.flat_grad)
        self.flat_grad.mul_((max_norm / (total + 1e-6)).clamp(max=1.0))

    @staticmethod
    def _advantage_normalisation(adv: np.ndarray, size: int, normalise: bool, comm) -> tuple:
        """(mean, 1 / (std + 1e-8)) as float32, as group_loss forms them: float64 moments summed over
        ranks, the unbiased std; (0, 1) when not normalising."""
        if not normalise or size <= 1:
            return np.float32(0.0), np.float32(1.0)
        total, squares = advantage_sums(adv)
        if comm.world_size > 1:
            moments = comm.all_reduce_(torch.tensor([total, squares], dtype=torch.float64))
            total, squares = moments.tolist()  # host-ok: a CPU tensor
        mean = total / size
        std = np.float32(np.sqrt(max(squares - size * mean * mean, 0.0) / (size - 1)))
        return np.float32(mean), np.float32(1.0) / (std + np.float32(1e-8))

    @torch.no_grad()
    def loss_and_grads(self, idx: torch.Tensor, size: int, cfg, comm) -> torch.Tensor:
        """Write the gradients of this rank's part ``idx`` [n] of a minibatch of ``size`` rows (over all
        ranks) into the policy's ``.grad``: this rank's share, as group_loss's backward gives it. Returns
        the share of the statistics, float32 [6] (STAT_NAMES order)."""
        n = idx.shape[0]
        if n == 0:  # none of this minibatch's rows are on this rank
            self._advantage_normalisation(np.zeros(0, np.float32), size, cfg.norm_adv, comm)
            self.flat_grad.zero_()
            return torch.zeros(NUM_STATS)
        rows = torch.index_select(self.table, 0, idx, out=self.rows[:n])
        actions = torch.index_select(self.actions, 0, idx, out=self.action_rows[:n])
        x, columns = rows[:, :self.in_dim], _np(rows[:, self.in_dim:])
        adv_mean, adv_scale = self._advantage_normalisation(columns[:, 1], size, cfg.norm_adv, comm)
        blocks = -(-n // BLOCK_ROWS)
        per_block = -(-n // blocks)  # equal blocks: no small remainder that costs a block's overheads
        stats_sum = np.zeros_like(self.stats)
        for b, lo in enumerate(range(0, n, per_block)):
            hi = min(n, lo + per_block)
            self._block(x[lo:hi], columns[lo:hi], actions[lo:hi], size, adv_mean, adv_scale, cfg)
            stats_sum += self.stats
            if blocks > 1:  # the kernels and GEMMs write a block's gradients; the minibatch's are their sum
                if b == 0:
                    self.block_grad_sum.copy_(self.flat_grad)
                else:
                    self.block_grad_sum.add_(self.flat_grad)
        if blocks > 1:
            self.flat_grad.copy_(self.block_grad_sum)
        return torch.from_numpy(stats_sum.astype(np.float32))

    def _block(self, x: torch.Tensor, columns: np.ndarray, actions: torch.Tensor, size: int, adv_mean, adv_scale,
               cfg) -> None:
        """Gradients (into ``.grad``) and statistics (into ``self.stats``) of one block of a minibatch's
        rows: x [n, in_dim], columns [n, 4], actions [n, heads]; sums over the block divided by the
        minibatch's ``size``."""
        za, zc = self._forward(x)
        a, c, L = self.actor[-1], self.critic[-1], len(self.actor) - 1
        # The last hidden layer's bias gradients: of its own Linear, or halves of the first layer's.
        grad_za_bias, grad_zc_bias = ((self.actor[L - 1].bias.grad, self.critic[L - 1].bias.grad) if L > 1 else
                                      (self.grad_b1_both[:self.w1], self.grad_b1_both[self.w1:]))
        head_loss_backward(
            _np(za), _np(zc), _np(a.weight), _np(a.bias), _np(c.weight[0]), _np(c.bias), self.nvec, _np(actions),
            columns, np.float32(size), adv_mean, adv_scale, np.float32(cfg.clip_coef), cfg.clip_vloss,
            np.float32(cfg.vf_coef), np.float32(cfg.ent_coef), self.relu, _np(a.weight.grad), _np(a.bias.grad),
            _np(c.weight.grad[0]), _np(c.bias.grad), _np(grad_za_bias), _np(grad_zc_bias), self.stats)
        self._backward(x, za, zc)

    def _forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Hidden layers of actor and critic for rows x [n, in_dim]: the last layer's pre-activations
        (za, zc [n, w]); every earlier layer's activations stay in the z buffers for the backward."""
        n, a, c = x.shape[0], self.actor, self.critic
        torch.cat([a[0].weight, c[0].weight], out=self.w1_both)
        torch.cat([a[0].bias, c[0].bias], out=self.b1_both)
        z1 = torch.addmm(self.b1_both, x, self.w1_both.t(), out=self.z1[:n])
        za, zc = z1[:, :self.w1], z1[:, self.w1:]
        for k in range(1, len(a) - 1):
            if k == 1:
                activate_(_np(z1), self.relu)
            else:
                activate_(_np(za), self.relu)
                activate_(_np(zc), self.relu)
            za = torch.addmm(a[k].bias, za, a[k].weight.t(), out=self.za[k][:n])
            zc = torch.addmm(c[k].bias, zc, c[k].weight.t(), out=self.zc[k][:n])
        return za, zc

    def _backward(self, x: torch.Tensor, grad_a: torch.Tensor, grad_c: torch.Tensor) -> None:
        """From the last hidden layer's pre-activation gradients (grad_a, grad_c [n, w]) to every hidden
        layer's weight and bias gradients, written into ``.grad``."""
        n, a, c, w1 = x.shape[0], self.actor, self.critic, self.w1
        z1 = self.z1[:n]
        for k in range(len(a) - 2, 0, -1):
            below_a = z1[:, :w1] if k == 1 else self.za[k - 1][:n]  # layer k's input activations
            below_c = z1[:, w1:] if k == 1 else self.zc[k - 1][:n]
            torch.mm(grad_a.t(), below_a, out=a[k].weight.grad)
            torch.mm(grad_c.t(), below_c, out=c[k].weight.grad)
            grad_ha = torch.mm(grad_a, a[k].weight, out=self.grad_ha[k - 1][:n])
            grad_hc = torch.mm(grad_c, c[k].weight, out=self.grad_hc[k - 1][:n])
            # Out of place: in place, possible aliasing would keep LLVM from vectorising the pass.
            if k == 1:
                activation_backward(_np(grad_ha), _np(grad_hc), _np(z1), _np(self.grad_z1[:n]),
                                    _np(self.grad_b1_both), self.relu)
            else:
                grad_a, grad_c = self.grad_za[k - 1][:n], self.grad_zc[k - 1][:n]
                for grad_h, below, out, layer in ((grad_ha, below_a, grad_a, a[k - 1]),
                                                  (grad_hc, below_c, grad_c, c[k - 1])):
                    activation_backward(_np(grad_h), self.no_columns[:n], _np(below), _np(out),
                                        _np(layer.bias.grad), self.relu)
        grad_z1 = z1 if len(a) == 2 else self.grad_z1[:n]  # one hidden layer: the head pass wrote it
        torch.mm(grad_z1.t(), x, out=self.grad_w1_both)
        a[0].weight.grad.copy_(self.grad_w1_both[:w1])
        c[0].weight.grad.copy_(self.grad_w1_both[w1:])
        a[0].bias.grad.copy_(self.grad_b1_both[:w1])
        c[0].bias.grad.copy_(self.grad_b1_both[w1:])


def fused_cpu_groups(policies: nn.ModuleDict, batches: dict, sizes: dict[str, int],
                     cfg) -> dict[str, FusedGroupUpdate] | None:
    """One :class:`FusedGroupUpdate` per group of ``batches`` (this rank's rows of a rollout of
    ``sizes[group]`` rows over all ranks) when the run qualifies (``learner_backend`` 'auto', every
    batch and policy on the CPU and supported), else None."""
    if cfg.learner_backend != "auto":
        return None
    for name, batch in batches.items():
        if batch.inputs.device.type != "cpu" or unsupported_reason(policies[name]) is not None:
            return None
    out = {}
    for name, b in batches.items():
        out[name] = FusedGroupUpdate(policies[name], b.inputs, b.columns(), b.actions,
                                     max_rows=min(len(b), -(-sizes[name] // cfg.minibatches)))
    return out


__all__ = ["FusedGroupUpdate", "fused_cpu_groups", "unsupported_reason"]
