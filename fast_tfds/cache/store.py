"""The picture store's state, one class for both back ends: which example sits at which
slot, its picture (`pictures.PictureCache`) and its kept features (labels, filenames,
targets), which slots are written, and what an epoch does with it.

The tf.data reader (`fast_tfds.read.cached`) and the Grain loader
(`fast_tfds.loader.cached`) each wire a `Store` in; neither keeps fill state of its own.
A slot's features are written before its picture, and a slot counts as written once its
picture is (`PictureCache.fill` marks it), so a reader that sees a written slot also
sees its features. Once every slot is written the store tells `filling` (once): a
persistent file is then written out, rows on disk written back.

TensorFlow keeps every function given to `tf.numpy_function` for good, so those
functions reach a cache (an arena, or the tf.data reader's wiring of a store) by its
key, through the weak registry here; the dataset that uses a cache holds it, and the
cache and its memory go with the dataset.
Nothing here imports TensorFlow.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from fast_tfds.cache.memory import IN_MEMORY, Backing
from fast_tfds.cache.pictures import PictureCache, cache_bytes

if TYPE_CHECKING:
    from fast_tfds.core.dataset_hooks import Window

# What an epoch does, as `Store.begin` (and `Arena.begin`) tell the dataset graph: fill
# while streaming the epoch's output, serve from what is filled, or fill first without
# output and then serve (an epoch whose order is a permutation, in a resumed run).
FILL, SERVE, FILL_THEN_SERVE = 0, 1, 2
# The store's columns besides its features: the pictures' bytes, and per slot the size
# windows are drawn in (a persistent file keeps them under these names).
PICTURES, HEIGHTS, WIDTHS = "pictures", "reference_heights", "reference_widths"


class Store:
    """A split's (or a shard's) decoded pictures and kept features, by slot.

    Args:
      reference_heights, reference_widths, output_size, shorter_side: the pictures'
        layout (see `pictures.PictureCache`).
      features: {name: (shape, dtype)} of the features kept per slot (numbers, or
        objects for values of any kind).
      slot_of: example indices -> their slots (int64 arrays); slot s holds one example.
      backing: where the columns live (memory, rows on disk, a persistent file), told
        once every picture is written.
      filled: the backing's columns are all written already (a complete persistent
        file): served from the start.
    """

    def __init__(
        self,
        reference_heights,
        reference_widths,
        output_size: tuple[int, int],
        shorter_side: int | None,
        features: dict[str, tuple],
        slot_of: Callable[[np.ndarray], np.ndarray],
        backing: Backing = IN_MEMORY,
        *,
        filled: bool = False,
    ):
        heights = np.asarray(reference_heights, np.int64).reshape(-1)
        widths = np.asarray(reference_widths, np.int64).reshape(-1)
        n = len(heights)
        nbytes = cache_bytes(heights, widths, output_size, shorter_side)
        wanted = {
            PICTURES: ((nbytes,), np.dtype(np.uint8)),
            HEIGHTS: ((n,), np.dtype(np.int64)),
            WIDTHS: ((n,), np.dtype(np.int64)),
            **{k: ((n, *shape), np.dtype(dtype)) for k, (shape, dtype) in features.items()},
        }
        self.backing = backing
        self.arrays = backing.columns(wanted)
        if not filled:
            self.arrays[HEIGHTS][...] = heights
            self.arrays[WIDTHS][...] = widths
        self.pictures = PictureCache(
            heights, widths, output_size, shorter_side, self.arrays[PICTURES], written=filled
        )
        # Looked up on each use: a persistent file moves the columns to its mapping.
        self.features = {k: self.arrays[k] for k in features}
        self._slot_of = slot_of
        self._lock = threading.Lock()
        self._told = False
        # How another process opens the same store (`Store.__reduce__`): set only for a
        # complete persistent file, which a worker process maps again.
        self.reopen: tuple[Callable, tuple] | None = None

    def __len__(self) -> int:
        return len(self.pictures)

    def __reduce__(self):
        if self.reopen is None:
            raise TypeError(
                "this picture store lives in its process: only a complete persistent file "
                "(persist=True) can be opened by worker processes"
            )
        return self.reopen

    @property
    def nbytes(self) -> int:
        """Bytes of the columns (pixels, reference sizes, features), allocated once
        before the first fill (objects aside: they live in the heap)."""
        return sum(a.nbytes for a in self.arrays.values() if not a.dtype.hasobject)

    @property
    def filled(self) -> bool:
        return self.pictures.images.filled

    def slots(self, indices) -> np.ndarray:
        return np.asarray(self._slot_of(np.asarray(indices, np.int64)), np.int64)

    def has(self, index: int) -> bool:
        """Whether example `index`'s picture (and so its features) is written. (Asked for
        every record the loader reads: one scalar through `slot_of`, not an array.)"""
        return bool(self.pictures.images.written[int(self._slot_of(np.int64(index)))])

    def begin(self, streamed: bool) -> np.int64:
        """What this epoch does: SERVE once filled; else FILL when the epoch's order is
        the order its records stream in (`streamed`: a fill serves it as it goes), or
        FILL_THEN_SERVE for a permutation."""
        if self.filled:
            return np.int64(SERVE)
        return np.int64(FILL if streamed else FILL_THEN_SERVE)

    def put(self, slot: int, jpeg: bytes, window: Window | None, values: Mapping[str, Any]) -> bool:
        """Writes slot `slot`, unless it is written: `values` into its features, then
        `jpeg` (cut to `window`) decoded into its picture. Returns whether it wrote."""
        slot = int(slot)
        if self.pictures.images.written[slot]:
            return False
        features = self.features
        for name, value in values.items():
            features[name][slot] = value
        self.pictures.fill(slot, jpeg, window)
        return True

    @property
    def reads_ahead(self) -> bool:
        """Whether the pictures are on disk, and so worth asking for ahead."""
        return self.backing.reads_ahead

    def read_ahead(self, slots) -> None:
        """Asks for the pictures of `slots` from disk, ahead of serving them."""
        if not self.reads_ahead:
            return
        slots = np.asarray(slots, np.int64)
        layout = self.pictures.images.layout
        lengths = layout.heights[slots] * layout.widths[slots] * 3
        self.backing.read_ahead(self.pictures.images.buffer, layout.offsets[slots], lengths)

    def rows_of(self, name: str, slots) -> np.ndarray:
        """Feature `name` of `slots` (a copy)."""
        return self.features[name][np.asarray(slots, np.int64)]

    def when_filled(self) -> None:
        """Once every picture is written, tells the backing (once)."""
        if not self.filled:
            return
        with self._lock:
            told, self._told = self._told, True
        if not told:
            self.backing.filled(self.arrays, self._replace)

    def _replace(self, old: dict[str, np.ndarray], new: dict[str, np.ndarray]) -> bool:
        """Serves `new` (the same columns from the persistent file's mapping) instead of
        `old`, if those are still the store's."""
        if old is not self.arrays:
            return False
        # Each swap is one reference, atomic for the threads that serve meanwhile.
        self.pictures.images.buffer = new[PICTURES]
        for name in self.features:
            self.features[name] = new[name]
        self.arrays = new  # The filled memory goes with its last batch.
        return True


# -- the registry ------------------------------------------------------------------

_live: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()


def register(cache: Any) -> int:
    """A key for `cache` (anything with `nbytes`: an `arena.Arena`, a reader's store)
    that functions kept by TensorFlow can hold without keeping the cache alive."""
    _live[id(cache)] = cache
    return id(cache)


def live(key: int) -> Any:
    """The cache of `key` (KeyError once its dataset is gone)."""
    return _live[key]


def find(key: int) -> Any:
    """The cache of `key`, or None once its dataset is gone."""
    return _live.get(key)


def live_caches() -> list[Any]:
    """The caches (stores and arenas) whose datasets are alive in this process."""
    return list(_live.values())


def bytes_held() -> int:
    """Bytes reserved by the caches alive in this process (what their datasets hold)."""
    return sum(cache.nbytes for cache in live_caches())
