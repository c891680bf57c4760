"""An iteration of the reader's dataset: its epochs repeated as asked, prefetched, with
the exact number of batches declared (Keras then shows N/N steps and never warns that
the input ran out of data)."""

from __future__ import annotations

import tensorflow as tf

from fast_tfds.read import records
from fast_tfds.read.split_reading import Reading

AUTOTUNE = tf.data.AUTOTUNE


def repeat_epochs(ds: tf.data.Dataset, reading: Reading) -> tf.data.Dataset:
    """One epoch's batches ─ repeat ─ prefetch, with the dataset's exact length."""
    if reading.epochs != 1:
        ds = ds.repeat(reading.epochs)
    ds = ds.prefetch(AUTOTUNE)
    if reading.service_address is None or reading.service_sharding == "dynamic":
        ds = ds.apply(tf.data.experimental.assert_cardinality(cardinality(reading)))
    tf_options = tf.data.Options()
    tf_options.deterministic = reading.order.deterministic
    # tf.data's autotuning off: every AUTOTUNE map then runs one call per core, and
    # prefetch keeps its own buffer tuning. With it on, whole epochs of our pipelines
    # (and TensorFlow's own decode pipelines) ran on one core, at half the rate on
    # two, whatever parallelism the decoding map was given (docs/design.md).
    tf_options.autotune.enabled = False
    return ds.with_options(tf_options)


def cardinality(reading: Reading) -> int:
    """Elements (batches, or examples) the dataset yields per iteration."""
    if reading.epochs is None:
        return tf.data.INFINITE_CARDINALITY
    batching = reading.batching
    per_epoch = records.batches_per_epoch(
        reading.num_examples, batching.batch_size, batching.drop_remainder
    )
    return per_epoch * reading.epochs
