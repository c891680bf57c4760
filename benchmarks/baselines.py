"""What as_fast_dataset is measured against: the pipelines users write, and decode ceilings.

The baselines read the same TFRecord shards as the fast reader, so differences
come from the pipeline alone. The ceilings decode the same JPEG bytes from
memory on all cores: no pipeline over these files can beat them by much, so a
pipeline's rate divided by its ceiling says how much is left to gain.
Everything here uses TensorFlow and the library's public API only.
"""

from __future__ import annotations

import itertools
import multiprocessing
import weakref

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

import fast_tfds
from fast_tfds.cli.baseline import (
    BATCH_SIZE,
    FEATURES,
    IMAGE_SIZE,
    naive_pipeline,
    shard_files,
    time_epoch,
)

__all__ = [
    "BATCH_SIZE",
    "IMAGE_SIZE",
    "decode_blocks_ceiling",
    "decode_ceiling",
    "naive_pipeline",
    "parallel_pipeline",
    "shard_files",
    "stored_jpegs",
    "tfds_load_user",
    "time_epoch",
    "to_unit_float",
]

AUTOTUNE = tf.data.AUTOTUNE


@tf.function(jit_compile=True)
def to_unit_float(images: tf.Tensor) -> tf.Tensor:
    """uint8 -> float32 in [0, 1], fused by XLA into one pass as the reader's float32
    output is, so that a float32 ceiling does the same conversion work."""
    return tf.cast(images, tf.float32) * (1.0 / 255.0)


def parallel_pipeline(
    files: list[str], *, size: tuple[int, int] = IMAGE_SIZE, batch_size: int = BATCH_SIZE
) -> tf.data.Dataset:
    """The course notebook's parallel pipeline: interleaved reads, a parallel map and a
    float32 `Dataset.cache()` (4 bytes a channel: 4x the memory of uint8 images)."""

    def read_tfrecord(serialized):
        example = tf.io.parse_single_example(serialized, FEATURES)
        image = tf.io.decode_jpeg(example["image"], channels=3)
        image = tf.cast(image, tf.float32) / 255.0
        image = tf.image.resize(image, size)
        return image, example["label"]

    ds = tf.data.Dataset.list_files(files)
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=4, num_parallel_calls=AUTOTUNE)
    ds = ds.map(read_tfrecord, num_parallel_calls=multiprocessing.cpu_count())
    return ds.cache().shuffle(1024).batch(batch_size).prefetch(AUTOTUNE)


def tfds_load_user(
    builder: tfds.core.DatasetBuilder,
    split: str = "train",
    *,
    size: tuple[int, int] = IMAGE_SIZE,
    batch_size: int = BATCH_SIZE,
) -> tf.data.Dataset:
    """What a TFDS user writes: as_supervised + map(resize, normalize) + batch + prefetch."""
    read_config = tfds.ReadConfig(try_autocache=False)  # a fair epoch 1: no hidden cache
    ds = builder.as_dataset(split=split, as_supervised=True, read_config=read_config)

    def format_image(image, label):
        return tf.image.resize(image, size) / 255.0, label

    return ds.map(format_image, num_parallel_calls=AUTOTUNE).batch(batch_size).prefetch(AUTOTUNE)


def stored_jpegs(files: list[str]) -> tf.Tensor:
    """Every stored JPEG of the shards, in memory: the input of the ceilings."""
    ds = tf.data.TFRecordDataset(files).map(
        lambda r: tf.io.parse_single_example(r, FEATURES)["image"]
    )
    return tf.stack(list(ds))


def decode_ceiling(
    jpegs: tf.Tensor,
    resize_to: tuple[int, int] | None = None,
    *,
    convert=None,
    batch_size: int = BATCH_SIZE,
) -> tf.data.Dataset:
    """TensorFlow's decode (and bilinear resize to uint8) of the JPEG bytes, on all cores.

    `convert` (e.g. `to_unit_float`) is mapped over each uint8 batch, so that a
    pipeline is compared with a ceiling that produces the same output.
    """

    def decode(data):
        image = tf.io.decode_jpeg(data, channels=3)
        if resize_to is not None:
            image = tf.cast(tf.round(tf.image.resize(image, resize_to)), tf.uint8)
        return image

    ds = tf.data.Dataset.from_tensor_slices(jpegs).map(
        decode, num_parallel_calls=AUTOTUNE, deterministic=False
    )
    ds = ds.batch(batch_size)
    if convert is not None:
        ds = ds.map(convert, num_parallel_calls=AUTOTUNE)
    return ds.prefetch(AUTOTUNE)


def decode_blocks_ceiling(
    jpegs: tf.Tensor,
    size: tuple[int, int],
    *,
    convert=None,
    into_new_memory: bool = False,
    batch_size: int = BATCH_SIZE,
) -> tf.data.Dataset:
    """The library's block decoder (`fast_tfds.decode_jpeg_block`) on the JPEG bytes.

    With `into_new_memory`, blocks are decoded into the rows of one new
    [N, H, W, 3] array for the whole split, allocated untouched, as a cache that
    epoch 1 fills must: the difference from the plain row is what first touching
    that much memory costs on the machine.
    """
    shape = (*size, 3)
    blocks = tf.data.Dataset.from_tensor_slices(jpegs).batch(batch_size)
    rows = None
    if into_new_memory:
        rows = _Rows(np.empty((int(jpegs.shape[0]), *shape), np.uint8))
        key = rows.key

        def decode_into(position, block):
            def into(position, jpegs):
                start = int(position) * batch_size
                rows_of_block = _live_rows[key].array[start : start + len(jpegs)]
                return fast_tfds.decode_jpeg_block_into(jpegs, rows_of_block)

            images = tf.numpy_function(into, [position, block], tf.uint8, stateful=False)
            return tf.ensure_shape(images, [None, *shape])

        ds = blocks.enumerate().map(decode_into, num_parallel_calls=AUTOTUNE, deterministic=False)
    else:

        def decode(block):
            images = tf.numpy_function(
                lambda jpegs: fast_tfds.decode_jpeg_block(jpegs, shape),
                [block],
                tf.uint8,
                stateful=False,
            )
            return tf.ensure_shape(images, [None, *shape])

        ds = blocks.map(decode, num_parallel_calls=AUTOTUNE, deterministic=False)
    if convert is not None:
        ds = ds.map(convert, num_parallel_calls=AUTOTUNE)
    ds = ds.prefetch(AUTOTUNE)
    ds._benchmark_rows = rows  # The dataset owns the array: it is freed with the dataset.
    return ds


class _Rows:
    """One array of decoded rows, reachable from its numpy_function only by key."""

    _keys = itertools.count()

    def __init__(self, array: np.ndarray):
        self.array = array
        self.key = next(self._keys)
        _live_rows[self.key] = self


# TensorFlow keeps every function given to tf.numpy_function for the life of the
# process; a function holding the array itself would keep gigabytes alive after
# its row is measured. The functions reach it through this weak registry instead.
_live_rows: weakref.WeakValueDictionary[int, _Rows] = weakref.WeakValueDictionary()
