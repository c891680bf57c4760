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

import functools
import os
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from fast_tfds.augment import step
from fast_tfds.augment.windows import Draw
from fast_tfds.cache import persisted as stored_pictures
from fast_tfds.cache import pictures as store
from fast_tfds.cache import placement
from fast_tfds.cache import store as stores
from fast_tfds.cache.memory import Backing
from fast_tfds.cache.tf_file_cache import callable_identity
from fast_tfds.core import aligned, platform
from fast_tfds.core.sizes import as_hw
from fast_tfds.read import augment_dataset as augmented
from fast_tfds.read import records
from fast_tfds.read.decoding import WINDOW_KEY, fixed_window
from fast_tfds.read.output import INDEX_KEY, gathered_unit_float
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


def cached_epochs(
    reading: Reading,
    key: int,
    cache: stores.Store,
    blocks: Blocks,
    put: Callable[[tf.Tensor, dict], tf.Tensor],
    serving: Serving,
    *,
    replay: bool = True,
):
    """The one fill / serve / resume loop of every cached plan: (fn(epoch, first) ->
    that epoch's elements from batch `first` on, fn(epoch, element) -> its batch, or
    None where the elements are the batches, `cache`).

    Each plan only says how a block is written and served. `key`: `cache` (either
    table: the arena of examples or a picture store) in the registry
    (`fast_tfds.cache.store`): its `begin` says what an epoch does, its `read_ahead`
    asks for slots on disk; the dataset that uses these epochs keeps `cache` alive, and
    the functions here hold its key alone (TensorFlow keeps the callables). `blocks`:
    where the fill reads its blocks. `put`: fn(indices, block) -> the block's slots
    [b], once the block is written. `serving`: how the batch of `slots` is served from
    the cache (filled at least up to them) as the output dict (INDEX_KEY included).
    `replay`: epoch 0 served from a filled cache replays the order its records
    stream in (False where that order cannot be read again: the tf.data service's).

    Epoch 0 (every epoch unshuffled) fills an empty cache, each block served once
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
    shuffle = reading.order.shuffle
    batched = reading.batching.batch_size is not None
    n, block = len(reading.slots.index), augmented.block_size(reading)
    drop = reading.batching.drop_remainder and batched
    zero = tf.constant(0, tf.int64)
    ahead = None  # Blocks asked for ahead of a shuffled epoch's gather, for slots on disk.
    if cache.backing.reads_ahead and shuffle:
        slot_bytes = cache.nbytes / max(reading.num_examples, 1)
        ahead = max(1, int(-(-READ_AHEAD_BYTES // max(block * slot_bytes, 1))))

    def full(ds):
        # drop_remainder: a last partial block is left out of the output. After the
        # fill's map: every example is written, also those of that block; skipped
        # batches too.
        return ds.filter(lambda slots: tf.shape(slots)[0] == block) if drop else ds

    filled = full(
        blocks(zero).map(
            put, num_parallel_calls=AUTOTUNE, deterministic=reading.order.deterministic
        )
    )
    # The fill in the record order without output (a resumed run's empty cache): run to
    # its end for what it does, as a dataset of slots that yields nothing (to concatenate
    # with the epoch that follows).
    quiet = blocks(None).map(put, num_parallel_calls=AUTOTUNE).filter(lambda _slots: False)
    quiet = quiet.map(lambda _slots: tf.zeros([0], tf.int64))
    replayed = None  # Epoch 0's slots in the order its records streamed in.
    if shuffle and replay:
        indices = reading.shuffled(reading.records(zero, indices_only=True), zero)
        replayed = full(indices.batch(block).map(reading.slots.tf_slots))

    def served(epoch, skip):
        """The slots of the batches served from the filled cache, from block `skip` on:
        unshuffled, in slot order (the record order); epoch 0, in the order it streamed
        (`replayed`, None where it is not replayed); later epochs, in a permutation of
        the split drawn from (seed, epoch)."""
        order = tf.range(n, dtype=tf.int64)
        if shuffle:
            order = tf.random.experimental.stateless_shuffle(
                order, seed=tf.stack([tf.constant(reading.seed, tf.int64), epoch])
            )

        def permuted(i):
            # On disk: ask for those `ahead` blocks on (the first call: up to there).
            slots = order[i * block : (i + 1) * block]
            start = tf.where(i == skip, skip * block, (i + ahead) * block)
            return _after(
                lambda slots: stores.if_alive(key, stores.Store.read_ahead, slots),
                [order[start : (i + ahead + 1) * block]],
                slots,
            )

        if ahead is None:  # No function: nothing set up at the epoch's start.
            ds = tf.data.Dataset.from_tensor_slices(order[skip * block :]).batch(
                block, drop_remainder=drop
            )
        else:
            ds = tf.data.Dataset.range(skip, batches_per_epoch(n, block, drop)).map(permuted)
        if replayed is None:
            return ds
        first_epoch = tf.equal(epoch, 0)
        return (
            replayed.skip(skip)
            .take(tf.where(first_epoch, tf.constant(-1, tf.int64), 0))
            .concatenate(ds.take(tf.where(first_epoch, tf.constant(0, tf.int64), -1)))
        )

    def slot_blocks(epoch, first):
        """The slots [b] of `epoch`'s blocks from block `first` on, each with the columns
        its batch is gathered from (`Serving.columns`, read once per epoch)."""
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
        ds = (
            filled.skip(first)
            .take(fill_count)
            .concatenate(quiet.take(quiet_count))
            .concatenate(served(epoch, first).take(serve_count))
        )
        return tf.data.Dataset.zip(ds, tf.data.Dataset.from_tensors(serving.columns()).repeat())

    def serve(epoch, element):
        slots, columns = element
        return augmented.finished(reading, serving.batch(epoch, slots, columns))

    if batched and reading.padded_examples is None:
        return slot_blocks, serve, cache

    def one_epoch(epoch, first):
        ds = augmented.finish(
            reading,
            slot_blocks(epoch, first if batched else tf.constant(0, tf.int64)),
            dropped=True,
            first=lambda slots, columns: serving.batch(epoch, slots, columns),
        )
        return ds if batched else ds.skip(first)

    return one_epoch, None, cache


class Serving(NamedTuple):
    """How a cached plan serves a batch: `columns()` -> the tensors its batches are
    gathered from, read once per epoch (a numpy function's view of a whole column:
    none, where each batch is cut by the serving step in NumPy); `batch(epoch, slots,
    columns)` -> the output dict of `slots` (INDEX_KEY included)."""

    columns: Callable[[], tuple]
    batch: Callable[[tf.Tensor, tf.Tensor, tuple], dict]


def _after(effect: Callable, inputs: list, value: tf.Tensor) -> tf.Tensor:
    """`value`, once `effect(*inputs)` (a stateful NumPy call, e.g. a store's write or
    read-ahead) has run: the batch that needs the effect cannot overtake it."""
    done = tf.numpy_function(effect, inputs, tf.int64, stateful=True)
    with tf.control_dependencies([done]):
        return tf.identity(value)


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
            lambda *args: stores.if_alive(key, stores.Store.write, *args),
            [slots, *(batch[k] for k in keys)],
            slots,
        )

    serving = gathering(key, specs, reading)

    return cached_epochs(
        reading, key, arena, blocks, put, serving, replay=reading.service_address is None
    )


def row_bytes(specs: dict[str, tf.TensorSpec]) -> int:
    """Bytes of one example in the arena."""
    return sum(spec.shape.num_elements() * spec.dtype.size for spec in specs.values())


def _columns(specs: dict[str, tf.TensorSpec]) -> dict[str, tuple]:
    """{name: (shape, dtype)} of a table's columns of `specs` (strings: objects)."""
    return {
        k: (
            tuple(spec.shape.as_list()),
            object if spec.dtype == tf.string else spec.dtype.as_numpy_dtype,
        )
        for k, spec in specs.items()
    }


def gathering(key: int, specs: dict[str, tf.TensorSpec], reading: Reading) -> Serving:
    """The serving of a table whose batches are its rows as they are: each feature of
    `specs` gathered in the graph from its whole column (`Store.column`) of the table
    registered under `key`: the arena of examples, and a picture store that serves its
    rows as they are (a plain read). A gather in the graph costs no Python per batch;
    uint8 images read as float32 are gathered and converted in one pass."""
    slots = reading.slots
    n = len(slots.index)
    keys = sorted(specs)

    def columns():
        # Each column reaches the graph through a numpy_function, once per epoch:
        # TensorFlow aliases the (page-aligned) array without a copy. A tensor captured
        # into the dataset graph instead would be read whole when the first iterator is
        # made, inside epoch 1; a numpy_function per batch is Python (and the GIL) per
        # batch.
        return tuple(
            tf.ensure_shape(
                tf.numpy_function(
                    lambda name: stores.live(key).column(name.decode()),
                    [k],
                    specs[k].dtype,
                    stateful=True,
                ),
                [n, *specs[k].shape],
            )
            for k in keys
        )

    def gather(name, values, at):
        if name == "image" and values.dtype == tf.uint8 and reading.output_dtype == tf.float32:
            return gathered_unit_float(values, at)
        return tf.gather(values, at)

    def batch(_epoch, at, columns):
        gathered = {k: gather(k, values, at) for k, values in zip(keys, columns, strict=True)}
        gathered[INDEX_KEY] = slots.tf_index(at)
        return gathered

    return Serving(columns, batch)


# -- the picture store with augment=: pictures decoded once, crops cut every epoch ----


def cached_features(reading: Reading) -> dict[str, tf.TensorSpec]:
    """The spec of one example's features besides the image (what the cache keeps), or a
    one-line ValueError when one cannot be kept per slot (it varies in size, or nests)."""
    if reading.parse_batch is not None:  # Fixed features, parsed in blocks: traced once.
        spec = reading.parse_batch.example_spec
    else:  # A transform's output: the spec of its blocks, one example's part.
        blocks = augmented.record_blocks(reading, reading.records()).element_spec[1]
        spec = {
            k: tf.TensorSpec(v.shape[1:], v.dtype) if isinstance(v, tf.TensorSpec) else v
            for k, v in blocks.items()
        }
    features = {k: v for k, v in spec.items() if k not in ("image", WINDOW_KEY)}
    for key, value in features.items():
        if not isinstance(value, tf.TensorSpec) or None in value.shape:
            raise ValueError(
                f"cache=True: with augment= the cache keeps each example's features, and "
                f"{key!r} varies in size or nests ({value}); read with cache=False, or "
                "as_supervised=True without with_boxes"
            )
    return features


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

        def jpegs_and_windows(i, block):
            batch = augmented.parsed(reading, block)
            return i, batch["image"], augmented.windows_of(batch)

        ds = augmented.record_blocks(reading, indexed).map(jpegs_and_windows)
    heights, widths = np.zeros(n, np.int64), np.zeros(n, np.int64)
    for indices, jpegs, boxes in ds.as_numpy_iterator():
        refs = augmented.reference_boxes(indices, jpegs, boxes)
        where = slots.slots(indices)
        heights[where], widths[where] = refs[:, 2], refs[:, 3]
    return heights, widths


def make_cache(reading: Reading, features: dict[str, tf.TensorSpec]) -> stores.Store:
    """The store of the picture and `features` (`cached_features`) of each example, laid
    out and allocated (in memory, or on disk over the budget); with persist=True, served
    from its persistent file, or filling a new one. A plain read (no `augment`) and a
    read without a crop keep each picture at the output size."""
    size = augmented.output_size(reading)
    augment = reading.augment
    slots = reading.slots
    crops = augment is not None and augment.crop is not None
    shorter_side = store.shorter_side(crops, reading.cache_shorter_side, size)
    what = f"{reading.builder.info.full_name} {reading.split}" + (
        " (augment cache)" if augment is not None else ""
    )
    stored = tuple(reading.features["image"].shape[:2])
    return stores.open_store(
        slot_examples=slots.index,
        slot_of=slots.slots,
        output_size=size,
        shorter_side=shorter_side,
        features=_columns(features),
        # A transform's window cuts each picture: its reference size is read per example.
        stored_size=stored if reading.parse_batch is not None and None not in stored else None,
        header_sizes=lambda: reference_sizes(reading, slots),
        origin=pictures_origin(reading) if reading.cache.persist else None,
        folder=reading.cache.folder,
        budget=reading.cache.budget,
        what=what,
    )


def cached_batches(reading: Reading):
    """(fn(epoch, first) -> that epoch's batches (`cached_epochs`), the store) of the
    picture store: each block's pictures decoded into the store and the block cut from
    it by the serving step (epoch 0), then every batch cut from the store. TensorFlow
    keeps the NumPy functions for good: they hold the store's key, and the read's few
    settings (the augmentation, the seed, each epoch's size), never the store."""
    specs = cached_features(reading)
    cache = make_cache(reading, specs)
    key = stores.register(cache)
    keys = cache.keys
    shape = augmented.image_shape(reading)
    augment, seed, sizes = reading.augment, reading.seed, augmented.epoch_sizes(reading)
    num_threads = platform.available_cpus()

    def put(indices, block):
        batch = augmented.parsed(reading, block)
        boxes = augmented.windows_of(batch)  # Taken out: the store keeps no windows.
        args = [indices, batch["image"], boxes, *(batch[k] for k in keys)]
        slots = tf.numpy_function(
            lambda *args: _put(stores.live(key), *args), args, tf.int64, stateful=True
        )
        return tf.ensure_shape(slots, [None])

    def serve(epoch, slots, indices) -> list[np.ndarray]:
        """[images, *features] of store slots `slots` (examples `indices`), augmented
        for `epoch`."""
        table = stores.live(key)
        slots = np.asarray(slots, np.int64)
        out = aligned.empty((len(slots), *sizes(int(epoch)), 3))
        draw = Draw(augment, seed, int(epoch), indices)
        step.serve_into(table.pictures, slots, draw, out, num_threads=num_threads)
        return [out, *(table.features[k][slots] for k in keys)]

    def cut(epoch, slots, _columns):
        indices = reading.slots.tf_index(slots)
        served = tf.numpy_function(
            serve,
            [epoch, slots, indices],
            [tf.uint8, *(specs[k].dtype for k in keys)],
            stateful=True,
        )
        batch = {"image": tf.ensure_shape(served[0], shape)}
        for k, values in zip(keys, served[1:], strict=True):
            batch[k] = tf.ensure_shape(values, [None, *specs[k].shape])
        batch[INDEX_KEY] = indices
        return batch

    # Each batch cut by the serving step in NumPy: no column in the graph (a stand-in:
    # the epoch's zip needs a tensor).
    serving = Serving(lambda: (tf.zeros([0], tf.uint8),), cut)
    # Served batches of one size are the stored rows as they are, nothing drawn, every
    # picture at the output size (a plain read): gathered in the graph.
    plain = augment is None or augment == step.NO_AUGMENT
    if plain and cache.pictures.uniform and reading.size_schedule is None:
        rows = {"image": tf.TensorSpec(shape[1:], tf.uint8), **specs}
        serving = gathering(key, rows, reading)

    blocks = functools.partial(augmented.epoch_blocks, reading)
    return cached_epochs(reading, key, cache, blocks, put, serving)


def _put(table: stores.Store, indices, jpegs, boxes, *features) -> np.ndarray:
    """Writes the block's examples that `table` does not hold yet; returns their slots."""
    windows = [fixed_window(box) for box in boxes]
    values = dict(zip(table.keys, features, strict=True))
    return table.put_many(indices, jpegs, windows, values, step.decode_error)


# Records per block of the header pass (reference sizes before epoch 1).
_HEADER_BLOCK = 256


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
        rows, _ = stored_pictures.open_file(
            pictures_origin(reading),
            reading.slots.index,
            output_size=as_hw(reading.image_size),
            features=_columns(specs),
            folder=reading.cache.folder,
            budget=reading.cache.budget,
            what=f"{reading.builder.info.full_name} {reading.split}",
            pictures=False,
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
