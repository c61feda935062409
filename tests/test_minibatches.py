"""CPU tier: minibatches dealt on the device (gpurl/multigpu/minibatches.py), against a hand-built account of
which global samples each minibatch holds.

- every real sample lands in exactly one minibatch per epoch, and minibatch m holds the declared count;
- split independence: ranks holding envs [0, 3) and [3, 6) (or 2, 3 and 1 envs for whole-env blocks) hold,
  between them, exactly the one-device minibatches, sample for sample;
- a draw is its number: the same number deals the same, another deals otherwise, and a sample's minibatch
  is uniform over many draws (chi-square);
- a rank whose envs are not whole blocks of a recurrent learner's minibatches is refused with the sizes.
"""
from __future__ import annotations

import pytest
import torch

from gpurl.multigpu.minibatches import EnvBlocks, StratifiedSamples
from gpurl.fusion.counter_rng import seed_tensor

from stats_helpers import chi2_critical, chi_square

pytestmark = pytest.mark.cpu

SEED = seed_tensor(7, "cpu")


def sample_sets(T: int, n: int, M: int, total: int, shards: list[tuple[int, int]], draw: int) -> list[set]:
    """Per minibatch, the global ids (env * T * n + t * n + i) of the real samples the shards deal it."""
    out = [set() for _ in range(M)]
    for lo, hi in shards:
        E = hi - lo
        layout = StratifiedSamples(T, E, n, M, lo, total, 1000, torch.device("cpu"))
        rows = layout.order(SEED, torch.tensor([draw])).view(M, -1)
        for m in range(M):
            for r, w in zip(rows[m].tolist(), layout.weight[m].tolist()):
                if w:
                    t, rest = divmod(r, E * n)
                    e, i = divmod(rest, n)
                    out[m].add((lo + e) * T * n + t * n + i)
    return out


@pytest.mark.parametrize("T,n,M", [(5, 3, 4), (8, 2, 4), (3, 1, 5)])
def test_every_sample_once_with_the_declared_counts_and_the_same_over_any_split(T, n, M):
    total = 6
    single = sample_sets(T, n, M, total, [(0, 6)], draw=3)
    assert sorted(x for s in single for x in s) == list(range(total * T * n))
    layout = StratifiedSamples(T, total, n, M, 0, total, 1000, torch.device("cpu"))
    assert [len(s) for s in single] == layout.counts and sum(layout.counts) == total * T * n
    assert sample_sets(T, n, M, total, [(0, 3), (3, 6)], draw=3) == single
    assert sample_sets(T, n, M, total, [(0, 1), (1, 5), (5, 6)], draw=3) == single


def test_a_draw_is_its_number_and_a_samples_minibatch_is_uniform():
    T, n, M, total = 5, 2, 5, 3  # no padding; M - 1 even (the chi-square bound takes an even df)
    assert sample_sets(T, n, M, total, [(0, 3)], 5) == sample_sets(T, n, M, total, [(0, 3)], 5)
    assert sample_sets(T, n, M, total, [(0, 3)], 5) != sample_sets(T, n, M, total, [(0, 3)], 6)
    layout = StratifiedSamples(T, total, n, M, 0, total, 1000, torch.device("cpu"))
    draws = 2000
    seen = torch.zeros(M)
    for draw in range(draws):
        order = layout.order(SEED, torch.tensor([draw])).view(M, -1)
        seen[(order == 5).nonzero()[0, 0]] += 1  # where storage row 5 went
    assert chi_square(seen) < chi2_critical(M - 1)


def env_sets(M: int, total: int, shards: list[tuple[int, int]], draw: int) -> list[set]:
    out = [set() for _ in range(M)]
    for lo, hi in shards:
        blocks = EnvBlocks(hi - lo, M, lo, total, 3000, torch.device("cpu"))
        envs = blocks.order(SEED, torch.tensor([draw]))
        for m in range(M):
            out[m] |= {lo + e for e, w in zip(envs[m].tolist(), blocks.weight[m].tolist()) if w}
        assert all(len(s) for s in out[:min(M, total)])
    return out


def test_whole_envs_in_blocks_every_env_once_and_the_same_over_any_aligned_split():
    M, total = 3, 7
    single = env_sets(M, total, [(0, 7)], draw=2)
    assert sorted(e for s in single for e in s) == list(range(total))
    assert [len(s) for s in single] == EnvBlocks(total, M, 0, total, 3000, torch.device("cpu")).counts == [3, 2, 2]
    assert env_sets(M, total, [(0, 3), (3, 6), (6, 7)], draw=2) == single
    # Each block gives one env to each minibatch: envs 0-2 are dealt one apiece.
    assert all(len(s & {0, 1, 2}) == 1 for s in single)


def test_a_rank_holding_part_of_a_block_is_refused():
    with pytest.raises(ValueError, match=r"blocks of minibatches=3: .* envs 2..4"):
        EnvBlocks(3, 3, 2, 9, 3000, torch.device("cpu"))
