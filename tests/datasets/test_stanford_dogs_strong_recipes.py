"""Stanford Dogs (120 breeds) read with a strong recipe, TrivialAugment + random erasing
+ rotation and MixUp / CutMix with label smoothing, in both back ends (tf.data from its
TFRecord build, the loader from its ArrayRecord build), with and without the cache:
every example once per epoch, pictures of the asked shape, labels float32 one-hot rows
of the 120 breeds that sum to 1, and the same seed repeats every batch. What each op and
each mix does is tests/augment/'s; this is the whole read of the other dataset."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

import stanford_dogs_tfrecord
from fast_tfds import Augment, Mix
from tests.loader import conftest as loader_fixtures

stanford_array_record_dir = loader_fixtures.stanford_array_record_dir

STRONG = Augment(auto_augment="trivial_augment_wide", erase=0.25, rotate=10)
TIMM = Mix(mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.1)
BREEDS = 120
BATCH = 4
SIZE = 96
SEED = 11


def examples(data_dir) -> int:
    builder = tfds.builder("stanford_dogs_tfrecord/224", data_dir=data_dir)
    return builder.info.splits["train"].num_examples


def tf_data_epochs(data_dir, cache: bool, seed: int = SEED, count: int = 2):
    """[[(images, targets, indices), ...] of each epoch] from as_fast_dataset, as numpy."""
    ds = stanford_dogs_tfrecord.as_fast_dataset(
        "train",
        data_dir=data_dir,
        download_and_prepare=False,
        batch_size=BATCH,
        image_size=SIZE,
        dtype=tf.uint8,
        seed=seed,
        augment=STRONG,
        mix=TIMM,
        cache=cache,
        with_index=True,  # (images, targets, indices)
    )
    return [[tuple(t.numpy() for t in batch) for batch in ds] for _ in range(count)]


def loader_epochs(data_dir, cache: bool, seed: int = SEED, count: int = 2):
    """The same of as_fast_loader (its batches: images, targets, indices)."""
    loader = stanford_dogs_tfrecord.as_fast_loader(
        "train",
        data_dir=data_dir,
        download_and_prepare=False,
        batch_size=BATCH,
        image_size=SIZE,
        seed=seed,
        num_threads=2,
        augment=STRONG,
        mix=TIMM,
        cache=cache,
        with_index=True,
    )
    return [[tuple(np.array(t) for t in batch) for batch in loader] for _ in range(count)]


def assert_strong_epochs(epochs, expected_examples: int) -> None:
    for batches in epochs:
        indices = np.concatenate([indices for _, _, indices in batches])
        assert sorted(indices.tolist()) == list(range(expected_examples))  # each once
        for images, targets, indices in batches:
            assert images.dtype == np.uint8 and images.shape == (len(indices), SIZE, SIZE, 3)
            assert targets.dtype == np.float32 and targets.shape == (len(indices), BREEDS)
            assert (targets >= 0).all()
            np.testing.assert_allclose(targets.sum(axis=1), 1, atol=1e-5)
        # Smoothed by 0.1: no row is a hard one-hot, every class keeps 0.1 / 120 at least.
        targets = np.concatenate([t for _, t, _ in batches])
        assert targets.min() >= 0.1 / BREEDS - 1e-6


def assert_same(first, again) -> None:
    for epoch_a, epoch_b in zip(first, again, strict=True):
        for a, b in zip(epoch_a, epoch_b, strict=True):
            for x, y in zip(a, b, strict=True):
                np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("cache", [False, True])
def test_tf_data_reads_stanford_dogs_with_the_strong_recipe(stanford_tfrecord_dir, cache):
    epochs = tf_data_epochs(stanford_tfrecord_dir, cache)
    assert_strong_epochs(epochs, examples(stanford_tfrecord_dir))
    assert_same(epochs, tf_data_epochs(stanford_tfrecord_dir, cache))
    # Another seed: other crops, ops and mixes.
    other = tf_data_epochs(stanford_tfrecord_dir, cache, seed=SEED + 1, count=1)
    assert not np.array_equal(other[0][0][0], epochs[0][0][0])


@pytest.mark.parametrize("cache", [False, True])
def test_the_loader_reads_stanford_dogs_with_the_strong_recipe(stanford_array_record_dir, cache):
    epochs = loader_epochs(stanford_array_record_dir, cache)
    assert_strong_epochs(epochs, examples(stanford_array_record_dir))
    assert_same(epochs, loader_epochs(stanford_array_record_dir, cache))
    other = loader_epochs(stanford_array_record_dir, cache, seed=SEED + 1, count=1)
    assert not np.array_equal(other[0][0][0], epochs[0][0][0])
