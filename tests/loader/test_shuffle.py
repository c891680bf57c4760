"""The loader's shuffle orders every epoch as Grain's `MapDataset.shuffle(seed)` does, so
that a state saved before it existed resumes at the same element."""

from __future__ import annotations

import grain
import numpy as np
import pytest
from grain._src.python.experimental.index_shuffle.python import (
    index_shuffle_module as grain_index_shuffle,
)

from fast_tfds.loader import shuffle

# Around the block sizes: the smallest block (2^16) and the next ones.
LENGTHS = [1, 2, 3, 7, 64, 255, 4016, 65_535, 65_536, 70_001, 131_073]
SEEDS = [0, 1, 42, 2**31, 2**32 - 1]


def grains(length: int, seed: int, positions) -> np.ndarray:
    if length == 1:
        return np.zeros(len(positions), np.int64)
    return np.array(
        [
            grain_index_shuffle.index_shuffle(int(i), max_index=length - 1, seed=seed, rounds=4)
            for i in positions
        ]
    )


@pytest.mark.parametrize("length", LENGTHS)
def test_each_permutation_is_grains(length):
    # Every position where the length is small; a spread of them for the largest.
    positions = np.arange(length) if length <= 70_001 else np.linspace(0, length - 1, 5000)
    positions = positions.astype(np.int64)
    for seed in SEEDS:
        got = shuffle.permutation(length, seed)
        assert got.shape == (length,)
        np.testing.assert_array_equal(got[positions], grains(length, seed, positions))
        assert np.array_equal(np.sort(got), np.arange(length))


@pytest.mark.parametrize("length", [4016, 70_001, 131_073])
def test_the_walk_of_large_blocks_is_grains_too(length, monkeypatch):
    # Blocks over 2^24 values are walked position by position: here on small ones (a
    # length near its block: few steps a walk).
    monkeypatch.setattr(shuffle, "TABLE_BITS", 0)
    test_each_permutation_is_grains(length)


@pytest.mark.parametrize("length", [65_537, (1 << 18) + 1])
def test_where_grains_order_loses_an_element_every_element_still_comes_once(length):
    got = shuffle.permutation(length, 5)
    assert np.array_equal(np.sort(got), np.arange(length))
    # Grain's: one element twice, the last never (why this one order is not Grain's).
    theirs = grains(length, 5, np.arange(length))
    assert len(np.unique(theirs)) == length - 1 and length - 1 not in theirs


def test_the_round_keys_are_std_seed_seq_s():
    # std::seed_seq{0}.generate of 4 words, as libstdc++ and libc++ give it (the
    # algorithm is the C++ standard's); the permutations above depend on every word.
    keys = shuffle.round_keys(0, 4)
    assert len(keys) == 4 and all(0 <= k < 2**32 for k in keys)
    assert shuffle.round_keys(0, 4) == keys and shuffle.round_keys(1, 4) != keys


@pytest.mark.parametrize("length, seed", [(10, 3), (37, 0), (700, 2**32 - 1)])
def test_epochs_follow_grains_dataset_element_for_element(length, seed):
    epochs = 3
    want = list(grain.MapDataset.range(length).shuffle(seed=seed).repeat(epochs))
    ours = shuffle.EpochShuffle(grain.MapDataset.range(length), seed=seed).repeat(epochs)
    assert list(ours) == want
    # Batches (the loader's `_getitems`) and single elements agree.
    batched = ours.batch(7, drop_remainder=False)
    assert [int(x) for batch in batched for x in batch] == want


def test_a_seed_out_of_range_is_one_line():
    with pytest.raises(ValueError, match="seed: must be in"):
        shuffle.EpochShuffle(grain.MapDataset.range(3), seed=2**32)
