"""The slot table, one class for every cache of both back ends: columns indexed by slot
(fixed-shape features, and optionally each example's decoded picture), which slots are
written, and what an epoch does with them.

The picture store (a plain or augmented read of either back end, opened the same way for
both by `open_store`) is a table with a
picture column (`pictures.PictureCache`) and the features it keeps beside it (labels,
filenames, targets); the tf.data reader's arena of examples (examples a transform or the
tf.data service decoded) is a table of fixed columns only. The tf.data reader
(`fast_tfds.read.cached`) and the Grain loader (`fast_tfds.loader.cached`) wire a table
in; neither keeps fill state of its own.

One refill rule: a slot counts as written once all of it is (a picture's slot once its
picture is, after its features: a reader that sees a written slot also sees its
features), and stays written. A fill that stops half-way (an iterator dropped in epoch
1) leaves its written slots served, and the next epoch fills the rest. Once every slot
is written the table tells its backing (once): a persistent file is then written out,
rows on disk written back.

TensorFlow keeps every function given to `tf.numpy_function` for good, so those
functions reach a cache (the tf.data reader's wiring of a table) by its key, through the
weak registry here; the dataset that uses a cache holds it, and the cache and its memory
go with the dataset.
Nothing here imports TensorFlow.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fast_tfds.cache import persisted, placement
from fast_tfds.cache.memory import IN_MEMORY, Backing, prefault, read_ahead_spans
from fast_tfds.cache.pictures import (
    FEATURE,
    HEIGHTS,
    PICTURES,
    WIDTHS,
    PictureCache,
    PictureSizes,
)

if TYPE_CHECKING:
    from fast_tfds.core.dataset_hooks import Window

# What an epoch does, as `Store.begin` tells the dataset graph: fill while streaming
# the epoch's output, serve from what is filled, or fill first without output and then
# serve (an epoch whose order is a permutation, in a resumed run).
FILL, SERVE, FILL_THEN_SERVE = 0, 1, 2


class Store:
    """A split's (or a shard's) examples by slot: fixed-shape features, and optionally
    their decoded pictures.

    Args:
      num_slots: the slots; slot s holds one example.
      features: {name: (shape, dtype)} of one slot's value of each fixed column
        (numbers, or objects for values of any kind, which stay in memory).
      slot_of: example indices -> their slots (int64 arrays); None: the slot is the index.
      backing: where the columns live (memory, rows on disk, a persistent file), told
        once every slot is written.
      pictures: the picture column's layout, or None for a table of fixed columns.
      filled: the backing's columns are all written already (a complete persistent
        file): served from the start.

    Its columns (`arrays`: what the backing gives) are named as a persistent file keeps
    them: each feature's FEATURE + its name, and the picture column's (`pictures`).
    """

    def __init__(
        self,
        num_slots: int,
        features: dict[str, tuple],
        slot_of: Callable[[np.ndarray], np.ndarray] | None = None,
        backing: Backing = IN_MEMORY,
        *,
        pictures: PictureSizes | None = None,
        filled: bool = False,
    ):
        wanted = {
            FEATURE + k: ((num_slots, *shape), np.dtype(dtype))
            for k, (shape, dtype) in features.items()
        }
        if pictures is not None:  # The pictures' bytes, and their reference sizes.
            wanted[PICTURES] = ((pictures.nbytes,), np.dtype(np.uint8))
            wanted[HEIGHTS] = wanted[WIDTHS] = ((num_slots,), np.dtype(np.int64))
        self.backing = backing
        self.arrays = backing.columns(wanted)
        # The one written-bitmap, a flag per slot: setting a flag needs no lock (a slot
        # only ever turns written), and whether all are is asked of the flags themselves.
        self.written = np.full(num_slots, filled, bool)
        self._filled = filled
        self.pictures: PictureCache | None = None
        if pictures is not None:
            if not filled:
                self.arrays[HEIGHTS][...] = pictures.reference_heights
                self.arrays[WIDTHS][...] = pictures.reference_widths
            self.pictures = PictureCache(*pictures, self.arrays[PICTURES], written=self.written)
        self.keys = sorted(features)
        # Looked up on each use: a persistent file moves the columns to its mapping.
        self.features = {k: self.arrays[FEATURE + k] for k in self.keys}
        self.nbytes = sum(a.nbytes for a in self.arrays.values() if not a.dtype.hasobject)
        self._slot_of = slot_of
        self._lock = threading.Lock()
        self._told = False
        # How another process opens the same store (`Store.__reduce__`): set only for a
        # complete persistent file, which a worker process maps again.
        self.reopen: tuple[Callable, tuple] | None = None

    def __reduce__(self):
        if self.reopen is None:
            raise TypeError(
                "this picture store lives in its process: only a complete persistent file "
                "(persist=True) can be opened by worker processes"
            )
        return self.reopen

    @property
    def filled(self) -> bool:
        # The flags are scanned until every one is set, then never again: a slot stays
        # written.
        self._filled = self._filled or bool(self.written.all())
        return self._filled

    def has(self, index: int) -> bool:
        """Whether example `index` is written. (Asked for every record the loader reads:
        one scalar through `slot_of`, not an array.)"""
        slot = index if self._slot_of is None else self._slot_of(np.int64(index))
        return bool(self.written[int(slot)])

    def begin(self, streamed: bool) -> np.int64:
        """What this epoch does: SERVE once filled; else FILL when the epoch's order is
        the order its records stream in (`streamed`: a fill serves it as it goes), or
        FILL_THEN_SERVE for a permutation."""
        if self.filled:
            return np.int64(SERVE)
        return np.int64(FILL if streamed else FILL_THEN_SERVE)

    def put_many(
        self,
        indices,
        jpegs: Sequence[bytes | None],
        windows: Sequence[Window | None],
        values: Mapping[str, Sequence[Any]],
        undecodable: Callable[[int, Exception], Exception],
    ) -> np.ndarray:
        """Writes examples `indices` of a picture table that are not written yet (the one
        fill loop of both back ends): each one's `values` (one sequence per feature)
        into its features, then its `jpegs` (cut to its `windows`) decoded into its
        picture; a JPEG of None (a record not read: its slot was written) is passed
        over. Returns their slots. A JPEG that does not decode raises
        `undecodable(index, error)` (the readers' one line that names the example)."""
        indices = np.asarray(indices, np.int64)
        slots = indices if self._slot_of is None else np.asarray(self._slot_of(indices), np.int64)
        features = self.features
        written = self.written
        for i, slot in enumerate(slots.tolist()):
            if jpegs[i] is None or written[slot]:
                continue
            for name, column in values.items():
                features[name][slot] = column[i]
            try:
                self.pictures.fill(slot, jpegs[i], windows[i])
            except (OSError, ValueError) as err:
                raise undecodable(indices[i], err) from None
        self.when_filled()
        return slots

    def write(self, slots, *columns) -> None:
        """Writes one block of examples of a table of fixed columns (one array per
        feature, in `keys` order) at `slots`, and marks them written."""
        slots = np.asarray(slots, np.int64)
        n = len(slots)
        # Consecutive slots (an unshuffled fill) are one slice, written in place, its
        # pages backed first in one system call (`memory.prefault`).
        start = int(slots[0]) if n else 0
        run = n == 0 or bool(np.array_equal(slots, np.arange(start, start + n)))
        where = slice(start, start + n) if run else slots
        for key, column in zip(self.keys, columns, strict=True):
            if run:
                prefault(self.features[key][where])
            self.features[key][where] = column
        self.written[slots] = True
        self.when_filled()

    def read_ahead(self, slots) -> None:
        """Asks for what `slots` serve (their pictures, else their rows) from disk, ahead
        of serving them: only of columns on disk (the backing `reads_ahead`)."""
        if not self.backing.reads_ahead or not self.filled:
            return
        slots = np.asarray(slots, np.int64).ravel()
        if self.pictures is not None:
            pictures = self.pictures
            lengths = pictures.heights[slots] * pictures.widths[slots] * 3
            read_ahead_spans(pictures.buffer, pictures.offsets[slots], lengths)
            return
        for array in self.features.values():
            read_ahead_spans(array, slots * array.strides[0], array.strides[0])

    def column(self, name: str) -> np.ndarray:
        """The whole column `name` (a view): a feature, or of a picture table whose
        pictures are all the output size, "image": the pictures as fixed rows."""
        if self.pictures is not None and name == "image":
            return self.pictures.rows()
        return self.features[name]

    def when_filled(self) -> None:
        """Once every slot is written, tells the backing (once)."""
        if not self.filled:
            return
        with self._lock:
            told, self._told = self._told, True
        if not told:
            self.backing.filled(self.arrays, self._replace)

    def _replace(self, old: dict[str, np.ndarray], new: dict[str, np.ndarray]) -> bool:
        """Serves `new` (the same columns from the persistent file's mapping) instead of
        `old`, if those are still the table's."""
        if old is not self.arrays:
            return False
        # Each swap is one reference, atomic for the threads that serve meanwhile.
        if self.pictures is not None:
            self.pictures.buffer = new[PICTURES]
        for name in self.features:
            self.features[name] = new[FEATURE + name]
        self.arrays = new  # The filled memory goes with its last batch.
        return True


# -- opening a picture store, the same for both back ends ---------------------------


def open_store(
    slot_examples,
    slot_of: Callable[[np.ndarray], np.ndarray],
    *,
    output_size: tuple[int, int],
    shorter_side: int | None,
    features: dict[str, tuple],
    stored_size: tuple[int, int] | None,
    header_sizes: Callable[[], tuple[np.ndarray, np.ndarray]],
    origin: persisted.Origin | None,
    folder: str | os.PathLike | None,
    budget: int | None,
    what: str,
) -> Store:
    """The store of the examples `slot_examples` (slot s holds example slot_examples[s];
    `slot_of` maps example indices to slots), laid out and allocated before its fill.

    Its reference sizes: the output size without a crop, the dataset's fixed stored size,
    else a pass over the JPEG headers that the back end reads. Its columns: its persistent
    file with persist=True (served, or a new one to fill), else memory, or rows on disk
    over the budget.

    `features`: {name: (shape, dtype)} kept per slot. `stored_size`: every picture's
    reference size when the dataset's is fixed, else None; `header_sizes()` then gives
    them per slot (read only when needed). `origin`: persist=True, else None.
    """
    n = len(np.asarray(slot_examples).reshape(-1))

    def sizes():
        # Without a crop the cache holds the output itself: windows are whole.
        fixed = output_size if shorter_side is None else stored_size
        if fixed is None:
            return header_sizes()  # Sizes vary (or a hook's window cuts each).
        return np.full(n, fixed[0]), np.full(n, fixed[1])

    if origin is not None:
        opened, _ = persisted.open_file(
            origin,
            slot_examples,
            output_size=output_size,
            shorter_side=shorter_side,
            features=features,
            sizes=sizes,
            folder=folder,
            budget=budget,
            what=what,
        )
        if opened is not None:
            return file_store(opened, features, slot_of)
    pictures = PictureSizes(*sizes(), output_size, shorter_side)
    backing = placement.allocator(pictures.nbytes, what=what, cache_budget=budget, cache_dir=folder)
    return Store(n, features, slot_of, backing, pictures=pictures)


def file_store(
    opened: persisted.Stored,
    features: dict[str, tuple],
    slot_of: Callable[[np.ndarray], np.ndarray],
) -> Store:
    """The picture store over a persistent file's columns (`persisted.open_file`):
    served if the file is complete, else filled."""
    n = len(opened.pictures.reference_heights)
    return Store(
        n, features, slot_of, opened.backing, pictures=opened.pictures, filled=opened.filled
    )


# -- the registry ------------------------------------------------------------------


_live: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()


def register(cache: Any) -> int:
    """A key for `cache` (anything with `nbytes`: a `Store`, a reader's wiring of one)
    that functions kept by TensorFlow can hold without keeping the cache alive."""
    _live[id(cache)] = cache
    return id(cache)


def live(key: int) -> Any:
    """The cache of `key` (KeyError once its dataset is gone)."""
    return _live[key]


def if_alive(key: int, method: Callable, *args) -> np.int64:
    """`method(cache, *args)` on the cache of `key` (a table's `write` or `read_ahead`);
    nothing once its dataset is gone (an iterator that still runs has its batches all
    the same). Returns 0 (a value the graph can depend on)."""
    cache = _live.get(key)
    if cache is not None:
        method(cache, *args)
    return np.int64(0)


def live_caches() -> list[Any]:
    """The caches (stores and arenas) whose datasets are alive in this process."""
    return list(_live.values())
