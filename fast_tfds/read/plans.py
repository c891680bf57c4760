"""The ways `read_split` turns a split's records into batches, and how one is chosen.

Decoding is the expensive step, so it runs in parallel, a block of JPEGs at a time
where the stored images already have the output size; its uint8 output is what gets
cached (4x smaller than float32), so later epochs never decode again. The plans are
drawn in `fast_tfds.read`'s docstring.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

import tensorflow as tf
from absl import logging

from fast_tfds.cache import tf_file_cache
from fast_tfds.read import arena_dataset, augment_dataset
from fast_tfds.read.decoding import decode_jpeg_blocks
from fast_tfds.read.options import CacheKind
from fast_tfds.read.parsing import UNBATCHED_BLOCK
from fast_tfds.read.split_reading import Reading

AUTOTUNE = tf.data.AUTOTUNE


class Plan(enum.Enum):
    """How `read_split` turns a split's records into batches."""

    # cache=True, JPEGs to a fixed output size: epoch 1 parses blocks of records and
    # decodes (at a reduced scale and resized, where the size differs) straight into
    # the arena's rows; later epochs gather from the arena.
    ARENA = "arena"
    # cache=False, JPEGs to a fixed output size: each batch of records is parsed and
    # its JPEGs decoded as one block.
    BLOCK_STREAM = "block stream"
    # cache=True, fixed-size examples decoded one at a time (transformed, e.g. cropped,
    # or decoded by a tf.data service): epoch 1 copies its batches into the arena.
    ARENA_OF_EXAMPLES = "arena of examples"
    # Everything else: examples decoded one at a time, cached per example (in memory
    # or in files) if asked, shuffled and batched.
    PER_EXAMPLE = "per example"
    # augment=, cache=True: epoch 1 decodes each picture once into a picture cache at
    # the cache resolution (aspect kept) and serves its crops from it; later epochs
    # cut every batch's crops out of the cache, in a new order, without decoding.
    AUGMENTED_CACHE = "augmented cache"
    # augment=, cache=False: each block of records parsed, each crop chosen before its
    # picture is decoded, only what it needs decoded; then flip and jitter.
    AUGMENTED_STREAM = "augmented stream"


def choose_plan(reading: Reading) -> Plan:
    """The fastest plan that can produce what the options ask for."""
    kind = reading.cache.kind
    if reading.augment is not None:  # ReadOptions allows cache=True or False only.
        return Plan.AUGMENTED_CACHE if kind is CacheKind.MEMORY else Plan.AUGMENTED_STREAM
    if reading.parse_batch is not None:  # JPEGs decoded in blocks to the output size.
        if kind is CacheKind.OFF:
            return Plan.BLOCK_STREAM
        if arena_dataset.supports(reading.block_spec):
            return Plan.ARENA
    # Strings (filenames) and features that vary in size cannot live in an arena.
    if kind is CacheKind.MEMORY and arena_dataset.supports(reading.examples.element_spec):
        return Plan.ARENA_OF_EXAMPLES
    return Plan.PER_EXAMPLE


def _arena(reading: Reading) -> tf.data.Dataset:
    """Plan.ARENA: records shuffled ─ batched ─ parsed and decoded into the arena's rows
    (epoch 1); later epochs gather from the arena."""
    epochs = arena_dataset.ArenaEpochs(
        reading.num_examples, reading.batching, reading.order, reading.output_fn
    )
    allocate, filled_rows = reading.arena_rows(reading.block_spec)
    ds, _ = arena_dataset.arena_batches(
        reading.serialized,
        epochs,
        parse_batch=reading.parse_batch,
        encoded=reading.encoded,
        allocate=allocate,
        filled_rows=filled_rows,
    )
    return ds


def _block_stream(reading: Reading) -> tf.data.Dataset:
    """Plan.BLOCK_STREAM: records shuffled (still serialized: a smaller buffer entry than
    a parsed example) ─ batched ─ parsed and decoded as one block ─ output."""
    order, batching = reading.order, reading.batching
    deterministic = order.deterministic
    ds = reading.serialized
    if order.shuffle:
        ds = ds.shuffle(order.shuffle_buffer, seed=order.seed, reshuffle_each_iteration=True)
    batch_size = batching.batch_size or UNBATCHED_BLOCK
    drop = batching.drop_remainder and batching.batch_size is not None
    decode_blocks = decode_jpeg_blocks(reading.encoded, batch_size if drop else None)
    parse_batch = reading.parse_batch
    ds = ds.batch(batch_size, drop_remainder=drop)
    ds = ds.map(
        lambda serialized: decode_blocks(parse_batch(serialized)),
        num_parallel_calls=AUTOTUNE,
        deterministic=deterministic,
    )
    if batching.batch_size is None:
        ds = ds.unbatch()
    return ds.map(reading.output_fn, num_parallel_calls=AUTOTUNE, deterministic=deterministic)


def _arena_of_examples(reading: Reading) -> tf.data.Dataset:
    """Plan.ARENA_OF_EXAMPLES: decoded examples shuffled ─ batched ─ copied into the
    arena (epoch 1); later epochs gather from the arena."""
    epochs = arena_dataset.ArenaEpochs(
        reading.num_examples, reading.batching, reading.order, reading.output_fn
    )
    allocate, filled_rows = reading.arena_rows(reading.examples.element_spec)
    ds, _ = arena_dataset.arena_batches(
        reading.examples, epochs, allocate=allocate, filled_rows=filled_rows
    )
    return ds


def _per_example(reading: Reading) -> tf.data.Dataset:
    """Plan.PER_EXAMPLE: decoded examples ─ cache (in memory or files) ─ shuffle buffer
    ─ batch ─ output."""
    order, batching, cache = reading.order, reading.batching, reading.cache
    deterministic = order.deterministic
    if cache.persist:
        logging.warning(
            "fast_tfds: persist=True: examples of %s %s vary in size or hold strings, so "
            "they cannot be kept in a persistent arena: cached in memory for this run only.",
            reading.builder.info.full_name,
            reading.split,
        )
    ds = reading.examples
    if cache.kind is CacheKind.MEMORY:
        ds = ds.cache()
    elif cache.kind is CacheKind.FILES:  # Keyed by what is cached, safe against killed runs.
        ds = tf_file_cache.cache_in_files(
            ds,
            cache.path,
            dataset_name=reading.builder.info.full_name,
            split=reading.split,
            instructions=reading.instructions,
            transform=reading.transform,
        )
    if order.shuffle:
        ds = ds.shuffle(order.shuffle_buffer, seed=order.seed, reshuffle_each_iteration=True)
    if batching.batch_size is not None:
        ds = ds.batch(
            batching.batch_size,
            drop_remainder=batching.drop_remainder,
            num_parallel_calls=AUTOTUNE,
            deterministic=deterministic,
        )
    return ds.map(reading.output_fn, num_parallel_calls=AUTOTUNE, deterministic=deterministic)


def _augmented_cache(reading: Reading) -> tf.data.Dataset:
    """Plan.AUGMENTED_CACHE: records shuffled ─ blocks parsed ─ pictures decoded into the
    cache and the block's crops served from it (epoch 1); later epochs: a permutation
    of the split ─ each batch's crops served from the cache ─ output."""
    return augment_dataset.cached_batches(reading)


def _augmented_stream(reading: Reading) -> tf.data.Dataset:
    """Plan.AUGMENTED_STREAM: records shuffled ─ blocks parsed ─ windows drawn, only
    what they need decoded, flipped and jittered ─ output."""
    return augment_dataset.stream(reading)


PIPELINES: dict[Plan, Callable[[Reading], tf.data.Dataset]] = {
    Plan.ARENA: _arena,
    Plan.BLOCK_STREAM: _block_stream,
    Plan.ARENA_OF_EXAMPLES: _arena_of_examples,
    Plan.PER_EXAMPLE: _per_example,
    Plan.AUGMENTED_CACHE: _augmented_cache,
    Plan.AUGMENTED_STREAM: _augmented_stream,
}
