"""The TFDS course notebook's naive pipeline, and the epoch timer the demo measures it with.

The naive pipeline is what many users start from: one TFRecord reader, `map()`
without `num_parallel_calls`, a float32 resize and batches of 32. The demo
prints as_fast_dataset's rates next to it, and the benchmark (`benchmarks/`,
in a clone of the repository) uses the same function, so both compare against
exactly the same code. It reads the same TFRecord shards as the fast reader,
so differences come from the pipeline alone.

Importing this module imports TensorFlow.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

import tensorflow as tf

BATCH_SIZE = 32
IMAGE_SIZE = (224, 224)
# The two features both datasets store, parsed as the notebook parses them.
FEATURES = {
    "image": tf.io.FixedLenFeature((), tf.string, ""),
    "label": tf.io.FixedLenFeature((), tf.int64, -1),
}


def shard_files(builder, split: str = "train") -> list[str]:
    """The TFRecord files of a built split, which the naive pipeline reads directly."""
    return [os.fspath(fi.filename) for fi in builder.info.splits[split].file_instructions]


def naive_pipeline(
    files: list[str], *, size: tuple[int, int] = IMAGE_SIZE, batch_size: int = BATCH_SIZE
) -> tf.data.Dataset:
    """The course notebook's naive pipeline: one reader, one decode at a time, float32 resize.

    tf.data's default `map_parallelization` rewrite still parallelizes its `map()`;
    it is left on, since that is what users of the notebook get.
    """

    def preprocess(serialized):
        example = tf.io.parse_single_example(serialized, FEATURES)
        image = tf.io.decode_jpeg(example["image"], channels=3)
        image = tf.image.resize(image, size) / 255.0
        return image, example["label"]

    return tf.data.TFRecordDataset(files).map(preprocess).batch(batch_size)


def count_images(batches: Iterable) -> int:
    """Images in (images, labels) tuples, {"image": ...} dicts or bare image batches."""
    n = 0
    for batch in batches:
        images = batch[0] if isinstance(batch, tuple) else batch
        if isinstance(images, dict):
            images = images["image"]
        n += int(images.shape[0])
    return n


def time_epoch(iterator_or_dataset) -> tuple[int, float, float]:
    """(images, seconds, seconds to the first batch) of one pass over the batches."""
    start = time.perf_counter()
    it = iter(iterator_or_dataset)
    first = next(it, None)
    first_batch_s = time.perf_counter() - start
    n = 0 if first is None else count_images([first])
    n += count_images(it)
    return n, time.perf_counter() - start, first_batch_s
