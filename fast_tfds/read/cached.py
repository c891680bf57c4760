"""The picture store and the arena of examples in tf.data: the one module that wires the
caches of `fast_tfds.cache` (store, placement, persistence) into the tf.data reader.

**The picture store** (`cache=True`: a plain read, or `augment=`): epoch 1 decodes each
picture once into its slot of a `fast_tfds.cache.store.Store` (at the output size for a
plain read, else at the cache resolution, aspect kept), keeps its other features, and
serves its batch from the store; later epochs are a new permutation of the split per
epoch (stateless, from the seed and the epoch; epoch 0 replays the order it streamed in,
and a later epoch of an empty store, in a resumed run, first fills it without output),
each batch cut out of the store by the serving step
(`fast_tfds.augment.step.serve_into`; a plain read: a gather of whole rows): nothing
decoded, no shard file opened. An epoch stopped early keeps what it wrote. Pictures on
disk are asked for a few batches ahead. The pictures' reference sizes (what windows are
drawn in) are known before epoch 1: the output size, the stored size, or one pass over
the JPEG headers.

**The arena of examples** (the fallback, `cache=True`, for fixed-size examples a
transform or the tf.data service decoded): epoch 1's examples are shuffled in a buffer
seeded from (seed, epoch), batched and each written at its own row (its example index in
this pipeline's share); every epoch once it is filled gathers a permutation of the
split drawn from (seed, epoch) from it, in the graph. Epoch 0 served from a filled arena
replays the order its fill streams in; a later epoch whose arena is empty first fills
it in record order without output. So every epoch is the same whichever run reads it.

**Persistence** (`persist=True`): every persistent cache of either back end, plain or
augmented, is one kind of file under one key (`fast_tfds.cache.persisted.key`). A plain
read is the picture store without a crop, so the loader's plain cache and an
`Augment(crop=None)` read share its file; an arena of examples that a transform (or a
tf.data service) decoded keeps its images as features, keyed by the transform's code
(or TensorFlow's version).

TensorFlow keeps every function given to `tf.numpy_function` for good, so those
functions reach a cache by its key through a weak registry; the dataset holds it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from fast_tfds.augment import step
from fast_tfds.augment.spec import Augment
from fast_tfds.cache import arena as arenas
from fast_tfds.cache import persisted as stored_pictures
from fast_tfds.cache import pictures as store
from fast_tfds.cache import placement
from fast_tfds.cache import store as stores
from fast_tfds.cache.tf_file_key import callable_identity
from fast_tfds.core import aligned, dataset_hooks, platform
from fast_tfds.core.sizes import as_hw
from fast_tfds.read import augment_dataset as augmented
from fast_tfds.read import records
from fast_tfds.read.decoding import WINDOW_KEY
from fast_tfds.read.options import Batching, Order
from fast_tfds.read.output import INDEX_KEY
from fast_tfds.read.parsing import UNBATCHED_BLOCK
from fast_tfds.read.records import Slots, batches_per_epoch
from fast_tfds.read.split_reading import Reading

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

    `blocks` give example dicts. `allocate` gives the arena its memory
    (default: anonymous memory; see `placement`); `filled_rows` are rows already filled
    (a persistent arena's file), served from the first epoch.
    """
    arena = arenas.Arena(epochs.num_examples, _columns(specs), allocate, filled_rows=filled_rows)
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
        filled = _fill(blocks(epoch), arena, epochs, generation)
        filled = filled.skip(first)  # Skipped batches are written all the same.
        # The served part looks up the rows when it starts: after a fill before it.
        served = tf.data.Dataset.from_tensors(0).flat_map(
            lambda _: _serve(arena, specs, epochs, epoch, first, index_blocks)
        )
        quiet = nothing_of(
            _fill(blocks(None), arena, epochs, generation, output=False),
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


def row_bytes(specs: dict[str, tf.TensorSpec]) -> int:
    """Bytes of one example in the arena."""
    return sum(spec.shape.num_elements() * spec.dtype.size for spec in specs.values())


def _columns(specs: dict[str, tf.TensorSpec]) -> dict[str, arenas.Column]:
    return {
        k: arenas.Column(tuple(spec.shape.as_list()), np.dtype(spec.dtype.as_numpy_dtype))
        for k, spec in specs.items()
    }


def _fill(blocks, arena, epochs: ArenaEpochs, generation, output=True):
    """The blocks, each written at its examples' rows, then (`output`) converted.

    The output conversion (`output_fn`) runs in the same function as the write: one
    pipeline stage less per batch.
    """
    batch_size = epochs.batching.batch_size
    key = arena.key  # By key, not the arena itself: TensorFlow keeps the callable for good.

    def store(indices, batch):
        done = tf.numpy_function(
            lambda *args: arenas.write(key, *args),
            [generation, epochs.rows_of(indices), *(batch[k] for k in arena.keys)],
            tf.int64,
            stateful=True,
        )
        with tf.control_dependencies([done]):
            batch = {k: tf.identity(v) for k, v in batch.items()}
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


# -- the picture store with augment=: pictures decoded once, crops cut every epoch ----


class StoreReads:
    """The tf.data reader's wiring of a picture store: the store (its fill state is the
    store's, `fast_tfds.cache.store.Store`), and how its batches are cut (the
    augmentation, None for a plain read; the seed, each epoch's size, threads).
    Registered by key: the functions TensorFlow keeps reach it only through
    `fast_tfds.cache.store`'s registry."""

    def __init__(
        self,
        pictures: store.PictureCache,
        slots: records.Slots,
        features: dict[str, tf.TensorSpec],
        augment: Augment | None,
        seed: int,
        allocate,
        sizes: Callable[[int], tuple[int, int]],
        kept: dict[str, np.ndarray] | None = None,
    ):
        """`sizes`: epoch -> output size (`epoch_sizes`); `kept`: the features' rows, if
        they come from elsewhere (a persistent file); `allocate`: where the pictures'
        memory came from (told once they are all written, if it asks)."""
        if kept is None:
            kept = {
                k: np.zeros((len(pictures), *spec.shape), _numpy_dtype(spec.dtype))
                for k, spec in features.items()
            }
        filling = allocate if hasattr(allocate, "filled") else None
        self.store = stores.Store(pictures, slots.slots, kept, filling=filling, placed=allocate)
        self.slots = slots
        self.keys = sorted(features)
        self.specs = features
        self.augment, self.seed = augment, seed
        self.sizes = sizes
        self.num_threads = platform.available_cpus()
        self.key = stores.register(self)

    @property
    def nbytes(self) -> int:
        return self.store.nbytes

    @property
    def pictures(self) -> store.PictureCache:
        return self.store.pictures

    def begin(self, streamed: bool) -> np.int64:
        return self.store.begin(streamed)

    def fill(self, epoch, indices, jpegs, boxes, *features) -> np.ndarray:
        """Decodes the block's pictures that are not cached yet into their slots, keeps
        their features, and serves the block's augmented images from the store."""
        slots = self.put(indices, jpegs, boxes, *features)
        return self._serve_into(epoch, slots, indices)

    def put(self, indices, jpegs, boxes, *features) -> np.ndarray:
        """Writes the block's examples that the store does not hold yet; returns their
        slots."""
        slots = self.store.slots(indices)
        for i, slot in enumerate(slots):
            values = {key: column[i] for key, column in zip(self.keys, features, strict=True)}
            try:
                self.store.put(slot, jpegs[i], _fixed_window(boxes[i]), values)
            except (OSError, ValueError) as err:
                raise step.decode_error(indices[i], err) from None
        self.store.when_filled()
        return slots

    def read_ahead(self, slots) -> np.int64:
        self.store.read_ahead(slots)
        return np.int64(0)

    def serve(self, epoch, slots) -> list[np.ndarray]:
        """[images, *features] of store slots `slots`, augmented for `epoch`."""
        slots = np.asarray(slots, np.int64)
        images = self._serve_into(epoch, slots, self.slots.index[slots])
        return [images, *(self.store.rows_of(k, slots) for k in self.keys)]

    def _serve_into(self, epoch, slots, indices) -> np.ndarray:
        out = aligned.empty((len(slots), *self.sizes(int(epoch)), 3))
        return step.serve_into(
            self.store.pictures,
            slots,
            self.augment,
            self.seed,
            int(epoch),
            indices,
            out,
            num_threads=self.num_threads,
        )


def _numpy_dtype(dtype: tf.DType):
    return object if dtype == tf.string else dtype.as_numpy_dtype


def cached_features(reading: Reading) -> dict[str, tf.TensorSpec]:
    """The spec of one example's features besides the image (what the cache keeps), or a
    one-line ValueError when one cannot be kept per slot (it varies in size, or nests)."""
    spec = augmented.parsed_blocks(reading, reading.records()).element_spec[1]
    features = {k: v for k, v in spec.items() if k not in ("image", WINDOW_KEY)}
    for key, value in features.items():
        if not isinstance(value, tf.TensorSpec) or None in value.shape[1:]:
            raise ValueError(
                f"cache=True: with augment= the cache keeps each example's features, and "
                f"{key!r} varies in size or nests ({value}); read with cache=False, or "
                "as_supervised=True without with_boxes"
            )
    return {k: tf.TensorSpec(v.shape[1:], v.dtype) for k, v in features.items()}


def reference_sizes(reading: Reading, slots: records.Slots) -> tuple[np.ndarray, np.ndarray]:
    """(heights, widths) per slot of the pictures windows are drawn in: the stored
    size when the dataset's is fixed, else one pass over the JPEG headers (and the
    hook's windows); nothing is decoded."""
    n = len(slots.index)
    stored = reading.features["image"].shape[:2]
    if reading.parse_batch is not None and None not in stored:
        return np.full(n, stored[0], np.int64), np.full(n, stored[1], np.int64)
    indexed = reading.records()
    if reading.parse_batch is not None:
        image_only = {"image": tf.io.FixedLenFeature([], tf.string)}
        ds = indexed.batch(_HEADER_BLOCK).map(
            lambda i, s: (i, tf.io.parse_example(s, image_only)["image"], tf.zeros([0, 0]))
        )
    else:
        ds = augmented.parsed_blocks(reading, indexed).map(
            lambda i, batch: (i, batch["image"], augmented.windows_of(dict(batch)))
        )
    heights, widths = np.zeros(n, np.int64), np.zeros(n, np.int64)
    for indices, jpegs, boxes in ds.as_numpy_iterator():
        where = slots.slots(indices)
        for i, slot in enumerate(where):
            if boxes.shape[1]:
                heights[slot], widths[slot] = boxes[i, 2], boxes[i, 3]
            else:
                heights[slot], widths[slot] = augmented.picture_size(jpegs[i])
    return heights, widths


def make_cache(reading: Reading) -> StoreReads:
    """The store, laid out and allocated (in memory, or on disk over the budget); with
    persist=True, served from its persistent file, or filling a new one. A plain read
    (no `augment`) and a read without a crop keep each picture at the output size."""
    size = augmented.output_size(reading)
    augment = reading.augment
    crops = augment is not None and augment.crop is not None
    features = cached_features(reading)
    slots = reading.slots
    n = len(slots.index)
    shorter_side = None  # The whole picture at the output size: no reference size needed.
    if crops:
        shorter_side = reading.cache_shorter_side or store.default_shorter_side(size)
    what = f"{reading.builder.info.full_name} {reading.split}" + (
        " (augment cache)" if augment is not None else ""
    )

    def sizes():
        if not crops:
            return np.full(n, size[0]), np.full(n, size[1])
        return reference_sizes(reading, slots)

    if reading.cache.persist:
        stored = stored_pictures.open_pictures(
            pictures_origin(reading),
            slots.index,
            output_size=size,
            shorter_side=shorter_side,
            features={k: (tuple(v.shape), _numpy_dtype(v.dtype)) for k, v in features.items()},
            sizes=sizes,
            folder=reading.cache.folder,
            budget=reading.cache.budget,
            what=what,
        )
        if stored is not None:
            return StoreReads(
                stored.pictures,
                slots,
                features,
                augment,
                reading.seed,
                stored.filling,
                augmented.epoch_sizes(reading),
                kept=stored.features,
            )
    heights, widths = sizes()
    cache_h, cache_w = (
        (heights, widths)
        if shorter_side is None
        else store.cache_size(heights, widths, shorter_side)
    )
    need = int(np.sum(np.asarray(cache_h, np.int64) * cache_w * 3))
    allocate = placement.allocator(
        need, what=what, cache_budget=reading.cache.budget, cache_dir=reading.cache.folder
    )
    pictures = store.PictureCache(heights, widths, size, shorter_side, allocate)
    return StoreReads(
        pictures,
        slots,
        features,
        augment,
        reading.seed,
        allocate,
        augmented.epoch_sizes(reading),
    )


def cached_batches(reading: Reading):
    """fn(epoch, first) -> that epoch's batches from batch `first` on: epoch 0 (every
    epoch unshuffled) fills an empty cache as it serves, or replays the order it
    streamed in from a filled one; a later shuffled epoch is a permutation of the split
    served from the cache, which an empty cache (a resumed run) first fills for."""
    cache = make_cache(reading)
    key, keys = cache.key, cache.keys
    specs = cache.specs
    shape = augmented.image_shape(reading)
    n, block = len(cache.slots.index), augmented.block_size(reading)
    seed = reading.seed
    shuffle = reading.order.shuffle
    batched = reading.batching.batch_size is not None
    drop = reading.batching.drop_remainder and batched
    slots = cache.slots
    ahead = None  # Blocks asked for ahead of a shuffled epoch's gather, for pictures on disk.
    if cache.store.reads_ahead and shuffle:
        block_bytes = block * cache.nbytes / max(n, 1)
        ahead = max(1, int(-(-READ_AHEAD_BYTES // max(block_bytes, 1))))

    def fill_blocks(epoch):
        """`epoch`'s blocks decoded into the store, each served as it is written."""

        def run(indices, batch):
            batch = dict(batch)
            boxes = augmented.windows_of(batch)
            images = tf.numpy_function(
                lambda *args: stores.live(key).fill(*args),
                [epoch, indices, batch["image"], boxes, *(batch[k] for k in keys)],
                tf.uint8,
                stateful=True,
            )
            batch["image"] = tf.ensure_shape(images, shape)
            batch[INDEX_KEY] = indices
            return batch

        return augmented.epoch_blocks(reading, epoch).map(
            run, num_parallel_calls=AUTOTUNE, deterministic=reading.order.deterministic
        )

    def serve_epoch(epoch, first):
        order = tf.range(n, dtype=tf.int64)
        if shuffle:
            order = tf.random.experimental.stateless_shuffle(
                order, seed=tf.stack([tf.constant(seed, tf.int64), epoch])
            )
        count = n // block if drop else -(-n // block)
        skip = first if batched else tf.constant(0, tf.int64)

        def permuted(i):
            rows = order[i * block : (i + 1) * block]
            if ahead is None:
                return rows
            # Pictures on disk: ask for those `ahead` blocks on (the first call: up to there).
            start = tf.where(i == skip, skip * block, (i + ahead) * block)
            asked = tf.numpy_function(
                _read_ahead(key), [order[start : (i + ahead + 1) * block]], tf.int64, stateful=True
            )
            with tf.control_dependencies([asked]):
                return tf.identity(rows)

        rows = tf.data.Dataset.range(skip, count).map(permuted)
        if shuffle:
            # Epoch 0 streamed in the order its records came in: replay it.
            streamed = (
                reading.shuffled(reading.records(epoch, indices_only=True), epoch)
                .batch(block)
                .map(slots.tf_slots)
                .skip(skip)
            )
            if drop:
                streamed = streamed.filter(lambda r: tf.shape(r)[0] == block)
            zero = tf.equal(epoch, 0)
            rows = streamed.take(tf.where(zero, tf.constant(-1, tf.int64), 0)).concatenate(
                rows.take(tf.where(zero, tf.constant(0, tf.int64), -1))
            )

        def gather(rows):
            served = tf.numpy_function(
                lambda epoch, rows: stores.live(key).serve(epoch, rows),
                [epoch, rows],
                [tf.uint8, *(specs[k].dtype for k in keys)],
                stateful=True,
            )
            batch = {"image": tf.ensure_shape(served[0], shape)}
            for k, values in zip(keys, served[1:], strict=True):
                batch[k] = tf.ensure_shape(values, [None, *specs[k].shape])
            batch[INDEX_KEY] = tf.gather(tf.constant(slots.index), rows)
            return batch

        ds = augmented.finish(reading, rows, dropped=True, step=gather)
        return ds if batched else ds.skip(first)

    def one_epoch(epoch, first):
        streamed = tf.logical_or(tf.constant(not shuffle), tf.equal(epoch, 0))
        mode = tf.numpy_function(
            lambda streamed: stores.live(key).begin(bool(streamed)),
            [streamed],
            tf.int64,
            stateful=True,
        )
        # take(0) gets an empty iterator: the branch not taken is never set up, so a
        # served epoch starts without opening the shard files.
        fill_count = tf.where(mode == FILL, tf.constant(-1, tf.int64), 0)
        quiet_count = tf.where(mode == FILL_THEN_SERVE, tf.constant(-1, tf.int64), 0)
        serve_count = tf.where(mode == FILL, tf.constant(0, tf.int64), -1)
        blocks = fill_blocks(epoch)
        # Every example is written, also those of a last partial batch that
        # drop_remainder leaves out of this epoch's output, and skipped batches.
        filled = augmented.finish(reading, blocks, dropped=False).skip(first)
        served = serve_epoch(epoch, first)
        # The quiet fill (an empty store, a permutation to serve) runs the same blocks
        # without output: one decoding pipeline in the epoch's graph, not two, since
        # every iterator instantiates all of it, the branches not taken included.
        quiet = nothing_of(blocks, served.element_spec)
        return (
            filled.take(fill_count)
            .concatenate(quiet.take(quiet_count))
            .concatenate(served.take(serve_count))
        )

    # The dataset that uses these epochs keeps the cache alive (see `stores.register`).
    one_epoch.keep = cache
    return one_epoch


FILL, SERVE, FILL_THEN_SERVE = stores.FILL, stores.SERVE, stores.FILL_THEN_SERVE
# Records per block of the header pass (reference sizes before epoch 1).
_HEADER_BLOCK = 256


def _read_ahead(key: int):
    def read_ahead(slots):
        reads = stores.find(key)
        return np.int64(0) if reads is None else reads.read_ahead(slots)

    return read_ahead


def _fixed_window(box) -> Callable | None:
    if len(box) == 0:
        return None
    top, left, height, width = (int(v) for v in box)
    return lambda _h, _w: (top, left, height, width)


# -- persistence and placement -------------------------------------------------------


def pictures_origin(reading) -> stored_pictures.Origin:
    """What `reading`'s caches are made from, named as the loader names it: a dataset
    hook's transform carries what its settings change; another transform (the user's
    own) is keyed by its code, and so never shared with the loader."""
    transform = reading.transform
    if transform is None:
        hook = {}
    elif hasattr(transform, dataset_hooks.PERSIST_IDENTITY):
        hook = getattr(transform, dataset_hooks.PERSIST_IDENTITY)
    else:
        hook = {"transform": callable_identity(transform)}
    return stored_pictures.Origin(
        dataset=reading.builder.info.full_name,
        split=reading.split,
        shard_files=tuple(os.fspath(fi.filename) for fi in reading.instructions),
        hook=hook,
    )


def arena_rows(reading, specs: dict[str, tf.TensorSpec]):
    """(allocate, filled_rows) for `reading`'s arena of `specs`: with `persist`, the rows
    of a persistent file to serve (filled_rows) or a new persistent file to fill; else,
    or where this run cannot persist, memory or disk rows (`placement`)."""
    if not reading.cache.persist:
        return arena_allocator(reading, specs), None
    rows = stored_pictures.open_rows(
        pictures_origin(reading),
        reading.slots.index,
        output_size=as_hw(reading.image_size),
        features={k: (tuple(s.shape.as_list()), s.dtype.as_numpy_dtype) for k, s in specs.items()},
        folder=reading.cache.folder,
        budget=reading.cache.budget,
        what=f"{reading.builder.info.full_name} {reading.split}",
        decoder=f"tensorflow {tf.__version__}" if reading.service_address is not None else None,
    )
    if rows is None:
        return arena_allocator(reading, specs), None
    return rows.allocate, rows.filled


def arena_allocator(reading, specs: dict[str, tf.TensorSpec]):
    """Where the arena of examples of `specs` gets its rows: memory, or disk when they do
    not fit the budget (one log line says so; no room at all: an error)."""
    return placement.allocator(
        reading.num_examples * row_bytes(specs),
        what=f"{reading.builder.info.full_name} {reading.split}",
        cache_budget=reading.cache.budget,
        cache_dir=reading.cache.folder,
    )
