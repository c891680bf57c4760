"""The in-memory cache of `read_split(cache=True)`: one arena per split, a global shuffle.

A split's size, and (for fixed-size output) each image's shape, are known
before reading, so the cache is laid out up front instead of growing one
allocation per image as `Dataset.cache()` does:

- **Epoch 1** decodes in parallel and yields its batches, and each batch lands
  in one preallocated arena per feature (`[N, H, W, 3]` uint8 for the images),
  at the batch's own position. Where the stored JPEGs already have the output
  size (config '224'), they are decoded straight into their arena rows
  (`jpeg_blocks`), with no per-image tensor and no copy; otherwise decoded
  batches are copied in. The arena is one anonymous mapping per feature,
  reserved when the dataset is made and backed by memory only as epoch 1
  writes it; it is released with the dataset.
- **Later epochs** draw batches by a permutation of the whole split, new every
  epoch (a true global shuffle, reproducible with a seed), and gather them from
  the arena. Nothing is decoded again, and TensorFlow reads the arena in place
  (a numpy_function's aligned output is aliased, not copied).

An epoch stopped early leaves the arena incomplete; the next epoch decodes
again and refills it. Output whose elements vary in size (`image_size=None` on
the `original` config, boxes, strings) cannot live in an arena: the reader
keeps TensorFlow's per-example `cache()` for it (see `supports`).
"""

from __future__ import annotations

import ctypes
import mmap
import random
import sys
import threading
import weakref
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from fast_tfds.core import jpeg_blocks
from fast_tfds.read.decode import BatchParser
from fast_tfds.read.records import batches_per_epoch

AUTOTUNE = tf.data.AUTOTUNE
# Examples per block (a write into the arena, a decode call) when the reader
# does not batch (batch_size=None).
UNBATCHED_BLOCK = 64
_FILL, _SERVE = 0, 1
# TensorFlow keeps every function given to tf.numpy_function for the life of the
# process, so those functions reach an arena only through this weak registry;
# the dataset that uses an arena holds it (see `cached_batches`), and the arena
# and its memory go when the dataset goes.
_live_arenas: weakref.WeakValueDictionary[int, Arena] = weakref.WeakValueDictionary()


def bytes_held() -> int:
    """Bytes of the arenas alive in this process (what their datasets hold)."""
    return sum(arena.nbytes for arena in list(_live_arenas.values()))


def _begin(key: int) -> np.ndarray:
    return _live_arenas[key].begin()


def _array(key: int, feature: bytes) -> np.ndarray:
    return _live_arenas[key].arrays[feature.decode()]


def _write(key: int, shapes: dict, generation, position, *columns) -> list[np.ndarray]:
    arena = _live_arenas.get(key)
    if arena is not None:
        return arena.write(generation, position, *columns)
    # The dataset, and so its arena, is gone while an iterator still runs: decode only.
    columns = dict(zip(sorted(shapes), columns, strict=True))
    return [
        np.int64(0),
        *(jpeg_blocks.decode_jpeg_block(columns[k], s) for k, s in shapes.items() if s),
    ]


def supports(element_spec) -> bool:
    """Whether examples of this spec fit an arena: a flat dict of fixed-shape numbers."""
    return isinstance(element_spec, dict) and all(
        isinstance(spec, tf.TensorSpec)
        and spec.shape.is_fully_defined()
        and (spec.dtype.is_integer or spec.dtype.is_floating or spec.dtype.is_bool)
        for spec in element_spec.values()
    )


class Arena:
    """One preallocated array per feature for `num_examples` examples, and its state.

    `begin()` is called once per epoch (in the dataset graph) and says whether
    the epoch fills the arena or serves from it; `write()` puts a batch in.
    `encoded` names the features that arrive as JPEG bytes and are decoded
    into their rows.
    """

    def __init__(
        self,
        num_examples: int,
        element_spec: dict[str, tf.TensorSpec],
        encoded: frozenset[str] = frozenset(),
    ):
        self.num_examples = num_examples
        self.keys = sorted(element_spec)
        self.specs = {k: element_spec[k] for k in self.keys}
        self.encoded = [k for k in self.keys if k in encoded]
        # Per feature, the decoded shape of the JPEG-encoded ones, None for the others.
        self.shapes = {
            k: tuple(self.specs[k].shape.as_list()) if k in self.encoded else None
            for k in self.keys
        }
        self.arrays = self._allocate()
        self.nbytes = sum(a.nbytes for a in self.arrays.values())
        self._lock = threading.Lock()
        self._filled = False
        self._generation = 0  # Which fill pass may write; an abandoned one may not.
        self._written = 0
        self._epoch = 0
        self.key = id(self)
        _live_arenas[self.key] = self

    def begin(self) -> np.ndarray:
        """[what this epoch does (_FILL or _SERVE), fill generation, epoch number]."""
        with self._lock:
            self._epoch += 1
            if not self._filled:
                self._generation += 1
                self._written = 0
                if self._generation > 1:
                    # Batches of the stopped fill may still be held, sharing its
                    # rows (uint8 output is not copied): refill new memory.
                    self.arrays = self._allocate()
            mode = _SERVE if self._filled else _FILL
            return np.array([mode, self._generation, self._epoch], np.int64)

    def write(self, generation, position, *columns) -> list[np.ndarray]:
        """Puts one batch of examples into rows position..position+len, decoding
        the encoded features there; returns [0, *the decoded features]."""
        start, n = int(position), len(columns[0])
        with self._lock:
            live = int(generation) == self._generation and not self._filled
            arrays = self.arrays
        decoded = []
        for key, column in zip(self.keys, columns, strict=True):
            rows = arrays[key][start : start + n]
            if live:
                _prefault(rows)
            if key in self.encoded and live:
                decoded.append(jpeg_blocks.decode_jpeg_block_into(column, rows))
            elif key in self.encoded:  # An abandoned fill still decodes its batch.
                decoded.append(jpeg_blocks.decode_jpeg_block(column, self.shapes[key]))
            elif live:
                rows[...] = column
        if live:
            with self._lock:
                if int(generation) == self._generation:
                    self._written += n
                    self._filled = self._written == self.num_examples
        return [np.int64(0), *decoded]

    def write_in_graph(self, generation, position, batch: dict) -> tuple[tf.Tensor, dict]:
        """In a dataset function: `write(generation, position, *batch)` as a
        numpy_function; returns a tensor to depend on and the decoded features."""
        key, shapes = self.key, self.shapes  # Not self: TensorFlow keeps the callable.
        done, *decoded = tf.numpy_function(
            lambda *args: _write(key, shapes, *args),
            [generation, position, *(batch[k] for k in self.keys)],
            [tf.int64, *(self.specs[k].dtype for k in self.encoded)],
            stateful=True,
        )
        shaped = {
            k: tf.ensure_shape(images, [None, *self.specs[k].shape])
            for k, images in zip(self.encoded, decoded, strict=True)
        }
        return done, shaped

    def _allocate(self) -> dict[str, np.ndarray]:
        return {k: _allocate(self.num_examples, self.specs[k]) for k in self.keys}


def _madvise() -> Callable[[int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        madvise = ctypes.CDLL(None).madvise  # A refusal is ignored: see _prefault.
    except (OSError, AttributeError):
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return madvise


_MADVISE = _madvise()
_MADV_POPULATE_WRITE = 23  # Linux >= 5.14; older kernels answer EINVAL.


def _prefault(rows: np.ndarray) -> None:
    """Backs the pages of `rows` with memory in one system call, right before the
    block is written there (by the thread that writes it, the GIL released).

    Each new 4 KiB page of the arena is otherwise a page fault of its own when the
    decoder first writes it (36.75 per 224 image). One MADV_POPULATE_WRITE per block
    does the same work without a trap per page: in fresh processes on the 2-core VM,
    8 alternated runs each, the uint8 fill used ~11% less CPU (user+sys 3.8 s against
    4.3 s for 15,016 images) and ran at 7,168 against 6,594 images/s (medians).
    The same call from a background thread ahead of the decoder was slower: it
    competed with the decoding for the cores. Where the call is unavailable, the
    writes fault the pages in as before.
    """
    if _MADVISE is None or rows.nbytes == 0:
        return
    start = rows.ctypes.data
    aligned = start - start % mmap.PAGESIZE
    _MADVISE(aligned, start + rows.nbytes - aligned, _MADV_POPULATE_WRITE)


def _allocate(num_examples: int, spec: tf.TensorSpec) -> np.ndarray:
    """An [num_examples, *shape] array over an anonymous mapping of its own.

    Address space only: no memory is used until the first epoch writes it, and
    the mapping is unmapped when the array (and every tensor that shares it) goes.
    Transparent huge pages (`MADV_HUGEPAGE`) were measured on the 2-core VM: one
    fault per 2 MiB instead of per 4 KiB, but 1.5-2x the system time (each arena
    then got memory the host had to back anew), so epoch 1 was slower; not used.
    """
    shape = (num_examples, *spec.shape.as_list())
    dtype = np.dtype(spec.dtype.as_numpy_dtype)
    count = int(np.prod(shape))
    region = mmap.mmap(
        -1, max(count * dtype.itemsize, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    )
    return np.frombuffer(region, dtype, count=count).reshape(shape)


def cached_batches(
    examples: tf.data.Dataset,
    num_examples: int,
    *,
    batch_size: int | None,
    drop_remainder: bool,
    shuffle: bool,
    shuffle_buffer: int,
    seed: int | None,
    deterministic: bool,
    output_fn: Callable,
    parse_batch: BatchParser | None = None,
    encoded: dict[str, tf.TensorSpec] | None = None,
) -> tuple[tf.data.Dataset, Arena]:
    """One epoch of `output_fn(batch)`s: decoded (and cached) or served from the arena.

    `examples` are example dicts, or with `parse_batch` serialized records that
    it parses a block at a time. `encoded` gives the decoded spec of features
    that arrive as JPEG bytes ({'image': [224, 224, 3] uint8}): they are decoded
    into the arena. Iterating the returned dataset again gives the next epoch.
    """
    parsed = examples.element_spec if parse_batch is None else parse_batch.example_spec
    spec = {**parsed, **(encoded or {})}
    arena = Arena(num_examples, spec, frozenset(encoded or ()))
    key = arena.key
    block = batch_size or UNBATCHED_BLOCK
    # Without a seed each dataset still gets its own permutations.
    base_seed = seed if seed is not None else random.SystemRandom().randrange(2**31)

    def begin(_):
        state = tf.numpy_function(lambda: _begin(key), [], tf.int64, stateful=True)
        return tf.ensure_shape(state, [3])

    def write(generation):
        def store(position, batch):
            if parse_batch is not None:
                batch = parse_batch(batch)
            done, decoded = arena.write_in_graph(generation, position * block, batch)
            with tf.control_dependencies([done]):
                batch = {k: tf.identity(v) for k, v in {**batch, **decoded}.items()}
            return batch if batch_size is None else output_fn(batch)

        return store

    def fill(generation) -> tf.data.Dataset:
        ds = examples
        if shuffle:
            ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
        # Every example is written, also those of a last partial batch that
        # drop_remainder leaves out of this epoch's output.
        ds = ds.batch(block, num_parallel_calls=AUTOTUNE, deterministic=deterministic)
        ds = ds.enumerate().map(
            write(generation), num_parallel_calls=AUTOTUNE, deterministic=deterministic
        )
        if batch_size is None:
            return ds.unbatch().map(output_fn)
        if drop_remainder:
            ds = ds.filter(lambda *batch: tf.shape(tf.nest.flatten(batch)[0])[0] == batch_size)
            ds = ds.map(_with_batch_dim(batch_size))
        return ds

    def serve(epoch) -> tf.data.Dataset:
        # The arena reaches the graph through a numpy_function, once per served
        # epoch: TensorFlow aliases the (page-aligned) array without a copy. A
        # tensor captured into the dataset graph instead would be read whole
        # when the first iterator is made (1.1 s for 2.2 GB, inside epoch 1).
        arrays = {
            k: tf.ensure_shape(
                tf.numpy_function(
                    lambda feature: _array(key, feature), [k], spec.dtype, stateful=True
                ),
                [num_examples, *spec.shape],
            )
            for k, spec in arena.specs.items()
        }
        order = tf.range(num_examples, dtype=tf.int64)
        if shuffle:
            order = tf.random.experimental.stateless_shuffle(
                order, seed=tf.stack([tf.constant(base_seed, tf.int64), epoch])
            )
        if batch_size is None:
            gather_one = _gather_one(arrays)
            return tf.data.Dataset.from_tensor_slices(order).map(
                lambda row: output_fn(gather_one(row))
            )
        count = batches_per_epoch(num_examples, batch_size, drop_remainder)
        gather = _gather_batch(arrays, order, batch_size)
        ds = tf.data.Dataset.range(count).map(
            lambda i: output_fn(gather(i)),
            num_parallel_calls=AUTOTUNE,
            deterministic=deterministic,
        )
        return ds.map(_with_batch_dim(batch_size)) if drop_remainder else ds

    def epoch(state):
        mode, generation, number = state[0], state[1], state[2]
        # take(0) gets an empty iterator: the branch not taken is never set up,
        # so a served epoch starts without opening the shard files.
        fill_count = tf.where(mode == _FILL, tf.constant(-1, tf.int64), 0)
        serve_count = tf.where(mode == _SERVE, tf.constant(-1, tf.int64), 0)
        return fill(generation).take(fill_count).concatenate(serve(number).take(serve_count))

    # output_fn (the float conversion) runs in the same function as the write or
    # the gather: one pipeline stage less per batch. In fresh processes on 2 cores
    # (medians of runs alternated with a separate stage) served epochs ran 22.9k
    # against 20.6k images/s (float32) and 70k against 54k (uint8); the fill showed
    # no difference beyond the noise (float32 5.9k against 5.5k, then 5.15k against
    # 5.09k).
    ds = tf.data.Dataset.from_tensors(0).map(begin).flat_map(epoch)
    # Datasets made from this one keep it, and so the arena, alive.
    ds._fast_tfds_arena = arena
    return ds, arena


def _gather_batch(tensors: dict[str, tf.Tensor], order: tf.Tensor, batch_size: int):
    def gather(i):
        rows = order[i * batch_size : (i + 1) * batch_size]
        return {k: tf.gather(t, rows) for k, t in tensors.items()}

    return gather


def _with_batch_dim(batch_size: int):
    """Sets the static batch size that drop_remainder guarantees (as `batch` does)."""

    def ensure(*batch):
        batch = batch[0] if len(batch) == 1 else batch
        return tf.nest.map_structure(
            lambda v: tf.ensure_shape(v, [batch_size, *v.shape[1:]]), batch
        )

    return ensure


def _gather_one(tensors: dict[str, tf.Tensor]):
    def gather(row):
        return {k: t[row] for k, t in tensors.items()}

    return gather
