"""Numba kernels of the CPU PPO update (:mod:`gpurl.train.ppo_cpu` calls them between torch GEMMs).

Autograd spends most of a small-MLP PPO minibatch outside the GEMMs on the CPU: ~100 small ops per
group (log-softmax, gathers, clipping, maxima and their backward twins) each read and write whole
[B, 64] tensors, and the graph bookkeeping costs more than their arithmetic. Here everything between
the last hidden layer's pre-activations and their gradient is one pass over the rows
(:func:`head_loss_backward`), and each earlier activation's backward is one pass with its bias
gradient (:func:`activation_backward`). The formulas are those of :func:`gpurl.train.ppo.group_loss`
differentiated by hand, including torch's tie rule for the elementwise maxima (a tie sends half the
gradient each way); tests hold the gradients and statistics to autograd's.

Shapes: ``n`` rows of the minibatch; ``w`` last hidden width; ``A`` = sum of the categorical heads'
sizes. Accumulations run per chunk of rows in float32 (as a GEMM does), the statistics in float64.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from .fast_tanh import _FAST, _tanh_scalar

#: Rows per parallel chunk: the per-chunk partial gradients ([A + 4, w]) stay in L1, and a
#: 3200-row minibatch still splits over two cores.
_CHUNK = 256

#: Statistics, in gpurl.train.ppo.STAT_NAMES order.
LOSS, PG_LOSS, V_LOSS, ENTROPY, APPROX_KL, CLIPFRAC = range(6)
NUM_STATS = 6


@numba.njit(fastmath=_FAST, error_model="numpy", inline="always")
def _activate(z, relu):
    if relu:
        return max(z, np.float32(0.0))
    return _tanh_scalar(z)


@numba.njit(fastmath=_FAST, error_model="numpy", inline="always")
def _slope(h, relu):
    """The activation's derivative from its output ``h``."""
    if relu:
        return np.float32(1.0) if h > 0 else np.float32(0.0)
    return np.float32(1.0) - h * h


@numba.njit(error_model="numpy", inline="always")
def _max_grads(a, b):
    """d max(a, b) / d(a, b) as torch assigns it: a tie splits the gradient."""
    if a > b:
        return np.float32(1.0), np.float32(0.0)
    if a < b:
        return np.float32(0.0), np.float32(1.0)
    return np.float32(0.5), np.float32(0.5)


@numba.njit(error_model="numpy", cache=True)
def advantage_sums(adv):
    """float64 (sum, sum of squares) of ``adv`` [n] (any stride): a minibatch's advantage moments."""
    s = 0.0
    sq = 0.0
    for i in range(adv.shape[0]):
        a = np.float64(adv[i])
        s += a
        sq += a * a
    return s, sq


@numba.njit(parallel=True, fastmath=_FAST, error_model="numpy", cache=True)
def head_loss_backward(za, zc, wa, ba, wc, bc, nvec, actions, columns, size, adv_mean, adv_scale, clip,
                       clip_vloss, vf_coef, ent_coef, relu, grad_wa, grad_ba, grad_wc, grad_bc, grad_za_bias,
                       grad_zc_bias, stats):
    """Forward from the last hidden pre-activations to the loss and back, for one group's minibatch.

    za [n, w], zc [n, w]: actor and critic pre-activations of the last hidden layer, overwritten with
    the loss's gradient with respect to them. wa [A, w], ba [A]: the actor head; wc [w], bc [1]: the
    critic head. nvec int64 [heads]; actions int64 [n, heads]; columns float32 [n, 4]: old log-prob,
    advantage, return, old value (any strides). ``size``: the minibatch's size over all ranks (means
    divide by it); the surrogate uses the advantages (adv - adv_mean) * adv_scale. Writes grad_wa [A, w], grad_ba [A], grad_wc [w], grad_bc [1], the bias gradients of
    the last hidden layer grad_za_bias [w] and grad_zc_bias [w], and stats float64 [6] (sums / size).
    """
    n, w = za.shape
    A = wa.shape[0]
    heads = nvec.shape[0]
    inv_size = np.float32(1.0) / np.float32(size)
    chunks = (n + _CHUNK - 1) // _CHUNK
    # Per chunk: rows 0..A-1 grad_wa, A grad_wc, A+1 grad_za_bias, A+2 grad_zc_bias; column 0 of
    # row A+3 grad_ba (A values) and grad_bc.
    partial = np.zeros((chunks, A + 4, max(w, A + 1)), np.float32)
    partial_stats = np.zeros((chunks, NUM_STATS), np.float64)
    for c in numba.prange(chunks):
        ha = np.empty(w, np.float32)
        hc = np.empty(w, np.float32)
        logp = np.empty(A, np.float32)
        prob = np.empty(A, np.float32)
        dlogits = np.empty(A, np.float32)
        grad_ha = np.empty(w, np.float32)
        acc = partial[c]
        st = partial_stats[c]
        for r in range(c * _CHUNK, min(n, (c + 1) * _CHUNK)):
            for j in range(w):
                ha[j] = _activate(za[r, j], relu)
            for j in range(w):
                hc[j] = _activate(zc[r, j], relu)
            value = bc[0]
            for j in range(w):
                value += wc[j] * hc[j]
            for k in range(A):
                s = ba[k]
                for j in range(w):
                    s += wa[k, j] * ha[j]
                logp[k] = s
            # Log-softmax per head, the taken actions' log-prob and the entropy.
            logp_taken = np.float32(0.0)
            entropy = np.float32(0.0)
            start = 0
            for h in range(heads):
                count = nvec[h]
                m = logp[start]
                for k in range(start + 1, start + count):
                    m = max(m, logp[k])
                total = np.float32(0.0)
                for k in range(start, start + count):
                    logp[k] -= m
                    prob[k] = math.exp(logp[k])
                    total += prob[k]
                log_total = np.float32(math.log(total))
                inv_total = np.float32(1.0) / total
                head_entropy = np.float32(0.0)
                for k in range(start, start + count):
                    logp[k] -= log_total
                    prob[k] *= inv_total
                    head_entropy -= prob[k] * logp[k]
                logp_taken += logp[start + actions[r, h]]
                entropy += head_entropy
                # The entropy's gradient, -p (log p + H), per head; the ratio's term is added below.
                for k in range(start, start + count):
                    dlogits[k] = ent_coef * prob[k] * (logp[k] + head_entropy)
                start += count
            log_ratio = logp_taken - columns[r, 0]
            ratio = np.float32(math.exp(log_ratio))
            adv = (columns[r, 1] - adv_mean) * adv_scale
            # Clipped surrogate: max(-adv * ratio, -adv * clamp(ratio)).
            surrogate = -adv * ratio
            if clip > 0:
                clipped_ratio = min(max(ratio, np.float32(1.0) - clip), np.float32(1.0) + clip)
                ga, gb = _max_grads(surrogate, -adv * clipped_ratio)
                inside = np.float32(1.0) if ratio >= np.float32(1.0) - clip and ratio <= np.float32(1.0) + clip \
                    else np.float32(0.0)
                pg = max(surrogate, -adv * clipped_ratio)
                d_ratio = -adv * (ga + gb * inside)
            else:
                pg = surrogate
                d_ratio = -adv
            d_logp = d_ratio * ratio
            start = 0
            for h in range(heads):
                taken = start + actions[r, h]
                for k in range(start, start + nvec[h]):
                    indicator = np.float32(1.0) if k == taken else np.float32(0.0)
                    dlogits[k] = (dlogits[k] + d_logp * (indicator - prob[k])) * inv_size
                start += nvec[h]
            # Value loss, optionally clipped around the old value.
            ret, old_value = columns[r, 2], columns[r, 3]
            err = value - ret
            if clip_vloss and clip > 0:
                delta = min(max(value - old_value, -clip), clip)
                err_clipped = old_value + delta - ret
                ga, gb = _max_grads(err * err, err_clipped * err_clipped)
                in_range = np.float32(1.0) if value - old_value >= -clip and value - old_value <= clip \
                    else np.float32(0.0)
                v_term = np.float32(0.5) * max(err * err, err_clipped * err_clipped)
                d_value = ga * err + gb * err_clipped * in_range
            else:
                v_term = np.float32(0.5) * err * err
                d_value = err
            d_value *= vf_coef * inv_size
            st[PG_LOSS] += pg
            st[V_LOSS] += v_term
            st[ENTROPY] += entropy
            st[APPROX_KL] += (ratio - np.float32(1.0)) - log_ratio
            if clip > 0 and abs(ratio - np.float32(1.0)) > clip:
                st[CLIPFRAC] += 1.0
            # Heads backward: weight and bias gradients, and through the last activation. Every inner
            # loop runs over j (the hidden units), so that LLVM vectorises it.
            grad_ha[:] = 0.0
            for k in range(A):
                d = dlogits[k]
                acc[A + 3, k] += d
                for j in range(w):
                    acc[k, j] += d * ha[j]
                for j in range(w):
                    grad_ha[j] += d * wa[k, j]
            acc[A + 3, A] += d_value
            for j in range(w):
                g = grad_ha[j] * _slope(ha[j], relu)
                za[r, j] = g
                acc[A + 1, j] += g
            for j in range(w):
                g = d_value * wc[j] * _slope(hc[j], relu)
                zc[r, j] = g
                acc[A, j] += d_value * hc[j]
                acc[A + 2, j] += g
    # Reduce the chunks (serially, in a fixed order: the result does not depend on the thread count).
    total = np.zeros(partial.shape[1:], np.float32)
    for c in range(chunks):
        total += partial[c]
    grad_wa[:, :] = total[:A, :w]
    grad_wc[:] = total[A, :w]
    grad_za_bias[:] = total[A + 1, :w]
    grad_zc_bias[:] = total[A + 2, :w]
    grad_ba[:] = total[A + 3, :A]
    grad_bc[0] = total[A + 3, A]
    sums = partial_stats.sum(axis=0)
    for i in range(NUM_STATS):
        stats[i] = sums[i] / size
    stats[LOSS] = stats[PG_LOSS] - ent_coef * stats[ENTROPY] + vf_coef * stats[V_LOSS]


@numba.njit(parallel=True, fastmath=_FAST, error_model="numpy", cache=True)
def activation_backward(grad_left, grad_right, h, out, grad_bias, relu):
    """out [n, wl + wr] = [grad_left | grad_right] * act'(h) and grad_bias [wl + wr] = its column sums.

    h [n, wl + wr]: the activation's output (``out`` may be ``h``: each element is read before it is
    written). grad_right may have 0 columns (one network's layer; two side by side for the actor's
    and critic's first layers, which share one GEMM).
    """
    n, wl = grad_left.shape
    wr = grad_right.shape[1]
    chunks = (n + _CHUNK - 1) // _CHUNK
    partial = np.zeros((chunks, wl + wr), np.float32)
    for c in numba.prange(chunks):
        acc = partial[c]
        for r in range(c * _CHUNK, min(n, (c + 1) * _CHUNK)):
            for j in range(wl):
                g = grad_left[r, j] * _slope(h[r, j], relu)
                out[r, j] = g
                acc[j] += g
            for j in range(wr):
                g = grad_right[r, j] * _slope(h[r, wl + j], relu)
                out[r, wl + j] = g
                acc[wl + j] += g
    total = np.zeros(wl + wr, np.float32)
    for c in range(chunks):
        total += partial[c]
    grad_bias[:] = total


@numba.njit(parallel=True, fastmath=_FAST, error_model="numpy", cache=True)
def activate_(z, relu):
    """z [n, w] = act(z) in place."""
    n = z.shape[0]
    for c in numba.prange((n + _CHUNK - 1) // _CHUNK):
        for r in range(c * _CHUNK, min(n, (c + 1) * _CHUNK)):
            for j in range(z.shape[1]):
                z[r, j] = _activate(z[r, j], relu)


__all__ = ["advantage_sums", "head_loss_backward", "activation_backward", "activate_", "NUM_STATS"]
