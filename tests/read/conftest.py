"""Fixtures of the read tests: what TFDS's own reader finds in the tiny build."""

from __future__ import annotations

import collections

import pytest
import tensorflow_datasets as tfds

from tests.read.reading import digest

SLICES = ("train", "train[:40%]", "train[40%:]")


@pytest.fixture(scope="session")
def stored(cats_data_dir):
    """{split or slice: Counter of pixel digests} through TFDS's own reader."""
    builder = tfds.builder("cats_vs_dogs_fast", config="224", data_dir=cats_data_dir)

    def digests(split):
        return collections.Counter(digest(ex["image"].numpy()) for ex in builder.as_dataset(split))

    return {split: digests(split) for split in SLICES}
