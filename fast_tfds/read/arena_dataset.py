"""The arena in tf.data: epoch 1 fills it, every later epoch is a global shuffle of it.

- **Fill** (the first epoch, and any epoch after one that stopped early): the
  examples are shuffled in a buffer seeded from (seed, epoch), batched and each
  written at its own row (its example index in this pipeline's share) as they are
  yielded. Stored JPEGs at the output size are decoded straight into their rows when
  a batch's rows are consecutive (shuffle=False), and the uint8 batch handed on is a
  view of those rows, not a copy.
- **Serve** (every epoch once the arena is filled): a permutation of the whole split
  drawn from (seed, epoch) picks each batch's rows (shuffle=False: the rows in
  order, the record order), gathered from the arena; nothing is decoded again and
  the shard files are not opened. Epoch 0 served from a filled arena (a persistent
  file, a resumed run) replays the order its fill streams in, computed from the
  indices alone; a later epoch whose arena is empty (a resumed run) first fills it in
  record order without output. So every epoch is the same whichever run reads it.

The dataset graph reaches the arena through `tf.numpy_function`s that look it up by
key (see `arena`), and the dataset holds the arena: both go together.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from fast_tfds.cache import arena as arenas
from fast_tfds.read.decoding import BlockImages
from fast_tfds.read.options import Batching, Order
from fast_tfds.read.output import INDEX_KEY
from fast_tfds.read.parsing import UNBATCHED_BLOCK, BatchParser
from fast_tfds.read.records import Slots, batches_per_epoch

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
    seed: int = 0  # Each epoch's permutation is drawn from (seed, epoch).
    slots: Slots | None = None  # Example index <-> row; None: row = index.
    with_index: bool = False  # The output holds each example's index.

    @property
    def block(self) -> int:
        """Examples per write into the arena (a batch, or a fixed block unbatched)."""
        return self.batching.batch_size or UNBATCHED_BLOCK

    def rows_of(self, indices: tf.Tensor) -> tf.Tensor:
        return indices if self.slots is None else self.slots.tf_slots(indices)

    def index_of(self, rows: tf.Tensor) -> tf.Tensor:
        if self.slots is None:
            return rows
        return tf.gather(tf.constant(self.slots.index), rows)


# fn(epoch) -> (example indices [b], block) of that epoch's examples in the order it
# reads them, `block` serialized records or a dict of decoded examples; fn(None): in
# the split's record order.
Blocks = Callable[[tf.Tensor | None], tf.data.Dataset]
# fn(epoch) -> the example indices [b] of each block `Blocks(epoch)` yields, in the same
# order, without reading a record.
IndexBlocks = Callable[[tf.Tensor], tf.data.Dataset]


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
    blocks: Blocks,
    epochs: ArenaEpochs,
    *,
    specs: dict[str, tf.TensorSpec],
    index_blocks: IndexBlocks | None = None,
    parse_batch: BatchParser | None = None,
    encoded: dict[str, BlockImages] | None = None,
    allocate: arenas.Allocate | None = None,
    filled_rows: dict[str, np.ndarray] | None = None,
) -> tuple[Callable[[tf.Tensor, tf.Tensor], tf.data.Dataset], arenas.Arena]:
    """fn(epoch, first) -> that epoch's `output_fn(batch)`s from batch `first` on, filling
    the arena or served from it; and the arena.

    Each example is written at its row (its slot: the example index within this
    pipeline's share), whatever order fills it, so the rows are the same after any fill.
    An epoch's order depends on (seed, epoch) alone: epoch 0 (or any epoch, unshuffled)
    is the order its records stream in (`blocks(epoch)`), which fills an empty arena
    and is replayed from a filled one (`index_blocks(0)`); a later shuffled epoch is a
    permutation of the split drawn from (seed, epoch), which an empty arena (a resumed
    run) first fills for, in the record order, without output.

    `blocks` give serialized records that `parse_batch` parses, or example dicts.
    `encoded` gives the features that arrive as JPEG bytes ({'image': BlockImages}):
    they are decoded into the arena's rows. `allocate` gives the arena its memory
    (default: anonymous memory; see `placement`); `filled_rows` are rows already filled
    (a persistent arena's file), served from the first epoch.
    """
    encoded = encoded or {}
    arena = arenas.Arena(
        epochs.num_examples, _columns(specs, encoded), allocate, filled_rows=filled_rows
    )
    key = arena.key
    shuffle = epochs.order.shuffle

    def begin(epoch):
        streamed = tf.logical_or(tf.constant(not shuffle), tf.equal(epoch, 0))
        state = tf.numpy_function(
            lambda streamed: arenas.begin(key, bool(streamed)), [streamed], tf.int64, stateful=True
        )
        return tf.ensure_shape(state, [2])

    def one_epoch(epoch, first):
        state = begin(epoch)
        mode, generation = state[0], state[1]
        # take(0) gets an empty iterator: the branch not taken is never set up,
        # so a served epoch starts without opening the shard files.
        fill_count = tf.where(mode == arenas.FILL, tf.constant(-1, tf.int64), 0)
        quiet_count = tf.where(mode == arenas.FILL_THEN_SERVE, tf.constant(-1, tf.int64), 0)
        serve_count = tf.where(mode == arenas.FILL, tf.constant(0, tf.int64), -1)
        filled = _fill(blocks(epoch), arena, specs, epochs, parse_batch, generation)
        filled = filled.skip(first)  # Skipped batches are written all the same.
        # The served part looks up the rows when it starts: after a fill before it.
        served = tf.data.Dataset.from_tensors(0).flat_map(
            lambda _: _serve(arena, specs, epochs, epoch, first, index_blocks)
        )
        quiet = nothing_of(
            _fill(blocks(None), arena, specs, epochs, parse_batch, generation, output=False),
            served.element_spec,
        )
        return (
            filled.take(fill_count)
            .concatenate(quiet.take(quiet_count))
            .concatenate(served.take(serve_count))
        )

    # The dataset that uses these epochs keeps the arena alive (see `arena`).
    one_epoch.arena = arena
    return one_epoch, arena


def nothing_of(ds: tf.data.Dataset, spec) -> tf.data.Dataset:
    """`ds` run to its end for what it does (a fill without output), as a dataset of
    `spec` that yields nothing (to concatenate with the epoch that follows)."""
    empty = tf.nest.map_structure(
        lambda s: tf.zeros([d or 0 for d in s.shape.as_list()], s.dtype), spec
    )
    return ds.filter(lambda *_: False).map(lambda *_: empty)


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


def _fill(blocks, arena, specs, epochs: ArenaEpochs, parse_batch, generation, output=True):
    """The blocks, each written at its examples' rows, then (`output`) converted.

    The output conversion (`output_fn`) runs in the same function as the write: one
    pipeline stage less per batch.
    """
    batch_size = epochs.batching.batch_size

    def store(indices, batch):
        if parse_batch is not None:
            batch = parse_batch(batch)
        done, decoded = _write(arena, specs, generation, epochs.rows_of(indices), batch)
        with tf.control_dependencies([done]):
            batch = {k: tf.identity(v) for k, v in {**batch, **decoded}.items()}
        if not output:
            return done
        if epochs.with_index:
            batch[INDEX_KEY] = indices
        return batch if batch_size is None else epochs.output_fn(batch)

    # Every example is written, also those of a last partial batch that
    # drop_remainder leaves out of this epoch's output.
    ds = blocks.map(store, num_parallel_calls=AUTOTUNE, deterministic=epochs.order.deterministic)
    if not output:
        return ds
    if batch_size is None:
        return ds.unbatch().map(epochs.output_fn)
    if epochs.batching.drop_remainder:
        ds = ds.filter(lambda *batch: tf.shape(tf.nest.flatten(batch)[0])[0] == batch_size)
        ds = ds.map(_with_batch_dim(batch_size))
    return ds


def _write(arena, specs, generation, rows, batch: dict) -> tuple[tf.Tensor, dict]:
    """`arena.write(generation, rows, *batch)` in the graph; returns a tensor to depend
    on and the decoded features."""
    # By key, not the arena itself: TensorFlow keeps the callable for good.
    key = arena.key
    decoders = {k: arena.columns[k].encoded for k in arena.keys}
    done, *decoded = tf.numpy_function(
        lambda *args: arenas.write(key, decoders, *args),
        [generation, rows, *(batch[k] for k in arena.keys)],
        [tf.int64, *(specs[k].dtype for k in arena.encoded)],
        stateful=True,
    )
    shaped = {
        k: tf.ensure_shape(images, [None, *specs[k].shape])
        for k, images in zip(arena.encoded, decoded, strict=True)
    }
    return done, shaped


def _serve(arena, specs, epochs: ArenaEpochs, epoch, first, index_blocks) -> tf.data.Dataset:
    """Batches gathered from the filled arena, from batch `first` on: unshuffled, in
    row order (the record order); epoch 0, in the order it streamed (`index_blocks`);
    later epochs, in a permutation of the split drawn from (seed, epoch)."""
    key, n, batch_size = arena.key, epochs.num_examples, epochs.batching.batch_size
    block = epochs.block
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
    if epochs.order.shuffle:
        order = tf.random.experimental.stateless_shuffle(
            order, seed=tf.stack([tf.constant(epochs.seed, tf.int64), epoch])
        )
    drop = epochs.batching.drop_remainder and batch_size is not None
    count = batches_per_epoch(n, block, drop)
    ahead = None
    if arena.reads_ahead:
        block_bytes = block * sum(a.strides[0] for a in arena.arrays.values())
        ahead = max(1, -(-READ_AHEAD_BYTES // max(block_bytes, 1)))
    skip = first if batch_size is not None else tf.constant(0, tf.int64)

    def permuted(i):
        return i, order[i * block : (i + 1) * block]

    by_permutation = tf.data.Dataset.range(skip, count).map(permuted)
    if epochs.order.shuffle and index_blocks is not None:
        # Epoch 0 streamed in the order its records came in: replay it.
        streamed = (
            index_blocks(epoch).map(lambda indices: epochs.rows_of(indices)).enumerate().skip(skip)
        )
        if drop:
            streamed = streamed.filter(lambda _, rows: tf.shape(rows)[0] == block)
        replay = tf.where(epoch == 0, tf.constant(-1, tf.int64), 0)
        rows_ds = streamed.take(replay).concatenate(
            by_permutation.take(tf.where(epoch == 0, tf.constant(0, tf.int64), -1))
        )
    else:
        rows_ds = by_permutation

    def gather(i, rows):  # The output conversion is fused into the gather.
        batch = {k: tf.gather(t, rows) for k, t in tensors.items()}
        if epochs.with_index:
            batch[INDEX_KEY] = epochs.index_of(rows)
        if ahead is None or not epochs.order.shuffle:
            return epochs.output_fn(batch)
        # Rows on disk: ask for those `ahead` blocks on (the first call: up to there).
        start = tf.where(i == skip, skip * block, (i + ahead) * block)
        coming = order[start : (i + ahead + 1) * block]
        asked = tf.numpy_function(
            lambda rows: arenas.read_ahead(key, rows), [coming], tf.int64, stateful=True
        )
        with tf.control_dependencies([asked]):
            return epochs.output_fn({k: tf.identity(v) for k, v in batch.items()})

    ds = rows_ds.map(gather, num_parallel_calls=AUTOTUNE, deterministic=epochs.order.deterministic)
    if batch_size is None:
        return ds.unbatch().skip(first)
    return ds.map(_with_batch_dim(batch_size)) if drop else ds


def _with_batch_dim(batch_size: int):
    """Sets the static batch size that drop_remainder guarantees (as `batch` does)."""

    def ensure(*batch):
        batch = batch[0] if len(batch) == 1 else batch
        return tf.nest.map_structure(
            lambda v: tf.ensure_shape(v, [batch_size, *v.shape[1:]]), batch
        )

    return ensure
