"""Reading a tiny real build the way the read tests compare epochs: each example whole.

`epoch` records every example as all it carries (pixels, label, filename, boxes), so
that an image served with another example's label, filename or boxes is caught;
`tests.pairs.Truth` is what an epoch is compared with.
"""

from __future__ import annotations

import tensorflow as tf

import cats_vs_dogs_fast
from fast_tfds.cache import store as stores
from tests.pairs import Output, digest, epoch  # noqa: F401  (re-exported for the read tests)

BATCH = 8


def read(data_dir, split="train", **options):
    """`as_fast_dataset` of a built split: uint8 batches of BATCH unless told otherwise."""
    options = {"batch_size": BATCH, "dtype": tf.uint8, **options}
    return cats_vs_dogs_fast.as_fast_dataset(
        split, data_dir=data_dir, download_and_prepare=False, **options
    )


def batches_of(ds) -> int:
    return sum(1 for _ in ds)


def arena_rows(made) -> list[Output]:
    """Every row of an arena as an example: its image and its label."""
    images, labels = made.features["image"], made.features["label"]
    return [Output(digest(i), int(label)) for i, label in zip(images, labels, strict=True)]


def store_rows(made) -> list[Output]:
    """Every picture of a plain read's store as an example: its image and its label."""
    images, labels = made.pictures.rows(), made.features["label"]
    return [Output(digest(i), int(label)) for i, label in zip(images, labels, strict=True)]


def bytes_held() -> int:
    """Bytes reserved by the caches alive in this process (what their datasets hold)."""
    return sum(cache.nbytes for cache in stores.live_caches())
