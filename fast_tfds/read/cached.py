"""The picture store and the arena of examples in tf.data: the one module that wires the
caches of `fast_tfds.cache` (the slot table, placement, persistence) into the tf.data
reader. Both are slot tables (`fast_tfds.cache.store.Store`), filled, served and resumed
by one loop (`cached_epochs`); each plan only says how a block is written and served.

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
it in record order without output (the same loop as the picture store's). So every
epoch is the same whichever run reads it.

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
import functools
import os
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from fast_tfds.augment import step
from fast_tfds.augment.spec import Augment
from fast_tfds.cache import persisted as stored_pictures
from fast_tfds.cache import pictures as store
from fast_tfds.cache import placement
from fast_tfds.cache import store as stores
from fast_tfds.cache.memory import Backing
from fast_tfds.cache.tf_file_cache import callable_identity
from fast_tfds.core import aligned, jpeg_blocks, platform
from fast_tfds.core.sizes import as_hw
from fast_tfds.read import augment_dataset as augmented
from fast_tfds.read import records
from fast_tfds.read.decoding import WINDOW_KEY
from fast_tfds.read.output import INDEX_KEY
from fast_tfds.read.records import batches_per_epoch
from fast_tfds.read.split_reading import Reading

AUTOTUNE = tf.data.AUTOTUNE
# How far ahead a served epoch asks for its rows when they are on disk: enough to keep
# reads in flight, little enough that they stay in the page cache until gathered under
# a memory limit (2 batches of 64 at 224 px; docs/design.md has the figures).
READ_AHEAD_BYTES = 16 << 20
FILL, SERVE, FILL_THEN_SERVE = stores.FILL, stores.SERVE, stores.FILL_THEN_SERVE


# fn(epoch) -> (example indices [b], block dict) of that epoch's examples in the order
# it streams them (serialized records parsed, or decoded examples); fn(None): in the
# split's record order.
Blocks = Callable[[tf.Tensor | None], tf.data.Dataset]


@dataclasses.dataclass(frozen=True)
class CachedPlan:
    """What a cached plan gives the one fill / serve / resume loop (`cached_epochs`).

    Attributes:
      reading: the read (order, batching, slots, output).
      key: the cache in the registry (`fast_tfds.cache.store`): its `begin` says what an
        epoch does, its `read_ahead` asks for slots on disk.
      slot_bytes: bytes of one slot (how many blocks a read-ahead covers).
      reads_ahead: whether a served epoch asks for its slots ahead (they are on disk).
      blocks: where the fill reads its blocks.
      put: fn(indices, block) -> the block's slots [b], once the block is written.
      serving: fn(epoch) -> fn(slots) -> the output dict (INDEX_KEY included) of `slots`
        served from the cache (filled at least up to them).
      replay: epoch 0 served from a filled cache replays the order its records stream in
        (False where that order cannot be read again: the tf.data service's).
    """

    reading: Reading
    key: int
    slot_bytes: float
    reads_ahead: bool
    blocks: Blocks
    put: Callable[[tf.Tensor, dict], tf.Tensor]
    serving: Callable[[tf.Tensor], Callable[[tf.Tensor], dict]]
    replay: bool = True


def cached_epochs(plan: CachedPlan):
    """(fn(epoch, first) -> that epoch's elements from batch `first` on, fn(epoch,
    element) -> its batch, or None where the elements are the batches) for every cached
    plan: epoch 0 (every epoch unshuffled) fills an empty cache, each block served once
    it is written, or replays the order it streamed in from a filled one; a later
    shuffled epoch is a permutation of the split drawn from (seed, epoch) served from
    the cache, which an empty cache (a resumed run) first fills for, in the record
    order, without output. Each example is written at its slot whatever order fills it,
    so an epoch's output depends on (seed, epoch) alone.

    An epoch is only the slots of its batches: the fill writes its blocks and yields
    their slots, a served epoch is a permutation cut in blocks (no function of its
    own). The serving (gather, augmentation, output) is one map over every epoch,
    after `epochs.repeat_epochs`' passes, so an iterator sets its function up once. The
    fills and the replay of epoch 0 are built here, once, and the epoch's function
    captures them: a new iterator sets up (and TensorFlow's grappler optimizes) every
    function it reaches together with every function those hold, and the fill's
    (parsing, decoding) held inside the epoch's function cost 0.1 s of every iterator
    of a served epoch. A fill streams only epoch 0 when shuffling (a later epoch is a
    permutation, filled first in the record order), and every unshuffled epoch streams
    the same order: one fill serves every epoch. Unbatched and padded reads serve
    inside the epoch: their positions count examples, or padding follows the served
    batches."""
    reading, key = plan.reading, plan.key
    shuffle = reading.order.shuffle
    batched = reading.batching.batch_size is not None
    block = augmented.block_size(reading)
    drop = reading.batching.drop_remainder and batched
    zero = tf.constant(0, tf.int64)

    filled = plan.blocks(zero).map(
        plan.put, num_parallel_calls=AUTOTUNE, deterministic=reading.order.deterministic
    )
    # Every example is written, also those of a last partial batch that drop_remainder
    # leaves out of this epoch's output; skipped batches too.
    if drop:
        filled = filled.filter(lambda slots: tf.shape(slots)[0] == block)
    quiet = nothing_of(plan.blocks(None).map(plan.put, num_parallel_calls=AUTOTUNE))
    replayed = _replayed(plan) if shuffle and plan.replay else None

    def slot_blocks(epoch, first):
        """The slots [b] of `epoch`'s blocks from block `first` on."""
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
        return (
            filled.skip(first)
            .take(fill_count)
            .concatenate(quiet.take(quiet_count))
            .concatenate(_served(plan, epoch, first, replayed).take(serve_count))
        )

    def serve(epoch, slots):
        return augmented.finished(reading, plan.serving(epoch)(slots))

    if batched and reading.padded_examples is None:
        return slot_blocks, serve

    def one_epoch(epoch, first):
        ds = augmented.finish(
            reading,
            slot_blocks(epoch, first if batched else tf.constant(0, tf.int64)),
            dropped=True,
            first=lambda slots: plan.serving(epoch)(slots),
        )
        return ds if batched else ds.skip(first)

    return one_epoch, None


def plan_epochs(reading: Reading, key: int, cache, blocks, put, serving, *, replay=True):
    """(`cached_epochs` of the plan these make, `cache`) for either cache (the arena of
    examples or a `StoreReads`): its size per slot, and whether it is on disk, read
    from it here. The dataset that uses these epochs keeps `cache` alive
    (`stores.register`); the plan holds its key alone (TensorFlow keeps the callables)."""
    slot_bytes = cache.nbytes / max(reading.num_examples, 1)
    plan = CachedPlan(reading, key, slot_bytes, cache.reads_ahead, blocks, put, serving, replay)
    make_epoch, serve = cached_epochs(plan)
    return make_epoch, serve, cache


def _served(plan: CachedPlan, epoch, skip, replayed) -> tf.data.Dataset:
    """The slots of the batches served from the filled cache, from block `skip` on:
    unshuffled, in slot order (the record order); epoch 0, in the order it streamed
    (`replayed`, None where it is not replayed); later epochs, in a permutation of the
    split drawn from (seed, epoch)."""
    reading, key = plan.reading, plan.key  # The key alone: TensorFlow keeps the callables.
    shuffle, batched = reading.order.shuffle, reading.batching.batch_size is not None
    n, block = len(reading.slots.index), augmented.block_size(reading)
    drop = reading.batching.drop_remainder and batched
    order = tf.range(n, dtype=tf.int64)
    if shuffle:
        order = tf.random.experimental.stateless_shuffle(
            order, seed=tf.stack([tf.constant(reading.seed, tf.int64), epoch])
        )
    ahead = None  # Blocks asked for ahead of a shuffled epoch's gather, for slots on disk.
    if plan.reads_ahead and shuffle:
        ahead = max(1, int(-(-READ_AHEAD_BYTES // max(block * plan.slot_bytes, 1))))

    def permuted(i):
        # On disk: ask for those `ahead` blocks on (the first call: up to there).
        slots = order[i * block : (i + 1) * block]
        start = tf.where(i == skip, skip * block, (i + ahead) * block)
        return _after(
            lambda slots: stores.read_ahead(key, slots),
            [order[start : (i + ahead + 1) * block]],
            slots,
        )

    if ahead is None:  # No function: nothing set up at the epoch's start.
        ds = tf.data.Dataset.from_tensor_slices(order[skip * block :]).batch(
            block, drop_remainder=drop
        )
    else:
        ds = tf.data.Dataset.range(skip, batches_per_epoch(n, block, drop)).map(permuted)
    if replayed is not None:
        zero = tf.equal(epoch, 0)
        ds = (
            replayed.skip(skip)
            .take(tf.where(zero, tf.constant(-1, tf.int64), 0))
            .concatenate(ds.take(tf.where(zero, tf.constant(0, tf.int64), -1)))
        )
    return ds


def _replayed(plan: CachedPlan) -> tf.data.Dataset:
    """The slots of epoch 0's blocks in the order its records streamed in (a shuffled
    read), to serve epoch 0 again from a filled cache."""
    reading = plan.reading
    block = augmented.block_size(reading)
    zero = tf.constant(0, tf.int64)
    ds = (
        reading.shuffled(reading.records(zero, indices_only=True), zero)
        .batch(block)
        .map(reading.slots.tf_slots)
    )
    if reading.batching.drop_remainder and reading.batching.batch_size is not None:
        ds = ds.filter(lambda s: tf.shape(s)[0] == block)
    return ds


def _after(effect: Callable, inputs: list, value: tf.Tensor) -> tf.Tensor:
    """`value`, once `effect(*inputs)` (a stateful NumPy call, e.g. a store's write or
    read-ahead) has run: the batch that needs the effect cannot overtake it."""
    done = tf.numpy_function(effect, inputs, tf.int64, stateful=True)
    with tf.control_dependencies([done]):
        return tf.identity(value)


def nothing_of(ds: tf.data.Dataset) -> tf.data.Dataset:
    """`ds` run to its end for what it does (a fill without output), as a dataset of
    slots that yields nothing (to concatenate with the epoch that follows)."""
    return ds.filter(_never).map(_no_slots)


def _never(*_):
    return False


def _no_slots(*_):
    return tf.zeros([0], tf.int64)


# -- the arena of examples: examples decoded elsewhere, copied once ----------------


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


def arena_batches(reading: Reading, specs: dict[str, tf.TensorSpec]):
    """(fn(epoch, first) -> that epoch's batches (`cached_epochs`), the arena) of the
    arena of examples: a table of fixed columns (`specs`) that the decoded examples are copied
    into (each at its slot), and served from by a gather in the graph. Its rows live in
    memory, on disk over the budget, or in a persistent file (`arena_rows`)."""
    backing, filled = arena_rows(reading, specs)
    arena = stores.Store(reading.num_examples, _columns(specs), None, backing, filled=filled)
    key = stores.register(arena)  # By key: TensorFlow keeps the callables for good.
    keys = arena.keys
    block = augmented.block_size(reading)
    deterministic = reading.order.deterministic

    def blocks(epoch):
        return reading.shuffled(reading.examples(epoch), epoch).batch(
            block, num_parallel_calls=AUTOTUNE, deterministic=deterministic
        )

    def put(indices, batch):
        slots = reading.slots.tf_slots(indices)
        return _after(
            lambda *args: stores.write(key, *args), [slots, *(batch[k] for k in keys)], slots
        )

    serving = gathering(key, specs, reading.slots, lambda arena, name: arena.features[name])

    return plan_epochs(
        reading, key, arena, blocks, put, serving, replay=reading.service_address is None
    )


def row_bytes(specs: dict[str, tf.TensorSpec]) -> int:
    """Bytes of one example in the arena."""
    return sum(spec.shape.num_elements() * spec.dtype.size for spec in specs.values())


def _columns(specs: dict[str, tf.TensorSpec]) -> dict[str, tuple]:
    return {
        k: (tuple(spec.shape.as_list()), np.dtype(spec.dtype.as_numpy_dtype))
        for k, spec in specs.items()
    }


def gathering(key: int, specs: dict[str, tf.TensorSpec], slots: records.Slots, column):
    """fn(epoch) -> fn(slots) -> the output dict of `slots`, each feature of `specs`
    gathered in the graph from its whole column, `column(cache, name)` of the cache
    registered under `key`: the arena of examples, and a picture store that serves its
    rows as they are (a plain read). A gather in the graph costs no Python per batch."""
    n = len(slots.index)

    def serving(_epoch):
        # The column reaches the graph through a numpy_function, once per served epoch:
        # TensorFlow aliases the (page-aligned) array without a copy. A tensor captured
        # into the dataset graph instead would be read whole when the first iterator is
        # made, inside epoch 1.
        columns = {
            k: tf.ensure_shape(
                tf.numpy_function(
                    lambda name: column(stores.live(key), name.decode()),
                    [k],
                    spec.dtype,
                    stateful=True,
                ),
                [n, *spec.shape],
            )
            for k, spec in specs.items()
        }

        def gather(at):
            batch = {k: tf.gather(values, at) for k, values in columns.items()}
            batch[INDEX_KEY] = slots.tf_index(at)
            return batch

        return gather

    return serving


# -- the picture store with augment=: pictures decoded once, crops cut every epoch ----


class StoreReads:
    """The tf.data reader's wiring of a picture store: the store (its fill state is the
    store's, `fast_tfds.cache.store.Store`), and how its batches are cut (the
    augmentation, None for a plain read; the seed, each epoch's size, threads).
    Registered by key: the functions TensorFlow keeps reach it only through
    `fast_tfds.cache.store`'s registry."""

    def __init__(
        self,
        cache: stores.Store,
        slots: records.Slots,
        features: dict[str, tf.TensorSpec],
        augment: Augment | None,
        seed: int,
        sizes: Callable[[int], tuple[int, int]],
    ):
        """`sizes`: epoch -> output size (`epoch_sizes`)."""
        self.store = cache
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

    @property
    def reads_ahead(self) -> bool:
        return self.store.reads_ahead

    @property
    def serves_rows(self) -> bool:
        """Whether a served batch of the largest size is the stored rows as they are:
        nothing drawn, every picture stored at the output size (a plain read)."""
        return (self.augment is None or self.augment == step.NO_AUGMENT) and self.pictures.uniform

    def column(self, name: str) -> np.ndarray:
        """The whole column `name` (a view): the pictures as rows, or a feature."""
        return self.store.pictures.rows() if name == "image" else self.store.features[name]

    def begin(self, streamed: bool) -> np.int64:
        return self.store.begin(streamed)

    def put(self, indices, jpegs, boxes, *features) -> np.ndarray:
        """Writes the block's examples that the store does not hold yet; returns their
        slots."""
        windows = [_fixed_window(box) for box in boxes]
        values = dict(zip(self.keys, features, strict=True))
        return self.store.put_many(indices, jpegs, windows, values, step.decode_error)

    def read_ahead(self, slots) -> None:
        self.store.read_ahead(slots)

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
    """(heights, widths) per slot of the pictures windows are drawn in, from one pass
    over the JPEG headers (and the hook's windows); nothing is decoded."""
    n = len(slots.index)
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
                heights[slot], widths[slot] = jpeg_blocks.stored_size(jpegs[i])
    return heights, widths


def make_cache(reading: Reading) -> StoreReads:
    """The store, laid out and allocated (in memory, or on disk over the budget); with
    persist=True, served from its persistent file, or filling a new one. A plain read
    (no `augment`) and a read without a crop keep each picture at the output size."""
    size = augmented.output_size(reading)
    augment = reading.augment
    features = cached_features(reading)
    slots = reading.slots
    crops = augment is not None and augment.crop is not None
    shorter_side = store.shorter_side(crops, reading.cache_shorter_side, size)
    what = f"{reading.builder.info.full_name} {reading.split}" + (
        " (augment cache)" if augment is not None else ""
    )
    stored = tuple(reading.features["image"].shape[:2])
    cache = stores.open_store(
        slots.index,
        slots.slots,
        output_size=size,
        shorter_side=shorter_side,
        features={k: (tuple(v.shape), _numpy_dtype(v.dtype)) for k, v in features.items()},
        # A transform's window cuts each picture: its reference size is read per example.
        stored_size=stored if reading.parse_batch is not None and None not in stored else None,
        header_sizes=lambda: reference_sizes(reading, slots),
        origin=pictures_origin(reading) if reading.cache.persist else None,
        folder=reading.cache.folder,
        budget=reading.cache.budget,
        what=what,
    )
    return StoreReads(cache, slots, features, augment, reading.seed, augmented.epoch_sizes(reading))


def cached_batches(reading: Reading):
    """(fn(epoch, first) -> that epoch's batches (`cached_epochs`), the `StoreReads`) of
    the picture store: each block's pictures decoded into the store and the block cut
    from it by the serving step (epoch 0), then every batch cut from the store."""
    cache = make_cache(reading)
    key, keys, specs = cache.key, cache.keys, cache.specs
    shape = augmented.image_shape(reading)

    def put(indices, batch):
        batch = dict(batch)
        boxes = augmented.windows_of(batch)  # Taken out: the store keeps no windows.
        args = [indices, batch["image"], boxes, *(batch[k] for k in keys)]
        slots = tf.numpy_function(
            lambda *args: np.asarray(stores.live(key).put(*args), np.int64),
            args,
            tf.int64,
            stateful=True,
        )
        return tf.ensure_shape(slots, [None])

    def cut(epoch):

        def gather(slots):
            served = tf.numpy_function(
                lambda epoch, slots: stores.live(key).serve(epoch, slots),
                [epoch, slots],
                [tf.uint8, *(specs[k].dtype for k in keys)],
                stateful=True,
            )
            batch = {"image": tf.ensure_shape(served[0], shape)}
            for k, values in zip(keys, served[1:], strict=True):
                batch[k] = tf.ensure_shape(values, [None, *specs[k].shape])
            batch[INDEX_KEY] = cache.slots.tf_index(slots)
            return batch

        return gather

    serving = cut
    if cache.serves_rows and reading.size_schedule is None:  # Gathered in the graph.
        rows = {"image": tf.TensorSpec(shape[1:], tf.uint8), **specs}
        serving = gathering(key, rows, cache.slots, StoreReads.column)

    blocks = functools.partial(augmented.epoch_blocks, reading)
    return plan_epochs(reading, key, cache, blocks, put, serving)


# Records per block of the header pass (reference sizes before epoch 1).
_HEADER_BLOCK = 256


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
    elif reading.hook_identity is not None:
        hook = reading.hook_identity()
    else:
        hook = {"transform": callable_identity(transform)}
    return stored_pictures.Origin(
        dataset=reading.builder.info.full_name,
        split=reading.split,
        shard_files=tuple(os.fspath(fi.filename) for fi in reading.instructions),
        hook=hook,
    )


def arena_rows(reading, specs: dict[str, tf.TensorSpec]) -> tuple[Backing, bool]:
    """(backing, filled) for `reading`'s arena of `specs`: with `persist`, the rows of a
    persistent file to serve (filled) or a new persistent file to fill; else, or where
    this run cannot persist, memory or disk rows (`placement`)."""
    if reading.cache.persist:
        rows = stored_pictures.open_rows(
            pictures_origin(reading),
            reading.slots.index,
            output_size=as_hw(reading.image_size),
            features={
                k: (tuple(s.shape.as_list()), s.dtype.as_numpy_dtype) for k, s in specs.items()
            },
            folder=reading.cache.folder,
            budget=reading.cache.budget,
            what=f"{reading.builder.info.full_name} {reading.split}",
            decoder=f"tensorflow {tf.__version__}" if reading.service_address is not None else None,
        )
        if rows is not None:
            return rows.backing, rows.filled
    # Memory, or disk when the rows do not fit the budget (one log line says so; no room
    # at all: an error).
    backing = placement.allocator(
        reading.num_examples * row_bytes(specs),
        what=f"{reading.builder.info.full_name} {reading.split}",
        cache_budget=reading.cache.budget,
        cache_dir=reading.cache.folder,
    )
    return backing, False
