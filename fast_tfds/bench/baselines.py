"""The pipelines users write today, reproduced from the seed notebooks, as baselines.

All read the same TFRecord shards as the fast reader, so differences come from
the pipeline alone.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Iterable

import tensorflow as tf
import tensorflow_datasets as tfds

from fast_tfds.read import memory_cache
from fast_tfds.read.decode import decode_jpeg_blocks, resize_uint8

AUTOTUNE = tf.data.AUTOTUNE
SEED_BATCH = 32
SEED_SIZE = (224, 224)
_FEATURES = {
    "image": tf.io.FixedLenFeature((), tf.string, ""),
    "label": tf.io.FixedLenFeature((), tf.int64, -1),
}


def shard_files(builder: tfds.core.DatasetBuilder, split: str = "train") -> list[str]:
    return [os.fspath(fi.filename) for fi in builder.info.splits[split].file_instructions]


def seed_naive(
    files: list[str], *, size: tuple[int, int] = SEED_SIZE, batch_size: int = SEED_BATCH
) -> tf.data.Dataset:
    """Seed 000's naive approach: one reader, one decode at a time, float32 resize."""

    def preprocess(serialized):
        example = tf.io.parse_single_example(serialized, _FEATURES)
        image = tf.io.decode_jpeg(example["image"], channels=3)
        image = tf.image.resize(image, size) / 255.0
        return image, example["label"]

    return tf.data.TFRecordDataset(files).map(preprocess).batch(batch_size)


def seed_parallel(
    files: list[str], *, size: tuple[int, int] = SEED_SIZE, batch_size: int = SEED_BATCH
) -> tf.data.Dataset:
    """Seeds 000-002's 'parallel' pipeline, float32 cache included."""

    def read_tfrecord(serialized):
        example = tf.io.parse_single_example(serialized, _FEATURES)
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
    size: tuple[int, int] = SEED_SIZE,
    batch_size: int = SEED_BATCH,
) -> tf.data.Dataset:
    """What a TFDS user writes today: as_supervised + map(resize, normalize) + batch + prefetch."""
    read_config = tfds.ReadConfig(try_autocache=False)  # a fair epoch 1: no hidden cache
    ds = builder.as_dataset(split=split, as_supervised=True, read_config=read_config)

    def format_image(image, label):
        return tf.image.resize(image, size) / 255.0, label

    return ds.map(format_image, num_parallel_calls=AUTOTUNE).batch(batch_size).prefetch(AUTOTUNE)


def stored_jpegs(files: list[str]) -> tf.Tensor:
    """Every stored JPEG of the shards, in memory: the input of the ceilings."""
    ds = tf.data.TFRecordDataset(files).map(
        lambda r: tf.io.parse_single_example(r, _FEATURES)["image"]
    )
    return tf.stack(list(ds))


def decode_ceiling(
    jpegs: tf.Tensor,
    resize_to: tuple[int, int] | None = None,
    *,
    convert=None,
    batch_size: int = SEED_BATCH,
) -> tf.data.Dataset:
    """Decode (and resize) of the same JPEG bytes from memory on all cores: the upper bound.

    `convert` (e.g. the reader's XLA `to_unit_float`) is mapped over each uint8
    batch, so that a pipeline is compared with a ceiling that produces the same output.
    """

    def decode(data):
        # The reader's own resize, so the ceiling does exactly the reader's work.
        return resize_uint8(tf.io.decode_jpeg(data, channels=3), resize_to)

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
    batch_size: int = SEED_BATCH,
) -> tf.data.Dataset:
    """The reader's block decoder (simplejpeg) on the same JPEG bytes from memory.

    With `into_new_memory`, blocks are decoded into the rows of one new array for
    all the images, as the arena cache does in epoch 1 (its own `Arena`, freed with
    the dataset): the difference from the plain row is what first touching the
    cache's memory costs on this machine.
    """
    shape = (*size, 3)
    spec = {"image": tf.TensorSpec(shape, tf.uint8)}
    blocks = tf.data.Dataset.from_tensor_slices(jpegs).batch(batch_size)
    arena = None
    if into_new_memory:
        arena = memory_cache.Arena(int(jpegs.shape[0]), spec, frozenset(spec))
        generation = int(arena.begin()[1])

        def decode(position, block):
            _, decoded = arena.write_in_graph(generation, position * batch_size, {"image": block})
            return decoded["image"]

        ds = blocks.enumerate().map(decode, num_parallel_calls=AUTOTUNE, deterministic=False)
    else:
        decode_images = decode_jpeg_blocks(spec)
        ds = blocks.map(
            lambda block: decode_images({"image": block})["image"],
            num_parallel_calls=AUTOTUNE,
            deterministic=False,
        )
    if convert is not None:
        ds = ds.map(convert, num_parallel_calls=AUTOTUNE)
    ds = ds.prefetch(AUTOTUNE)
    ds._fast_tfds_arena = arena  # The dataset holds the arena, as the reader's does.
    return ds


def count_images(batches: Iterable) -> int:
    n = 0
    for batch in batches:
        images = batch[0] if isinstance(batch, tuple) else batch
        if isinstance(images, dict):
            images = images["image"]
        n += int(images.shape[0])
    return n


def time_epoch(iterator_or_dataset) -> tuple[int, float, float]:
    """(images, seconds, seconds to first batch) for one pass."""
    start = time.perf_counter()
    it = iter(iterator_or_dataset)
    first = next(it, None)
    first_batch_s = time.perf_counter() - start
    n = 0 if first is None else count_images([first])
    n += count_images(it)
    return n, time.perf_counter() - start, first_batch_s
