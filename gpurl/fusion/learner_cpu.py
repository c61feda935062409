"""Numba kernels of the CPU PPO update (:mod:`gpurl.train.ppo_cpu` calls them between torch GEMMs).

Autograd spends most of a small-MLP PPO minibatch outside the GEMMs on the CPU: ~100 small ops per
group (log-softmax, gathers, clipping, maxima and their backward twins) each read and write whole
[B, 64] tensors, and the graph bookkeeping costs more than their arithmetic. Here everything between
the last hidden layer's pre-activations and their gradient is one call (:func:`head_loss_backward`),
and each earlier activation's backward is one pass with its bias gradient (:func:`activation_backward`).
The formulas are those of :func:`gpurl.train.ppo.group_loss` differentiated by hand, including
torch's tie rule for the elementwise maxima (a tie sends half the gradient each way); tests hold the
gradients and statistics to autograd's.

Shapes: ``n`` rows of the minibatch; ``w`` last hidden width; ``A`` = sum of the categorical heads'
sizes. Accumulations run per chunk of rows in float32 (as a GEMM does), the statistics in float64.
"""
from __future__ import annotations

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


_LOG2E = np.float32(1.44269504088896341)
_LN2_HI, _LN2_LO = np.float32(0.693359375), np.float32(-2.12194440e-4)


@numba.njit(fastmath=_FAST, error_model="numpy", inline="always")
def exp32(x):
    """exp of a float32 within 3 ulp (Cephes' expf: 2^k times a degree-7 polynomial on [-ln2/2, ln2/2]),
    written as arithmetic and bit operations so that loops over it vectorise (libm's expf is a call per
    element, ~10x slower); below -87.3 the smallest normal float (~1.2e-38); NaN stays NaN."""
    x = min(max(x, np.float32(-87.33654)), np.float32(88.37626))
    k = np.float32(np.floor(x * _LOG2E + np.float32(0.5)))
    r = x - k * _LN2_HI - k * _LN2_LO
    p = np.float32(1.9875691500e-4)
    p = p * r + np.float32(1.3981999507e-3)
    p = p * r + np.float32(8.3334519073e-3)
    p = p * r + np.float32(4.1665795894e-2)
    p = p * r + np.float32(1.6666665459e-1)
    p = p * r + np.float32(5.0000001201e-1)
    p = p * r * r + r + np.float32(1.0)
    return p * np.int32((np.int32(k) + np.int32(127)) << np.int32(23)).view(np.float32)


@numba.njit(fastmath=_FAST, error_model="numpy", inline="always")
def log32(x):
    """log of a positive normal float32 within 2e-7 relative (Cephes' logf), vectorisable like exp32;
    NaN stays NaN."""
    bits = np.float32(x).view(np.int32)
    e = np.float32((bits >> np.int32(23)) - np.int32(127))
    m = np.int32((bits & np.int32(0x007FFFFF)) | np.int32(0x3F800000)).view(np.float32)  # [1, 2)
    big = m > np.float32(1.41421356)
    m = m * np.float32(0.5) if big else m
    e = e + np.float32(1.0) if big else e
    f = m - np.float32(1.0)
    z = f * f
    y = np.float32(7.0376836292e-2)
    y = y * f - np.float32(1.1514610310e-1)
    y = y * f + np.float32(1.1676998740e-1)
    y = y * f - np.float32(1.2420140846e-1)
    y = y * f + np.float32(1.4249322787e-1)
    y = y * f - np.float32(1.6668057665e-1)
    y = y * f + np.float32(2.0000714765e-1)
    y = y * f - np.float32(2.4999993993e-1)
    y = y * f + np.float32(3.3333331174e-1)
    y = y * f * z + e * _LN2_LO - np.float32(0.5) * z
    return x if x != x else f + y + e * _LN2_HI


@numba.njit(error_model="numpy", inline="always")
def _max_grads(a, b):
    """d max(a, b) / d(a, b) as torch assigns it: a tie splits the gradient. (For the surrogate and
    the value loss a tie changes nothing unless the advantage is 0: inside the clip range both
    branches have the same gradient. It is kept so that the formulas read as torch's.)"""
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
    divide by it); the surrogate uses the advantages (adv - adv_mean) * adv_scale. Writes grad_wa
    [A, w], grad_ba [A], grad_wc [w], grad_bc [1], the bias gradients of the last hidden layer
    grad_za_bias [w] and grad_zc_bias [w], and stats float64 [6] (sums / size).

    Per chunk of rows, three phases: (1) per row, over the hidden units: activations, logits, value;
    (2) over the chunk's rows, a head's action at a time: log-softmax, surrogate, value loss, entropy
    and their gradients (vectorised across rows: a row's own work here is a few scalars); (3) per row,
    over the hidden units: the heads' weight gradients and the gradient through the activation.
    """
    n, w = za.shape
    A = wa.shape[0]
    heads = nvec.shape[0]
    inv_size = np.float32(1.0) / np.float32(size)
    one = np.float32(1.0)
    chunks = (n + _CHUNK - 1) // _CHUNK
    # Per chunk: rows 0..A-1 grad_wa, A grad_wc, A+1 grad_za_bias, A+2 grad_zc_bias; row A+3 holds
    # grad_ba (A values) then grad_bc.
    partial = np.zeros((chunks, A + 4, max(w, A + 1)), np.float32)
    partial_stats = np.zeros((chunks, NUM_STATS), np.float64)
    for c in numba.prange(chunks):
        lo = c * _CHUNK
        R = min(n, lo + _CHUNK) - lo
        ha = np.empty((R, w), np.float32)
        hc = np.empty((R, w), np.float32)
        logits = np.empty((A, R), np.float32)   # then log-probabilities
        prob = np.empty((A, R), np.float32)
        dlogits = np.empty((A, R), np.float32)
        value = np.empty(R, np.float32)
        d_value = np.empty(R, np.float32)
        m = np.empty(R, np.float32)
        total = np.empty(R, np.float32)
        head_entropy = np.empty(R, np.float32)
        logp_taken = np.zeros(R, np.float32)
        entropy = np.zeros(R, np.float32)
        d_logp = np.empty(R, np.float32)
        # (1) Activations, logits, value.
        for i in range(R):
            r = lo + i
            for j in range(w):
                ha[i, j] = _activate(za[r, j], relu)
            for j in range(w):
                hc[i, j] = _activate(zc[r, j], relu)
            v = bc[0]
            for j in range(w):
                v += wc[j] * hc[i, j]
            value[i] = v
            for k in range(A):
                t = ba[k]
                for j in range(w):
                    t += wa[k, j] * ha[i, j]
                logits[k, i] = t
        # (2) Per head: log-softmax, the taken action's log-prob, entropy and its gradient.
        start = 0
        for h in range(heads):
            count = nvec[h]
            m[:] = logits[start]
            for k in range(start + 1, start + count):
                for i in range(R):
                    m[i] = max(m[i], logits[k, i])
            total[:] = 0.0
            for k in range(start, start + count):
                for i in range(R):
                    prob[k, i] = exp32(logits[k, i] - m[i])
                    total[i] += prob[k, i]
            for i in range(R):
                m[i] += log32(total[i])     # m: the log-normaliser from here on
                total[i] = one / total[i]
                head_entropy[i] = 0.0
            for k in range(start, start + count):
                for i in range(R):
                    logits[k, i] -= m[i]
                    prob[k, i] *= total[i]
                    head_entropy[i] -= prob[k, i] * logits[k, i]
                    logp_taken[i] += logits[k, i] if actions[lo + i, h] == k - start else np.float32(0.0)
            for k in range(start, start + count):
                for i in range(R):
                    # The entropy's gradient, -p (log p + H); the ratio's term is added below.
                    dlogits[k, i] = ent_coef * prob[k, i] * (logits[k, i] + head_entropy[i])
            for i in range(R):
                entropy[i] += head_entropy[i]
            start += count
        # Surrogate and value loss per row, branch-free (torch's tie rule: see _max_grads).
        pg_sum = 0.0
        v_sum = 0.0
        kl_sum = 0.0
        clipped_sum = 0.0
        for i in range(R):
            r = lo + i
            log_ratio = logp_taken[i] - columns[r, 0]
            ratio = exp32(log_ratio)
            adv = (columns[r, 1] - adv_mean) * adv_scale
            surrogate = -adv * ratio
            if clip > 0:
                clipped = -adv * min(max(ratio, one - clip), one + clip)
                ga, gb = _max_grads(surrogate, clipped)
                inside = np.float32(1.0) if ratio >= one - clip and ratio <= one + clip else np.float32(0.0)
                pg = max(surrogate, clipped)
                d_logp[i] = -adv * (ga + gb * inside) * ratio
                clipped_sum += np.float32(1.0) if abs(ratio - one) > clip else np.float32(0.0)
            else:
                pg = surrogate
                d_logp[i] = -adv * ratio
            ret, old_value = columns[r, 2], columns[r, 3]
            err = value[i] - ret
            if clip_vloss and clip > 0:
                delta = value[i] - old_value
                err_clipped = old_value + min(max(delta, -clip), clip) - ret
                ga, gb = _max_grads(err * err, err_clipped * err_clipped)
                in_range = np.float32(1.0) if delta >= -clip and delta <= clip else np.float32(0.0)
                v_term = np.float32(0.5) * max(err * err, err_clipped * err_clipped)
                d_value[i] = (ga * err + gb * err_clipped * in_range) * vf_coef * inv_size
            else:
                v_term = np.float32(0.5) * err * err
                d_value[i] = err * vf_coef * inv_size
            pg_sum += pg
            v_sum += v_term
            kl_sum += (ratio - one) - log_ratio
        st = partial_stats[c]
        st[PG_LOSS] = pg_sum
        st[V_LOSS] = v_sum
        st[APPROX_KL] = kl_sum
        st[CLIPFRAC] = clipped_sum
        st[ENTROPY] = entropy.astype(np.float64).sum()
        start = 0
        for h in range(heads):
            for k in range(start, start + nvec[h]):
                for i in range(R):
                    taken = np.float32(1.0) if actions[lo + i, h] == k - start else np.float32(0.0)
                    dlogits[k, i] = (dlogits[k, i] + d_logp[i] * (taken - prob[k, i])) * inv_size
            start += nvec[h]
        # (3) Heads backward: weight and bias gradients, and through the last activation. Every inner
        # loop runs over j (the hidden units), so that LLVM vectorises it.
        acc = partial[c]
        grad_h = np.empty(w, np.float32)
        for i in range(R):
            r = lo + i
            grad_h[:] = 0.0
            for k in range(A):
                d = dlogits[k, i]
                acc[A + 3, k] += d
                for j in range(w):
                    acc[k, j] += d * ha[i, j]
                for j in range(w):
                    grad_h[j] += d * wa[k, j]
            dv = d_value[i]
            acc[A + 3, A] += dv
            for j in range(w):
                g = grad_h[j] * _slope(ha[i, j], relu)
                za[r, j] = g
                acc[A + 1, j] += g
            for j in range(w):
                g = dv * wc[j] * _slope(hc[i, j], relu)
                zc[r, j] = g
                acc[A, j] += dv * hc[i, j]
                acc[A + 2, j] += g
    # Reduce the chunks (serially, in a fixed order: the result does not depend on the thread count).
    total_acc = np.zeros(partial.shape[1:], np.float32)
    for c in range(chunks):
        total_acc += partial[c]
    grad_wa[:, :] = total_acc[:A, :w]
    grad_wc[:] = total_acc[A, :w]
    grad_za_bias[:] = total_acc[A + 1, :w]
    grad_zc_bias[:] = total_acc[A + 2, :w]
    grad_ba[:] = total_acc[A + 3, :A]
    grad_bc[0] = total_acc[A + 3, A]
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


__all__ = ["exp32", "log32", "advantage_sums", "head_loss_backward", "activation_backward", "activate_", "NUM_STATS"]
