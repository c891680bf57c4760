"""The ways `read_split` turns a split's records into batches, and how one is chosen.

Decoding is the expensive step, so it runs in parallel, a block of JPEGs at a time
where the stored images already have the output size; its uint8 output is what gets
cached (4x smaller than float32), so later epochs never decode again. The plans are
drawn in `fast_tfds.read`'s docstring.
"""

from __future__ import annotations

import enum

import tensorflow as tf
from absl import logging

from fast_tfds.cache import tf_file_cache
from fast_tfds.read import augment_dataset, cached
from fast_tfds.read.epochs import MakeEpoch, Serve
from fast_tfds.read.options import CacheKind
from fast_tfds.read.output import INDEX_KEY
from fast_tfds.read.split_reading import Reading

AUTOTUNE = tf.data.AUTOTUNE
# (fn(epoch, first) -> that epoch's elements, fn(epoch, element) -> its batch or None
# where the elements are the batches, the cache its numpy functions reach by key or
# None): `epochs.repeat_epochs` serves the elements and keeps the cache alive.
Epochs = tuple[MakeEpoch, Serve, object]


class Plan(enum.Enum):
    """How `read_split` turns a split's records into batches. Three kinds: from the
    picture store (CACHED, plain or augmented), streamed from the records (STREAM,
    plain or augmented), and per example (the fallback for what cannot be stored or is
    decoded elsewhere: a transform, the tf.data service, outputs that vary in size; it
    caches fixed-size examples in an arena, others with `Dataset.cache()`)."""

    # cache=True, JPEGs to a fixed output size, with or without augment=: epoch 1
    # decodes each picture once into the picture store (at the output size without a
    # crop, else at the cache resolution, aspect kept) and serves its batch from it;
    # later epochs cut every batch out of the store by the serving step, in a new
    # order, without decoding (a plain read: a gather of whole rows).
    CACHED = "cached"
    # cache=False, JPEGs to a fixed output size, with or without augment=: each block of
    # records parsed, each picture's window (the whole picture for a plain read) chosen
    # before it is decoded, only what it needs decoded; then flip and jitter (the
    # serving step's `decode_into`, which the loader calls too).
    STREAM = "stream"
    # The fallback, cache=True, fixed-size examples decoded one at a time (transformed,
    # e.g. cropped, or decoded by a tf.data service): epoch 1 copies its batches into
    # an arena of examples; later epochs gather from it.
    ARENA_OF_EXAMPLES = "arena of examples"
    # The fallback, everything else: examples decoded one at a time, cached per example
    # (in memory or in files) if asked, shuffled and batched.
    PER_EXAMPLE = "per example"


def choose_plan(reading: Reading) -> Plan:
    """The fastest plan that can produce what the options ask for."""
    kind = reading.cache.kind
    if reading.augment is not None:  # ReadOptions allows cache=True or False only.
        return Plan.CACHED if kind is CacheKind.MEMORY else Plan.STREAM
    if reading.parse_batch is not None:  # JPEGs decoded in blocks to the output size.
        if kind is CacheKind.OFF:
            return Plan.STREAM
        if kind is CacheKind.MEMORY and cached.supports(reading.block_spec):
            return Plan.CACHED
    # Strings (filenames) and features that vary in size cannot live in an arena.
    if kind is CacheKind.MEMORY and cached.supports(reading.examples().element_spec[1]):
        return Plan.ARENA_OF_EXAMPLES
    return Plan.PER_EXAMPLE


def _per_example(reading: Reading) -> Epochs:
    """Plan.PER_EXAMPLE: decoded examples ─ cache (in memory or files) ─ shuffle buffer
    ─ batch ─ output.

    With a cache, the examples are cached in the split's record order and each epoch
    shuffles them from (seed, epoch): the order never depends on which pass filled it."""
    order, batching, cache = reading.order, reading.batching, reading.cache
    deterministic = order.deterministic
    if cache.persist:
        logging.warning(
            "fast_tfds: persist=True: examples of %s %s vary in size or hold strings, so "
            "they cannot be kept in a persistent arena: cached in memory for this run only.",
            reading.builder.info.full_name,
            reading.split,
        )
    with_index = reading.with_index

    def as_dict(index, example):
        return {**example, INDEX_KEY: index} if with_index else example

    cached = None
    if cache.kind is not CacheKind.OFF:
        cached = reading.examples().map(as_dict)
        if cache.kind is CacheKind.MEMORY:
            cached = cached.cache()
        else:  # Keyed by what is cached, safe against killed runs.
            cached = tf_file_cache.cache_in_files(
                cached,
                cache.path,
                dataset_name=reading.builder.info.full_name,
                split=reading.split,
                instructions=reading.instructions,
                transform=reading.transform,
            )

    def one_epoch(epoch, first):
        ds = cached if cached is not None else reading.examples(epoch).map(as_dict)
        ds = reading.shuffled(ds, epoch)
        if batching.batch_size is not None:
            ds = ds.batch(
                batching.batch_size,
                drop_remainder=batching.drop_remainder,
                num_parallel_calls=AUTOTUNE,
                deterministic=deterministic,
            )
        ds = ds.skip(first)
        return ds.map(reading.output_fn, num_parallel_calls=AUTOTUNE, deterministic=deterministic)

    return one_epoch, None, None


def pipeline(plan: Plan, reading: Reading) -> Epochs:
    """`plan`'s epochs: fn(epoch, first batch) -> that epoch's batches, the step that
    serves each batch (or None), and the cache the epochs read (or None)."""
    if plan is Plan.CACHED:
        # Records shuffled ─ blocks parsed ─ pictures decoded into the store and the block
        # served from it (epoch 1); later epochs: a permutation of the split ─ each batch
        # served from the store ─ output.
        return cached.cached_batches(reading)
    if plan is Plan.STREAM:
        # Records shuffled (still serialized: a smaller buffer entry than a parsed
        # example) ─ blocks parsed ─ windows drawn, only what they need decoded, flipped
        # and jittered ─ output.
        return augment_dataset.stream(reading), None, None
    if plan is Plan.ARENA_OF_EXAMPLES:
        # Decoded examples shuffled ─ batched ─ copied into the arena (epoch 1); later
        # epochs gather from the arena.
        return cached.arena_batches(reading, reading.examples().element_spec[1])
    return _per_example(reading)
