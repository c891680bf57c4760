"""Augmented batches in tf.data: each example's crop, flip and jitter from (seed, epoch,
example index), the windows the Grain loader draws for the same three.

Records come tagged with their example index (`records.read_indexed_records`), and
each epoch is made from its number (`epochs`: passes counted by the dataset's clock),
so its order, windows and size are those of (seed, epoch) in any run.

- **Stream** (cache=False): blocks of records are parsed, and in one
  `tf.numpy_function` per block each picture's window is drawn from its stored size
  (or its hook window, e.g. Stanford Dogs' box) before it is decoded, so the decoder
  picks its DCT scale for the part kept; then flip and jitter.
- **Cache** (cache=True): epoch 1 decodes each picture once into a `PictureCache`
  slot at the cache resolution (aspect kept), keeps its other features, and serves
  its batch from the cache; later epochs are a new permutation of the split per
  epoch (stateless, from the seed and the epoch; epoch 0 replays the order it
  streamed in, and a later epoch of an empty cache, in a resumed run, first fills it
  without output), each batch cut out of the cache by
  `step.serve_into` in threads, the GIL released: nothing decoded, no shard
  file opened. The pictures' reference sizes (what windows are drawn in) are known
  before epoch 1: the stored size, or one pass over the JPEG headers.

TensorFlow keeps every function given to `tf.numpy_function` for good, so those
functions reach a cache by its key through a weak registry; the dataset holds it.
"""

from __future__ import annotations

import dataclasses
import io
import threading
import weakref
from collections.abc import Callable

import numpy as np
import PIL.Image
import simplejpeg
import tensorflow as tf

from fast_tfds.augment import step
from fast_tfds.augment.spec import Augment
from fast_tfds.cache import persisted as stored_pictures
from fast_tfds.cache import pictures as store
from fast_tfds.cache import placement
from fast_tfds.core import aligned, platform
from fast_tfds.core.sizes import as_hw
from fast_tfds.read import arena_dataset, persisted, records
from fast_tfds.read.decoding import WINDOW_KEY
from fast_tfds.read.output import INDEX_KEY
from fast_tfds.read.parsing import UNBATCHED_BLOCK, make_parser
from fast_tfds.read.split_reading import Reading

AUTOTUNE = tf.data.AUTOTUNE
FILL, SERVE, FILL_THEN_SERVE = 0, 1, 2
# Records per block of the header pass (reference sizes before epoch 1).
_HEADER_BLOCK = 256


# -- what both plans share ----------------------------------------------------------


def output_size(reading: Reading) -> tuple[int, int]:
    """The output size; with a `ProgressiveResize`, its largest (the cache's layout)."""
    return tuple(as_hw(reading.image_size))


def epoch_sizes(reading: Reading) -> Callable[[int], tuple[int, int]]:
    """fn(epoch) -> that epoch's output size (one size unless progressive)."""
    if reading.size_schedule is not None:
        return reading.size_schedule.size
    size = output_size(reading)
    return lambda _epoch: size


def image_shape(reading: Reading) -> list:
    """The static shape of a block of images: height and width unknown when they
    change from epoch to epoch."""
    if reading.size_schedule is not None:
        return [None, None, None, 3]
    return [None, *output_size(reading), 3]


def block_size(reading: Reading) -> int:
    return reading.batching.batch_size or UNBATCHED_BLOCK


def parsed_blocks(reading: Reading, indexed: tf.data.Dataset):
    """(indices [b], batch dict with 'image' JPEG bytes [b] and, where a transform names
    one, WINDOW_KEY [b, 4]) blocks of the (index, record) pairs `indexed`, in their
    order; the last block may be partial."""
    order, block = reading.order, block_size(reading)
    ds = indexed
    if reading.parse_batch is not None:
        parse_batch = reading.parse_batch
        ds = ds.batch(block)
        return ds.map(
            lambda indices, serialized: (indices, parse_batch(serialized)),
            num_parallel_calls=AUTOTUNE,
            deterministic=order.deterministic,
        )
    parse = make_parser(reading.features, reading.transform, reading.keys)
    ds = ds.map(
        lambda index, serialized: (index, parse(serialized)),
        num_parallel_calls=AUTOTUNE,
        deterministic=order.deterministic,
    )
    image_spec = ds.element_spec[1]["image"]
    if image_spec.dtype != tf.string:
        raise ValueError(
            "augment=: the transform decodes the image itself; with augment= it must leave "
            f"the JPEG bytes (and may name a window as {WINDOW_KEY!r})"
        )
    return ds.batch(block)


def epoch_blocks(reading: Reading, epoch) -> tf.data.Dataset:
    """`parsed_blocks` of `epoch`'s records, in the order that epoch streams them (files
    and shuffle buffer seeded from (seed, epoch)); epoch None: the record order."""
    return parsed_blocks(reading, reading.shuffled(reading.records(epoch), epoch))


def _windows_of(batch: dict) -> tf.Tensor:
    """The hook's windows [b, 4] (top, left, height, width), or [b, 0] for none."""
    window = batch.pop(WINDOW_KEY, None)
    if window is None:
        return tf.zeros([tf.shape(batch["image"])[0], 0], tf.int32)
    return tf.cast(window, tf.int32)


def _fixed_window(box) -> Callable | None:
    if len(box) == 0:
        return None
    top, left, height, width = (int(v) for v in box)
    return lambda _h, _w: (top, left, height, width)


def _finish(reading: Reading, ds: tf.data.Dataset, *, dropped: bool) -> tf.data.Dataset:
    """Blocks of output dicts -> the reader's batches (or examples)."""
    batch_size = reading.batching.batch_size
    deterministic = reading.order.deterministic
    if not reading.with_index:
        ds = ds.map(lambda batch: {k: v for k, v in batch.items() if k != INDEX_KEY})
    if batch_size is None:
        return ds.unbatch().map(reading.output_fn)
    if reading.batching.drop_remainder and not dropped:
        ds = ds.filter(lambda batch: tf.shape(batch["image"])[0] == batch_size)
    if reading.batching.drop_remainder:
        ds = ds.map(
            lambda batch: tf.nest.map_structure(
                lambda v: (
                    tf.ensure_shape(v, [batch_size, *v.shape[1:]])
                    if isinstance(v, tf.Tensor)
                    else v
                ),
                batch,
            )
        )
    return ds.map(reading.output_fn, num_parallel_calls=AUTOTUNE, deterministic=deterministic)


# -- cache=False: crops chosen before decoding ----------------------------------------


@dataclasses.dataclass(frozen=True)
class CroppedDecoder:
    """fn(epoch, indices, jpegs, boxes) -> uint8 [b, H, W, 3]: each picture's window
    drawn in its reference size (its box, else the stored picture) as example
    indices[i] of `epoch`, only that part decoded and resized, then flipped and
    jittered: the Grain loader's `AugmentedBatches` without a cache, pixel for pixel."""

    augment: Augment
    seed: int
    sizes: Callable[[int], tuple[int, int]]  # epoch -> output size

    def __call__(self, epoch, indices, jpegs, boxes) -> np.ndarray:
        n = len(jpegs)
        size = self.sizes(int(epoch))
        out = aligned.empty((n, *size, 3))
        # Reference boxes (top, left, height, width) in the stored pictures: the hook's
        # windows, else the whole pictures, from their headers; then the block's windows
        # in one vectorized draw (a draw per picture costs a quarter of its decode).
        refs = np.zeros((n, 4), np.int64)
        for i, data in enumerate(jpegs):
            if boxes.shape[1]:
                refs[i] = boxes[i]
                continue
            try:
                refs[i, 2:] = picture_size(data)
            except (OSError, ValueError) as err:
                raise ValueError(f"example {int(indices[i])}: it does not decode ({err})") from None
        step.decode_into(jpegs, refs, self.augment, self.seed, int(epoch), indices, out)
        return out


def stream(reading: Reading):
    """fn(epoch, first) -> every epoch: records shuffled ─ blocks parsed ─ cropped decode
    ─ output, from batch `first` on (the blocks before it skipped undecoded)."""
    decode = CroppedDecoder(reading.augment, reading.seed, epoch_sizes(reading))
    shape = image_shape(reading)
    drop = reading.batching.drop_remainder and reading.batching.batch_size is not None
    batched = reading.batching.batch_size is not None

    def one_epoch(epoch, first):
        ds = epoch_blocks(reading, epoch)
        if drop:
            ds = ds.filter(lambda indices, _: tf.shape(indices)[0] == block_size(reading))
        if batched:
            ds = ds.skip(first)

        def run(indices, batch):
            batch = dict(batch)
            boxes = _windows_of(batch)
            images = tf.numpy_function(
                decode, [epoch, indices, batch["image"], boxes], tf.uint8, stateful=False
            )
            batch["image"] = tf.ensure_shape(images, shape)
            batch[INDEX_KEY] = indices
            return batch

        ds = ds.map(run, num_parallel_calls=AUTOTUNE, deterministic=reading.order.deterministic)
        ds = _finish(reading, ds, dropped=True)
        return ds if batched else ds.skip(first)

    return one_epoch


# -- cache=True: pictures decoded once, crops cut from them every epoch ---------------


class AugmentCache:
    """The split's pictures at the cache resolution, and their other features (labels,
    filenames), each written once; which epoch fills it and which serves from it."""

    def __init__(
        self,
        pictures: store.PictureCache,
        slots: records.Slots,
        features: dict[str, tf.TensorSpec],
        augment: Augment,
        seed: int,
        allocate,
        sizes: Callable[[int], tuple[int, int]],
        kept: dict[str, np.ndarray] | None = None,
    ):
        """`sizes`: epoch -> output size (`epoch_sizes`); `kept`: the features' rows, if
        they come from elsewhere (a persistent file)."""
        self.pictures = pictures
        self.slots = slots
        self.keys = sorted(features)
        self.specs = features
        self.features = kept
        if kept is None:
            self.features = {
                k: np.zeros((len(pictures), *spec.shape), _numpy_dtype(spec.dtype))
                for k, spec in features.items()
            }
        self.augment, self.seed = augment, seed
        self.sizes = sizes
        self.num_threads = platform.available_cpus()
        self._allocate = allocate
        self._lock = threading.Lock()
        self._done = False
        self.key = _register(self)

    @property
    def nbytes(self) -> int:
        """Bytes of the cached pictures (their pixels), allocated once before epoch 1."""
        return self.pictures.nbytes

    def begin(self, streamed: bool) -> np.int64:
        """FILL, SERVE or FILL_THEN_SERVE (see `arena.begin`): `streamed`, the epoch's
        order is that of its records, which a fill can serve as it goes."""
        if self.pictures.images.filled:
            return np.int64(SERVE)
        return np.int64(FILL if streamed else FILL_THEN_SERVE)

    def fill(self, epoch, indices, jpegs, boxes, *features) -> np.ndarray:
        """Decodes the block's pictures that are not cached yet into their slots, keeps
        their features, and serves the block's augmented images from the cache."""
        slots = self.store(indices, jpegs, boxes, *features)
        return self._serve_into(epoch, slots, indices)

    def store(self, indices, jpegs, boxes, *features) -> np.ndarray:
        """Decodes the block's pictures that are not cached yet into their slots and
        keeps their features; returns the slots."""
        images = self.pictures.images
        slots = self.slots.slots(indices)
        for i, slot in enumerate(slots):
            slot = int(slot)
            if images.written[slot]:
                continue
            for key, values in zip(self.keys, features, strict=True):
                self.features[key][slot] = values[i]  # before the picture is marked written
            try:
                self.pictures.fill(slot, jpegs[i], _fixed_window(boxes[i]))
            except (OSError, ValueError) as err:
                raise ValueError(f"example {int(indices[i])}: it does not decode ({err})") from None
        self._when_filled()
        return slots

    def serve(self, epoch, slots) -> list[np.ndarray]:
        """[images, *features] of cache slots `slots`, augmented for `epoch`."""
        slots = np.asarray(slots, np.int64)
        images = self._serve_into(epoch, slots, self.slots.index[slots])
        return [images, *(self.features[k][slots] for k in self.keys)]

    def _serve_into(self, epoch, slots, indices) -> np.ndarray:
        out = aligned.empty((len(slots), *self.sizes(int(epoch)), 3))
        return step.serve_into(
            self.pictures,
            slots,
            self.augment,
            self.seed,
            int(epoch),
            indices,
            out,
            num_threads=self.num_threads,
        )

    def _when_filled(self) -> None:
        # Rows on disk are written back once, after the fill (see `placement.DiskRows`).
        filled = getattr(self._allocate, "filled", None)
        with self._lock:
            done = self.pictures.images.filled and not self._done
            self._done = self._done or done
        if done and filled is not None:
            filled(self.pictures.images.buffer)


_live: weakref.WeakValueDictionary[int, AugmentCache] = weakref.WeakValueDictionary()


def _register(cache: AugmentCache) -> int:
    _live[id(cache)] = cache
    return id(cache)


def _numpy_dtype(dtype: tf.DType):
    return object if dtype == tf.string else dtype.as_numpy_dtype


def cached_features(reading: Reading) -> dict[str, tf.TensorSpec]:
    """The spec of one example's features besides the image (what the cache keeps), or a
    one-line ValueError when one cannot be kept per slot (it varies in size, or nests)."""
    spec = parsed_blocks(reading, reading.records()).element_spec[1]
    features = {k: v for k, v in spec.items() if k not in ("image", WINDOW_KEY)}
    for key, value in features.items():
        if not isinstance(value, tf.TensorSpec) or None in value.shape[1:]:
            raise ValueError(
                f"cache=True: with augment= the cache keeps each example's features, and "
                f"{key!r} varies in size or nests ({value}); read with cache=False, or "
                "as_supervised=True without with_boxes"
            )
    return {k: tf.TensorSpec(v.shape[1:], v.dtype) for k, v in features.items()}


def picture_size(jpeg: bytes) -> tuple[int, int]:
    """(height, width) of a stored picture, from its header (Pillow's for a JPEG that
    libjpeg-turbo rejects, as the decoder falls back to Pillow)."""
    try:
        height, width, _, _ = simplejpeg.decode_jpeg_header(jpeg)
    except ValueError:
        with PIL.Image.open(io.BytesIO(jpeg)) as image:
            width, height = image.size
    return height, width


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
        ds = parsed_blocks(reading, indexed).map(
            lambda i, batch: (i, batch["image"], _windows_of(dict(batch)))
        )
    heights, widths = np.zeros(n, np.int64), np.zeros(n, np.int64)
    for indices, jpegs, boxes in ds.as_numpy_iterator():
        where = slots.slots(indices)
        for i, slot in enumerate(where):
            if boxes.shape[1]:
                heights[slot], widths[slot] = boxes[i, 2], boxes[i, 3]
            else:
                heights[slot], widths[slot] = picture_size(jpegs[i])
    return heights, widths


def make_cache(reading: Reading) -> AugmentCache:
    """The cache, laid out and allocated (in memory, or on disk over the budget); with
    persist=True, served from its persistent file, or filling a new one."""
    size = output_size(reading)
    augment = reading.augment
    features = cached_features(reading)
    slots = reading.slots
    n = len(slots.index)
    shorter_side = None  # The whole picture at the output size: no reference size needed.
    if augment.crop is not None:
        shorter_side = reading.cache_shorter_side or store.default_shorter_side(size)

    def sizes():
        if augment.crop is None:
            return np.full(n, size[0]), np.full(n, size[1])
        return reference_sizes(reading, slots)

    if reading.cache.persist:
        stored = stored_pictures.open_pictures(
            persisted.pictures_origin(reading),
            slots.index,
            output_size=size,
            shorter_side=shorter_side,
            features={k: (tuple(v.shape), _numpy_dtype(v.dtype)) for k, v in features.items()},
            sizes=sizes,
            folder=reading.cache.folder,
            budget=reading.cache.budget,
            what=f"{reading.builder.info.full_name} {reading.split} (augment cache)",
        )
        if stored is not None:
            return AugmentCache(
                stored.pictures,
                slots,
                features,
                augment,
                reading.seed,
                stored.filling,
                epoch_sizes(reading),
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
        need,
        what=f"{reading.builder.info.full_name} {reading.split} (augment cache)",
        cache_budget=reading.cache.budget,
        cache_dir=reading.cache.folder,
    )
    pictures = store.PictureCache(heights, widths, size, shorter_side, allocate)
    return AugmentCache(
        pictures,
        slots,
        features,
        augment,
        reading.seed,
        allocate,
        epoch_sizes(reading),
    )


def cached_batches(reading: Reading):
    """fn(epoch, first) -> that epoch's batches from batch `first` on: epoch 0 (every
    epoch unshuffled) fills an empty cache as it serves, or replays the order it
    streamed in from a filled one; a later shuffled epoch is a permutation of the split
    served from the cache, which an empty cache (a resumed run) first fills for."""
    cache = make_cache(reading)
    key, keys = cache.key, cache.keys
    specs = cache.specs
    shape = image_shape(reading)
    n, block = len(cache.slots.index), block_size(reading)
    seed = reading.seed
    shuffle = reading.order.shuffle
    batched = reading.batching.batch_size is not None
    drop = reading.batching.drop_remainder and batched
    slots = cache.slots

    def fill_epoch(epoch):
        def run(indices, batch):
            batch = dict(batch)
            boxes = _windows_of(batch)
            images = tf.numpy_function(
                lambda *args: _live[key].fill(*args),
                [epoch, indices, batch["image"], boxes, *(batch[k] for k in keys)],
                tf.uint8,
                stateful=True,
            )
            batch["image"] = tf.ensure_shape(images, shape)
            batch[INDEX_KEY] = indices
            return batch

        ds = epoch_blocks(reading, epoch).map(
            run, num_parallel_calls=AUTOTUNE, deterministic=reading.order.deterministic
        )
        # Every example is written, also those of a last partial batch that
        # drop_remainder leaves out of this epoch's output.
        return _finish(reading, ds, dropped=False)

    def serve_epoch(epoch, first):
        order = tf.range(n, dtype=tf.int64)
        if shuffle:
            order = tf.random.experimental.stateless_shuffle(
                order, seed=tf.stack([tf.constant(seed, tf.int64), epoch])
            )
        count = n // block if drop else -(-n // block)
        skip = first if batched else tf.constant(0, tf.int64)
        rows = tf.data.Dataset.range(skip, count).map(lambda i: order[i * block : (i + 1) * block])
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
                lambda epoch, rows: _live[key].serve(epoch, rows),
                [epoch, rows],
                [tf.uint8, *(specs[k].dtype for k in keys)],
                stateful=True,
            )
            batch = {"image": tf.ensure_shape(served[0], shape)}
            for k, values in zip(keys, served[1:], strict=True):
                batch[k] = tf.ensure_shape(values, [None, *specs[k].shape])
            batch[INDEX_KEY] = tf.gather(tf.constant(slots.index), rows)
            return batch

        ds = rows.map(
            gather, num_parallel_calls=AUTOTUNE, deterministic=reading.order.deterministic
        )
        ds = _finish(reading, ds, dropped=True)
        return ds if batched else ds.skip(first)

    def one_epoch(epoch, first):
        streamed = tf.logical_or(tf.constant(not shuffle), tf.equal(epoch, 0))
        mode = tf.numpy_function(
            lambda streamed: _live[key].begin(bool(streamed)), [streamed], tf.int64, stateful=True
        )
        # take(0) gets an empty iterator: the branch not taken is never set up, so a
        # served epoch starts without opening the shard files.
        fill_count = tf.where(mode == FILL, tf.constant(-1, tf.int64), 0)
        quiet_count = tf.where(mode == FILL_THEN_SERVE, tf.constant(-1, tf.int64), 0)
        serve_count = tf.where(mode == FILL, tf.constant(0, tf.int64), -1)
        filled = fill_epoch(epoch).skip(first)  # Skipped batches are cached all the same.
        served = serve_epoch(epoch, first)
        quiet = quiet_fill_as(served.element_spec)
        return (
            filled.take(fill_count)
            .concatenate(quiet.take(quiet_count))
            .concatenate(served.take(serve_count))
        )

    def quiet_fill_as(spec):
        """The quiet fill as a dataset of `spec` that yields nothing."""

        def run(indices, batch):
            batch = dict(batch)
            boxes = _windows_of(batch)
            return tf.numpy_function(
                lambda *args: np.int64(len(_live[key].store(*args))),
                [indices, batch["image"], boxes, *(batch[k] for k in keys)],
                tf.int64,
                stateful=True,
            )

        ds = epoch_blocks(reading, None).map(run, num_parallel_calls=AUTOTUNE)
        return arena_dataset.nothing_of(ds, spec)

    # The dataset that uses these epochs keeps the cache alive (see `_live`).
    one_epoch.keep = cache
    return one_epoch
