"""Minibatches drawn on the device, with sizes fixed for the run and the same however envs are split.

Every epoch shuffles a rollout's samples with sort keys from the counter RNG
(:func:`gpurl.fusion.counter_rng.uniform_ref`, keyed by the run's seed, the epoch's draw number and each
sample's global id), sorted on the device: no host read, no generator state, and a shape that never
changes, so an update can be compiled once and captured in a CUDA graph. Two ways to deal them out:

- :class:`StratifiedSamples` (feed-forward actors, central-critic rows): each env's own samples are
  shuffled and dealt to the M minibatches in turn, so minibatch m holds the same number of samples of
  every env. A rank holding some of the envs holds a fixed share of every minibatch, and the union of the
  ranks' shares is the one-device minibatch: results do not depend on how envs are split.
- :class:`EnvBlocks` (recurrent actors, which replay whole sequences): global env ids in blocks of M
  consecutive envs; each block's envs are shuffled and dealt one to each minibatch.

When the samples do not divide into M, the short minibatches are padded with rows of weight 0, always in
the same places, so counts stay fixed: ``weight`` [M, R] says which rows are real and ``counts`` [M] how
many real samples each minibatch has over all ranks (the divisor of its means).
"""
from __future__ import annotations

import math

import torch

from ..fusion.counter_rng import uniform_ref

#: Sort key of padding: after every real key (real keys are uniforms in [0, 1)).
PADDING_KEY = 2.0


def shuffle_keys(seed: torch.Tensor, draw: torch.Tensor, ids: torch.Tensor, stream: int,
                 valid: torch.Tensor) -> torch.Tensor:
    """float32 sort keys, shape of ``ids`` (int64 global sample ids): uniforms of the counter RNG keyed by
    (``seed`` int64 [2], ``draw`` int64 [1], id, ``stream``), PADDING_KEY where ``valid`` is False."""
    return torch.where(valid, uniform_ref(seed, ids, draw, stream), PADDING_KEY)


class StratifiedSamples:
    """Minibatches over the samples (t, e, i) of one group's rollout: T steps x E envs (this rank's, the
    first of global id ``env_offset``) x n rows per env and step, stored row-major as [T, E, n].

    Each env's T * n samples are shuffled on their own and sample at shuffled position p goes to minibatch
    p % M, padded to L = ceil(T n / M) * M positions (the padding sorts last). ``order(seed, draw)`` gives
    the storage rows of the epoch, int64 [M * E * c] (c = L / M: minibatch m is rows m * E * c ...);
    ``weight`` float32 [M, E * c]; ``counts`` the real samples of each minibatch over all ``total_envs``.
    """

    def __init__(self, steps: int, num_envs: int, per_step: int, minibatches: int, env_offset: int,
                 total_envs: int, stream: int, device: torch.device):
        T, E, n, M = steps, num_envs, per_step, minibatches
        samples = T * n
        L = math.ceil(samples / M) * M
        self.minibatches, self.chunk = M, L // M
        j = torch.arange(L, device=device)
        self.valid = (j < samples).expand(E, L)                                    # [E, L]
        j = torch.where(j < samples, j, 0)                                         # padding reads sample 0
        e = torch.arange(E, device=device)[:, None]
        self.rows = (j // n * E + e) * n + j % n                                   # [E, L] storage rows
        self.ids = (env_offset + e) * samples + j                                  # [E, L] global sample ids
        self.stream = stream
        position = torch.arange(L, device=device)
        # Padding sorts last: positions >= T n, the same in every epoch.
        self.weight = self._deal((position < samples).expand(E, L).to(torch.float32)).view(M, -1)
        per_env = [sum(1 for p in range(m, L, M) if p < samples) for m in range(M)]
        self.counts = [total_envs * k for k in per_env]

    def _deal(self, per_env: torch.Tensor) -> torch.Tensor:
        """[E, L] by shuffled position -> [M * E * c] in minibatch order (position p -> minibatch p % M)."""
        E = per_env.shape[0]
        return per_env.view(E, self.chunk, self.minibatches).permute(2, 0, 1).reshape(-1)

    def order(self, seed: torch.Tensor, draw: torch.Tensor) -> torch.Tensor:
        keys = shuffle_keys(seed, draw, self.ids, self.stream, self.valid)
        return self._deal(self.rows.gather(1, keys.argsort(dim=1, stable=True)))


class EnvBlocks:
    """Minibatches over whole envs (E of this rank, the first of global id ``env_offset``, of
    ``total_envs``): global envs in blocks of M, each block shuffled and dealt one env per minibatch.

    A rank's envs must be whole blocks (``env_offset`` a multiple of M, and E too unless they are the last
    envs), so that its share of every minibatch has a fixed size B = ceil(E / M) (the last, partial block's
    missing envs are padding). ``order(seed, draw)`` gives the local env of each minibatch's rows, int64 [M,
    B]; ``weight`` float32 [M, B]; ``counts`` the real envs of each minibatch over all ranks.
    """

    def __init__(self, num_envs: int, minibatches: int, env_offset: int, total_envs: int, stream: int,
                 device: torch.device):
        E, M = num_envs, minibatches
        if env_offset % M or (E % M and env_offset + E != total_envs):
            raise ValueError(f"a recurrent policy's minibatches deal whole envs in blocks of minibatches={M}: each "
                             f"rank's envs must be whole blocks, and this rank holds envs {env_offset}.."
                             f"{env_offset + E - 1} (use a num_envs per rank that minibatches divides)")
        B = math.ceil(E / M)
        local = torch.arange(B * M, device=device).view(B, M)
        self.valid = local < E
        self.local = torch.where(self.valid, local, 0)
        self.ids = env_offset + local
        self.stream = stream
        real = [E // M + (m < E % M) for m in range(M)]
        self.weight = (torch.arange(B, device=device)[None, :] < torch.tensor(real, device=device)[:, None]).float()
        self.counts = [total_envs // M + (m < total_envs % M) for m in range(M)]

    def order(self, seed: torch.Tensor, draw: torch.Tensor) -> torch.Tensor:
        keys = shuffle_keys(seed, draw, self.ids, self.stream, self.valid)
        return self.local.gather(1, keys.argsort(dim=1, stable=True)).T.contiguous()


__all__ = ["EnvBlocks", "PADDING_KEY", "StratifiedSamples", "shuffle_keys"]
