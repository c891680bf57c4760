"""Augmented batches in tf.data: each example's crop, flip and jitter from (seed, epoch,
example index), the windows the Grain loader draws for the same three.

Records come tagged with their example index (`records.read_indexed_records`), and
each iteration of the dataset asks a counter for its epoch number (0, 1, ...) in a
stateful `tf.numpy_function` before its first batch, as the arena's `begin` does.

- **Stream** (cache=False): blocks of records are parsed, and in one
  `tf.numpy_function` per block each picture's window is drawn from its stored size
  (or its hook window, e.g. Stanford Dogs' box) before it is decoded, so the decoder
  picks its DCT scale for the part kept; then flip and jitter.
- **Cache** (cache=True): epoch 1 decodes each picture once into a `PictureCache`
  slot at the cache resolution (aspect kept), keeps its other features, and serves
  its batch from the cache; later epochs are a new permutation of the split per
  epoch (stateless, from the seed and the epoch), each batch cut out of the cache by
  `PictureCache.serve_into` in threads, the GIL released: nothing decoded, no shard
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

from fast_tfds.augment import cached, kernels, ragged, windows
from fast_tfds.augment import persisted as stored_pictures
from fast_tfds.augment.spec import Augment
from fast_tfds.cache import placement
from fast_tfds.core import aligned, jpeg_blocks, platform
from fast_tfds.core.sizes import as_hw
from fast_tfds.read import persisted, records
from fast_tfds.read.decoding import WINDOW_KEY
from fast_tfds.read.parsing import UNBATCHED_BLOCK, make_parser
from fast_tfds.read.split_reading import Reading

AUTOTUNE = tf.data.AUTOTUNE
FILL, SERVE = 0, 1
# Records per block of the header pass (reference sizes before epoch 1).
_HEADER_BLOCK = 256


# -- what both plans share ----------------------------------------------------------


class EpochCounter:
    """Epoch numbers, 0-based, one per iteration of the dataset."""

    def __init__(self):
        self._lock = threading.Lock()
        self._next = 0

    def begin(self) -> np.int64:
        with self._lock:
            epoch, self._next = self._next, self._next + 1
        return np.int64(epoch)


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


def parsed_blocks(reading: Reading, indexed: tf.data.Dataset, *, shuffle: bool):
    """(indices [b], batch dict with 'image' JPEG bytes [b] and, where a transform names
    one, WINDOW_KEY [b, 4]) blocks of the records, shuffled if asked; the last block
    may be partial."""
    order, block = reading.order, block_size(reading)
    ds = indexed
    if shuffle and order.shuffle:
        ds = ds.shuffle(order.shuffle_buffer, seed=order.seed, reshuffle_each_iteration=True)
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


def _epochs(make_epoch: Callable[[tf.Tensor], tf.data.Dataset], begin: Callable) -> tf.data.Dataset:
    """An epoch per iteration: `begin()` (stateful) before its first batch gives the
    state `make_epoch` builds the epoch from."""

    def start(_):
        return tf.numpy_function(begin, [], tf.int64, stateful=True)

    return tf.data.Dataset.from_tensors(0).map(start).flat_map(make_epoch)


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
        drawn = windows.sample(
            self.augment, self.seed, int(epoch), indices, refs[:, 2], refs[:, 3], size
        )
        jitter = kernels.Jitter(drawn) if drawn.jittered_mask.any() else None
        for i, data in enumerate(jpegs):
            top, left, height, width = drawn.window(i)
            crop = (int(refs[i, 0]) + top, int(refs[i, 1]) + left, height, width)
            try:
                jpeg_blocks.decode_resized_into(data, out[i], lambda _h, _w, crop=crop: crop)
            except (OSError, ValueError) as err:
                raise ValueError(f"example {int(indices[i])}: it does not decode ({err})") from None
            kernels.finish_into(out[i], drawn, i, jitter)
        return out


def stream(reading: Reading) -> tf.data.Dataset:
    """Every epoch: records shuffled ─ blocks parsed ─ cropped decode ─ output."""
    decode = CroppedDecoder(reading.augment, reading.augment_seed, epoch_sizes(reading))
    shape = image_shape(reading)
    counter = EpochCounter()
    drop = reading.batching.drop_remainder and reading.batching.batch_size is not None

    def one_epoch(epoch):
        ds = parsed_blocks(reading, reading.indexed, shuffle=True)
        if drop:
            ds = ds.filter(lambda indices, _: tf.shape(indices)[0] == block_size(reading))

        def run(indices, batch):
            batch = dict(batch)
            boxes = _windows_of(batch)
            images = tf.numpy_function(
                decode, [epoch, indices, batch["image"], boxes], tf.uint8, stateful=False
            )
            batch["image"] = tf.ensure_shape(images, shape)
            return batch

        ds = ds.map(run, num_parallel_calls=AUTOTUNE, deterministic=reading.order.deterministic)
        return _finish(reading, ds, dropped=True)

    return _epochs(one_epoch, counter.begin)


# -- cache=True: pictures decoded once, crops cut from them every epoch ---------------


@dataclasses.dataclass(frozen=True)
class Slots:
    """Cache slot <-> example index for this input pipeline's file instructions (the
    same numbers unless an input_context takes a share of the files)."""

    starts: np.ndarray  # Example index of each instruction's first record.
    firsts: np.ndarray  # Slot of each instruction's first record.
    index: np.ndarray  # [n]: the example index of each slot.

    @classmethod
    def of(cls, reading: Reading) -> Slots:
        takes = np.array([int(fi.take) for fi in reading.instructions], np.int64)
        starts = np.array(reading.offsets, np.int64)
        firsts = np.concatenate([[0], np.cumsum(takes)[:-1]]).astype(np.int64)
        index = np.concatenate(
            [np.arange(s, s + t, dtype=np.int64) for s, t in zip(starts, takes, strict=True)]
        )
        return cls(starts, firsts, index)

    def slots(self, indices) -> np.ndarray:
        indices = np.asarray(indices, np.int64)
        k = np.searchsorted(self.starts, indices, side="right") - 1
        return self.firsts[k] + indices - self.starts[k]


class AugmentCache:
    """The split's pictures at the cache resolution, and their other features (labels,
    filenames), each written once; which epoch fills it and which serves from it."""

    def __init__(
        self,
        pictures: cached.PictureCache,
        slots: Slots,
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
        self._epoch = 0
        self._done = False
        self.key = _register(self)

    @property
    def nbytes(self) -> int:
        """Bytes of the cached pictures (their pixels), allocated once before epoch 1."""
        return self.pictures.nbytes

    def begin(self) -> np.ndarray:
        """[FILL or SERVE, the epoch number (0-based)]."""
        with self._lock:
            epoch, self._epoch = self._epoch, self._epoch + 1
            mode = SERVE if self.pictures.images.filled else FILL
        return np.array([mode, epoch], np.int64)

    def fill(self, epoch, indices, jpegs, boxes, *features) -> np.ndarray:
        """Decodes the block's pictures that are not cached yet into their slots, keeps
        their features, and serves the block's augmented images from the cache."""
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
        return self._serve_into(epoch, slots, indices)

    def serve(self, epoch, slots) -> list[np.ndarray]:
        """[images, *features] of cache slots `slots`, augmented for `epoch`."""
        slots = np.asarray(slots, np.int64)
        images = self._serve_into(epoch, slots, self.slots.index[slots])
        return [images, *(self.features[k][slots] for k in self.keys)]

    def _serve_into(self, epoch, slots, indices) -> np.ndarray:
        out = aligned.empty((len(slots), *self.sizes(int(epoch)), 3))
        return self.pictures.serve_into(
            slots, self.augment, self.seed, int(epoch), indices, out, num_threads=self.num_threads
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
    spec = parsed_blocks(reading, reading.indexed, shuffle=False).element_spec[1]
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


def reference_sizes(reading: Reading, slots: Slots) -> tuple[np.ndarray, np.ndarray]:
    """(heights, widths) per slot of the pictures windows are drawn in: the stored
    size when the dataset's is fixed, else one pass over the JPEG headers (and the
    hook's windows); nothing is decoded."""
    n = len(slots.index)
    stored = reading.features["image"].shape[:2]
    if reading.parse_batch is not None and None not in stored:
        return np.full(n, stored[0], np.int64), np.full(n, stored[1], np.int64)
    indexed = records.read_indexed_records(
        reading.instructions, reading.offsets, shuffle=False, seed=None, deterministic=True
    )
    if reading.parse_batch is not None:
        image_only = {"image": tf.io.FixedLenFeature([], tf.string)}
        ds = indexed.batch(_HEADER_BLOCK).map(
            lambda i, s: (i, tf.io.parse_example(s, image_only)["image"], tf.zeros([0, 0]))
        )
    else:
        ds = parsed_blocks(reading, indexed, shuffle=False).map(
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
    slots = Slots.of(reading)
    n = len(slots.index)
    shorter_side = None  # The whole picture at the output size: no reference size needed.
    if augment.crop is not None:
        shorter_side = reading.cache_shorter_side or ragged.default_shorter_side(size)

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
                reading.augment_seed,
                stored.filling,
                epoch_sizes(reading),
                kept=stored.features,
            )
    heights, widths = sizes()
    cache_h, cache_w = (
        (heights, widths)
        if shorter_side is None
        else ragged.cache_size(heights, widths, shorter_side)
    )
    need = int(np.sum(np.asarray(cache_h, np.int64) * cache_w * 3))
    allocate = placement.allocator(
        need,
        what=f"{reading.builder.info.full_name} {reading.split} (augment cache)",
        cache_budget=reading.cache.budget,
        cache_dir=reading.cache.folder,
    )
    pictures = cached.PictureCache(heights, widths, size, shorter_side, allocate)
    return AugmentCache(
        pictures,
        slots,
        features,
        augment,
        reading.augment_seed,
        allocate,
        epoch_sizes(reading),
    )


def cached_batches(reading: Reading) -> tf.data.Dataset:
    """Epoch 1 (and any epoch after one that stopped early) fills the cache as it
    serves; later epochs are served from it alone."""
    cache = make_cache(reading)
    key, keys = cache.key, cache.keys
    specs = cache.specs
    shape = image_shape(reading)
    n, block = len(cache.slots.index), block_size(reading)
    seed = reading.augment_seed

    def begin():
        return _live[key].begin()

    def fill_epoch(epoch):
        ds = parsed_blocks(reading, reading.indexed, shuffle=True)

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
            return batch

        ds = ds.map(run, num_parallel_calls=AUTOTUNE, deterministic=reading.order.deterministic)
        # Every example is written, also those of a last partial batch that
        # drop_remainder leaves out of this epoch's output.
        return _finish(reading, ds, dropped=False)

    def serve_epoch(epoch):
        order = tf.range(n, dtype=tf.int64)
        if reading.order.shuffle:
            order = tf.random.experimental.stateless_shuffle(
                order, seed=tf.stack([tf.constant(seed, tf.int64), epoch])
            )
        drop = reading.batching.drop_remainder and reading.batching.batch_size is not None
        count = n // block if drop else -(-n // block)

        def gather(i):
            rows = order[i * block : (i + 1) * block]
            served = tf.numpy_function(
                lambda epoch, rows: _live[key].serve(epoch, rows),
                [epoch, rows],
                [tf.uint8, *(specs[k].dtype for k in keys)],
                stateful=True,
            )
            batch = {"image": tf.ensure_shape(served[0], shape)}
            for k, values in zip(keys, served[1:], strict=True):
                batch[k] = tf.ensure_shape(values, [None, *specs[k].shape])
            return batch

        ds = tf.data.Dataset.range(count).map(
            gather, num_parallel_calls=AUTOTUNE, deterministic=reading.order.deterministic
        )
        return _finish(reading, ds, dropped=True)

    def one_epoch(state):
        mode, epoch = state[0], state[1]
        # take(0) gets an empty iterator: the branch not taken is never set up, so a
        # served epoch starts without opening the shard files.
        fill_count = tf.where(mode == FILL, tf.constant(-1, tf.int64), 0)
        serve_count = tf.where(mode == SERVE, tf.constant(-1, tf.int64), 0)
        return fill_epoch(epoch).take(fill_count).concatenate(serve_epoch(epoch).take(serve_count))

    def start(_):
        return tf.ensure_shape(tf.numpy_function(begin, [], tf.int64, stateful=True), [2])

    ds = tf.data.Dataset.from_tensors(0).map(start).flat_map(one_epoch)
    # Datasets made from this one keep it, and so the cache, alive.
    ds._fast_tfds_augment_cache = cache
    return ds
