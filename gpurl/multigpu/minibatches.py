"""Minibatches and replay draws on the device, with sizes fixed for the run and the same however envs are split.

:class:`LearnerBatches` is the one door through which a learner gets its samples (``LearnContext.batches``):
it holds the learner's share of the global envs and does all the arithmetic of that share, so an algorithm's
learner never sees ranks or shards.

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

A replay draw (:func:`draw_rows`) is uniform over the filled slots and *all* envs of the run, the same on every
rank; rows of other ranks' envs get weight 0, so the ranks' weighted sums add up to the one device's.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..fusion.counter_rng import uniform_ref
from .placement import EnvShard

#: Sort key of padding: after every real key (real keys are uniforms in [0, 1)).
PADDING_KEY = 2.0
#: The counter RNG's streams of a replay draw: which slot (by age), which env.
AGE_STREAM, ENV_STREAM = 4001, 4002


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


def draw_rows(ring: torch.Tensor, seed: torch.Tensor, draw: torch.Tensor, updates: int, batch: int, capacity: int,
              num_envs: int, total_envs: int, env_offset: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(slot, env, weight)``, each [updates, batch]: the rows of ``updates`` draws of ``batch`` transitions,
    uniform with replacement over the ``ring`` (int64 [2]: position, size > 0) filled slots of a ring of
    ``capacity`` and all ``total_envs`` envs. Update u's row b is keyed by (``seed``, ``draw`` + u, b): the same
    on every rank and device. This buffer holds envs ``env_offset ..`` (``num_envs`` of them); rows of other
    envs get weight 0 (and this buffer's env 0), so every rank's tensors keep their shape. (The hash stays
    outside a compiled update: inductor's CPU code generation of its chained integer mixes takes minutes.)"""
    rows = torch.arange(batch, device=ring.device)
    draws = draw + torch.arange(updates, device=ring.device).unsqueeze(1)           # [U, 1]
    position, size = ring[0], ring[1]
    age = (uniform_ref(seed, rows, draws, AGE_STREAM) * size).long().clamp(max=size - 1)
    env = (uniform_ref(seed, rows, draws, ENV_STREAM) * total_envs).long().clamp(max=total_envs - 1) - env_offset
    slot = (position - size + age) % capacity  # the filled slots end at position - 1
    mine = (env >= 0) & (env < num_envs)
    return slot, env.clamp(0, num_envs - 1), mine.to(torch.float32)


@dataclass(frozen=True)
class LearnerBatches:
    """How a learner holding the samples of ``shard`` (envs ``lo..hi`` of ``total``) draws its minibatches and
    replay rows: the global draw, and this learner's share of it. The distribution policy makes it
    (:meth:`~.placement.Placement.learner_batches`); one device holds every env."""

    shard: EnvShard

    @property
    def num_envs(self) -> int:
        """The envs whose samples this learner holds (the env dimension of its storage)."""
        return self.shard.size

    def stratified(self, steps: int, per_step: int, minibatches: int, stream: int,
                   device: torch.device) -> StratifiedSamples:
        """Every env's ``steps`` x ``per_step`` samples dealt over ``minibatches`` (:class:`StratifiedSamples`)."""
        return StratifiedSamples(steps, self.shard.size, per_step, minibatches, self.shard.lo, self.shard.total,
                                 stream, device)

    def env_blocks(self, minibatches: int, stream: int, device: torch.device) -> EnvBlocks:
        """Whole envs dealt over ``minibatches`` (:class:`EnvBlocks`)."""
        return EnvBlocks(self.shard.size, minibatches, self.shard.lo, self.shard.total, stream, device)

    def replay_rows(self, replay, seed: torch.Tensor, draw: torch.Tensor, updates: int,
                    batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:func:`draw_rows` of ``replay`` (a :class:`~gpurl.storage.replay.ReplayBuffer` of this learner's
        envs): ``(slot, env, weight)`` [updates, batch]."""
        return draw_rows(replay.ring, seed, draw, updates, batch, replay.capacity, replay.num_envs,
                         self.shard.total, self.shard.lo)

    def replay_transitions(self, replay) -> int:
        """Transitions the replay buffers of every learner hold (the same ring position on each)."""
        return replay.size * self.shard.total


__all__ = ["AGE_STREAM", "ENV_STREAM", "EnvBlocks", "LearnerBatches", "PADDING_KEY", "StratifiedSamples",
           "draw_rows", "shuffle_keys"]
