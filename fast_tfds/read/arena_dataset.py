"""The arena in tf.data: epoch 1 fills it, every later epoch is a global shuffle of it.

- **Fill** (the first epoch, and any epoch after one that stopped early): the
  examples are shuffled in a buffer, batched and written at their batch's rows as
  they are yielded. Stored JPEGs at the output size are decoded straight into their
  rows, and the uint8 batch handed on is a view of those rows, not a copy.
- **Serve** (every epoch once the arena is filled): a new permutation of the whole
  split per epoch (reproducible with a seed) picks each batch's rows, gathered from
  the arena; nothing is decoded again and the shard files are not opened.

The dataset graph reaches the arena through `tf.numpy_function`s that look it up by
key (see `arena`), and the dataset holds the arena: both go together.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from fast_tfds.cache import arena as arenas
from fast_tfds.read.decoding import BlockImages
from fast_tfds.read.options import Batching, Order
from fast_tfds.read.parsing import UNBATCHED_BLOCK, BatchParser
from fast_tfds.read.records import batches_per_epoch

AUTOTUNE = tf.data.AUTOTUNE
# How far ahead a served epoch asks for its rows when they are on disk: enough to keep
# reads in flight, little enough that they stay in the page cache until gathered under
# a memory limit (2 batches of 64 at 224 px; docs/design.md has the figures).
READ_AHEAD_BYTES = 16 << 20


@dataclasses.dataclass(frozen=True)
class ArenaEpochs:
    """How the arena's epochs are made: the split's size, and how examples become batches."""

    num_examples: int
    batching: Batching
    order: Order
    output_fn: Callable[[dict], object]

    @property
    def block(self) -> int:
        """Examples per write into the arena (a batch, or a fixed block unbatched)."""
        return self.batching.batch_size or UNBATCHED_BLOCK


def supports(element_spec) -> bool:
    """Whether examples of this spec fit an arena: a flat dict of fixed-shape numbers.

    Output whose elements vary in size (`image_size=None` on the `original` config,
    boxes) or hold strings cannot; the reader keeps `Dataset.cache()` for it.
    """
    return isinstance(element_spec, dict) and all(
        isinstance(spec, tf.TensorSpec)
        and spec.shape.is_fully_defined()
        and (spec.dtype.is_integer or spec.dtype.is_floating or spec.dtype.is_bool)
        for spec in element_spec.values()
    )


def arena_batches(
    examples: tf.data.Dataset,
    epochs: ArenaEpochs,
    *,
    parse_batch: BatchParser | None = None,
    encoded: dict[str, BlockImages] | None = None,
    allocate: arenas.Allocate | None = None,
    filled_rows: dict[str, np.ndarray] | None = None,
) -> tuple[tf.data.Dataset, arenas.Arena]:
    """One epoch of `output_fn(batch)`s, filling the arena or served from it; iterating
    the returned dataset again gives the next epoch.

    `examples` are example dicts, or with `parse_batch` serialized records that it
    parses a block at a time. `encoded` gives the features that arrive as JPEG bytes
    ({'image': BlockImages}): they are decoded into the arena's rows. `allocate` gives
    the arena its memory (default: anonymous memory; see `placement`); `filled_rows`
    are rows already filled (a persistent arena's file), served from the first epoch.
    """
    encoded = encoded or {}
    specs = arena_specs(examples, parse_batch, encoded)
    arena = arenas.Arena(
        epochs.num_examples, _columns(specs, encoded), allocate, filled_rows=filled_rows
    )
    # Without a seed each dataset still gets its own permutations.
    base_seed = (
        epochs.order.seed
        if epochs.order.seed is not None
        else random.SystemRandom().randrange(2**31)
    )
    key = arena.key

    def begin(_):
        state = tf.numpy_function(lambda: arenas.begin(key), [], tf.int64, stateful=True)
        return tf.ensure_shape(state, [3])

    def epoch(state):
        mode, generation, number = state[0], state[1], state[2]
        # take(0) gets an empty iterator: the branch not taken is never set up,
        # so a served epoch starts without opening the shard files.
        fill_count = tf.where(mode == arenas.FILL, tf.constant(-1, tf.int64), 0)
        serve_count = tf.where(mode == arenas.SERVE, tf.constant(-1, tf.int64), 0)
        filled = _fill(examples, arena, specs, epochs, parse_batch, generation)
        served = _serve(arena, specs, epochs, seed=(base_seed, number))
        return filled.take(fill_count).concatenate(served.take(serve_count))

    ds = tf.data.Dataset.from_tensors(0).map(begin).flat_map(epoch)
    # Datasets made from this one keep it, and so the arena, alive.
    ds._fast_tfds_arena = arena
    return ds, arena


def arena_specs(
    examples: tf.data.Dataset,
    parse_batch: BatchParser | None = None,
    encoded: dict[str, BlockImages] | None = None,
) -> dict[str, tf.TensorSpec]:
    """The spec of one example as the arena stores it (JPEGs decoded)."""
    parsed = examples.element_spec if parse_batch is None else parse_batch.example_spec
    return {**parsed, **{k: images.spec for k, images in (encoded or {}).items()}}


def row_bytes(specs: dict[str, tf.TensorSpec]) -> int:
    """Bytes of one example in the arena."""
    return sum(spec.shape.num_elements() * spec.dtype.size for spec in specs.values())


def _columns(specs: dict[str, tf.TensorSpec], encoded) -> dict[str, arenas.Column]:
    return {
        k: arenas.Column(
            tuple(spec.shape.as_list()), np.dtype(spec.dtype.as_numpy_dtype), encoded.get(k)
        )
        for k, spec in specs.items()
    }


def _fill(examples, arena, specs, epochs: ArenaEpochs, parse_batch, generation):
    """The examples, shuffled in a buffer and batched, each batch written at its rows.

    The output conversion (`output_fn`) runs in the same function as the write: one
    pipeline stage less per batch.
    """
    block, batch_size = epochs.block, epochs.batching.batch_size

    def store(position, batch):
        if parse_batch is not None:
            batch = parse_batch(batch)
        done, decoded = _write(arena, specs, generation, position * block, batch)
        with tf.control_dependencies([done]):
            batch = {k: tf.identity(v) for k, v in {**batch, **decoded}.items()}
        return batch if batch_size is None else epochs.output_fn(batch)

    ds = examples
    order = epochs.order
    if order.shuffle:
        ds = ds.shuffle(order.shuffle_buffer, seed=order.seed, reshuffle_each_iteration=True)
    # Every example is written, also those of a last partial batch that
    # drop_remainder leaves out of this epoch's output.
    ds = ds.batch(block, num_parallel_calls=AUTOTUNE, deterministic=epochs.order.deterministic)
    ds = ds.enumerate().map(
        store, num_parallel_calls=AUTOTUNE, deterministic=epochs.order.deterministic
    )
    if batch_size is None:
        return ds.unbatch().map(epochs.output_fn)
    if epochs.batching.drop_remainder:
        ds = ds.filter(lambda *batch: tf.shape(tf.nest.flatten(batch)[0])[0] == batch_size)
        ds = ds.map(_with_batch_dim(batch_size))
    return ds


def _write(arena, specs, generation, position, batch: dict) -> tuple[tf.Tensor, dict]:
    """`arena.write(generation, position, *batch)` in the graph; returns a tensor to
    depend on and the decoded features."""
    # By key, not the arena itself: TensorFlow keeps the callable for good.
    key = arena.key
    decoders = {k: arena.columns[k].encoded for k in arena.keys}
    done, *decoded = tf.numpy_function(
        lambda *args: arenas.write(key, decoders, *args),
        [generation, position, *(batch[k] for k in arena.keys)],
        [tf.int64, *(specs[k].dtype for k in arena.encoded)],
        stateful=True,
    )
    shaped = {
        k: tf.ensure_shape(images, [None, *specs[k].shape])
        for k, images in zip(arena.encoded, decoded, strict=True)
    }
    return done, shaped


def _serve(arena, specs, epochs: ArenaEpochs, seed: tuple) -> tf.data.Dataset:
    """Batches gathered from the filled arena in a new permutation of the split."""
    key, n, batch_size = arena.key, epochs.num_examples, epochs.batching.batch_size
    # The arena reaches the graph through a numpy_function, once per served epoch:
    # TensorFlow aliases the (page-aligned) array without a copy. A tensor captured
    # into the dataset graph instead would be read whole when the first iterator is
    # made, inside epoch 1.
    tensors = {
        k: tf.ensure_shape(
            tf.numpy_function(
                lambda feature: arenas.rows(key, feature), [k], spec.dtype, stateful=True
            ),
            [n, *spec.shape],
        )
        for k, spec in ((k, specs[k]) for k in arena.keys)
    }
    order = tf.range(n, dtype=tf.int64)
    if batch_size is not None:
        batch_bytes = batch_size * sum(a.strides[0] for a in arena.arrays.values())
        ahead = max(1, -(-READ_AHEAD_BYTES // max(batch_bytes, 1)))
    if epochs.order.shuffle:
        order = tf.random.experimental.stateless_shuffle(
            order, seed=tf.stack([tf.constant(seed[0], tf.int64), seed[1]])
        )
    if batch_size is None:
        return tf.data.Dataset.from_tensor_slices(order).map(
            lambda row: epochs.output_fn({k: t[row] for k, t in tensors.items()})
        )

    def gather(i):  # The output conversion is fused into the gather.
        rows = order[i * batch_size : (i + 1) * batch_size]
        if not arena.reads_ahead:
            return epochs.output_fn({k: tf.gather(t, rows) for k, t in tensors.items()})
        # Rows on disk: ask for those `ahead` batches on (the first call: up to there).
        start = tf.where(i == 0, tf.constant(0, tf.int64), (i + ahead) * batch_size)
        coming = order[start : (i + ahead + 1) * batch_size]
        asked = tf.numpy_function(
            lambda rows: arenas.read_ahead(key, rows), [coming], tf.int64, stateful=True
        )
        with tf.control_dependencies([asked]):
            return epochs.output_fn({k: tf.gather(t, rows) for k, t in tensors.items()})

    count = batches_per_epoch(n, batch_size, epochs.batching.drop_remainder)
    ds = tf.data.Dataset.range(count).map(
        gather, num_parallel_calls=AUTOTUNE, deterministic=epochs.order.deterministic
    )
    return ds.map(_with_batch_dim(batch_size)) if epochs.batching.drop_remainder else ds


def _with_batch_dim(batch_size: int):
    """Sets the static batch size that drop_remainder guarantees (as `batch` does)."""

    def ensure(*batch):
        batch = batch[0] if len(batch) == 1 else batch
        return tf.nest.map_structure(
            lambda v: tf.ensure_shape(v, [batch_size, *v.shape[1:]]), batch
        )

    return ensure
