"""The loader's picture store: the one module that wires the caches of `fast_tfds.cache`
(store, placement, persistence) into the Grain loader.

With `cache=True` the first time an example comes, its picture is decoded once into the
shard's `PictureCache` (at the cache resolution, aspect kept, within the hook's window;
exactly the output size without a crop), with its label; from then on its record is
not even read (`IndexedRecords`), and its batches are cut from the store by the
serving step (`fast_tfds.augment.step`, as in the tf.data reader). With `persist=True`
the store is a persistent file under the one key of every cache
(`fast_tfds.cache.persisted`), which the tf.data reader shares; worker processes only
map a complete file (`served`).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from fast_tfds.cache import disk_rows, persisted, placement
from fast_tfds.cache import pictures as store
from fast_tfds.loader.array_records import SplitSource
from fast_tfds.loader.examples import DecodeExample, reference_box
from fast_tfds.loader.options import LoaderOptions


def make_cache(
    source: SplitSource,
    decode: DecodeExample,
    options: LoaderOptions,
    persist_identity: dict | None,
) -> LoaderCache | None:
    """The shard's picture store: from its persistent file, a new file to fill, or memory
    (disk rows over the budget); None without `cache=True`."""
    if not options.cache:
        return None
    size = decode.image_size
    crops = options.augment is not None and options.augment.crop is not None
    shorter_side = (
        (options.cache_shorter_side or store.default_shorter_side(size)) if crops else None
    )
    shard = range(options.shard_index, len(source), options.shard_count)

    def sizes():
        stored = source.stored_size
        if not crops:  # The cache holds the output itself; windows are whole pictures.
            return np.full(len(shard), size[0]), np.full(len(shard), size[1])
        if stored is not None and decode.parts is None:
            return np.full(len(shard), stored[0]), np.full(len(shard), stored[1])
        # Sizes vary (or a hook's window cuts each): read each JPEG's header.
        return reference_sizes(source.records, shard, decode)

    what = f"{source.dataset} {source.split} (loader cache)"
    folder = options.cache_dir or disk_rows.default_folder()
    if options.persist:
        origin = persisted.Origin(
            dataset=source.dataset,
            split=source.split,
            shard_files=source.shard_files,
            hook=persist_identity,
        )
        common = {
            "origin": origin,
            "slot_examples": np.arange(shard.start, shard.stop, shard.step),
            "output_size": size,
            "shorter_side": shorter_side,
            "features": {"label": ((), np.int64)},
            "folder": folder,
        }
        if options.num_workers:  # Workers map a complete file; nothing fills it.
            return served(
                {
                    **common,
                    "what": what,
                    "shard_index": options.shard_index,
                    "shard_count": options.shard_count,
                }
            )
        stored = persisted.open_pictures(**common, sizes=sizes, budget=None, what=what)
        if stored is not None:
            return LoaderCache(
                stored.pictures,
                options.shard_index,
                options.shard_count,
                labels=stored.features,
                filling=stored.filling,
            )
    heights, widths = sizes()
    need = store.cache_bytes(heights, widths, size, shorter_side)
    # In memory within the budget, else rows on disk in `folder`, as tf.data's cache.
    allocate = placement.allocator(need, what=what, cache_dir=folder)
    pictures = store.PictureCache(heights, widths, size, shorter_side, allocate)
    filling = allocate if hasattr(allocate, "filled") else None
    return LoaderCache(pictures, options.shard_index, options.shard_count, filling=filling)


class IndexedRecords:
    """The split's records as (index, record) pairs; with a cache, (index, None) for an
    example whose picture and label the cache already holds, which is not read."""

    def __init__(self, records: Any, cache: LoaderCache | None = None):
        self.records = records
        self.cache = cache

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int) -> tuple[int, Any]:
        index = int(index)
        if self.cache is not None and self.cache.has(index):
            return index, None
        return index, self.records[index]


class LoaderCache:
    """A shard's pictures at the cache resolution, and their labels (or targets).

    Slot s holds example `shard_index + s * shard_count` of the split. The layout is
    fixed from each picture's reference size (the stored size, or the hook's window
    in it), so the buffer is allocated once, before epoch 1.

    `labels`: {"label": int64 [slots]}, the labels' column of a persistent file (served,
    or being filled), instead of a target per slot in a list. `filling`: called
    `filled(buffer)` once every picture is written (the persistent file is then
    written out; rows on disk are written back).
    """

    def __init__(
        self,
        pictures: store.PictureCache,
        shard_index: int,
        shard_count: int,
        *,
        labels: dict[str, np.ndarray] | None = None,
        filling: Any = None,
    ):
        self.pictures = pictures
        self.targets: Any = [None] * len(pictures) if labels is None else _Labels(labels)
        self.shard_index, self.shard_count = shard_index, shard_count
        self._filling = filling
        self._lock = threading.Lock()
        self._done = False
        # How a worker process opens the same file (`served`), if this cache is one.
        self.reopen: dict | None = None

    def __reduce__(self):
        # Pickled to worker processes: a complete persistent file is mapped again there
        # (the page cache shares it); any other cache lives in this process only.
        if self.reopen is None:
            raise TypeError("the loader's cache lives in its process (num_workers=0)")
        return _reopened, (self.reopen,)

    def slot(self, index: int) -> int:
        return (index - self.shard_index) // self.shard_count

    def has(self, index: int) -> bool:
        return bool(self.pictures.images.written[self.slot(index)])

    @property
    def nbytes(self) -> int:
        return self.pictures.nbytes

    def fill(self, indices, records, decode: DecodeExample) -> np.ndarray:
        """Decodes the pictures of examples `indices` that the store does not hold yet
        from their `records` (None for one it holds: not read) into their slots, with
        their targets; tells `filling` once every picture is written. Returns the slots."""
        slots = np.array([self.slot(int(i)) for i in indices], np.int64)
        for slot, record in zip(slots, records, strict=True):
            if record is None or self.pictures.images.written[slot]:
                continue
            jpeg, target, window = decode.parse(record)
            self.targets[slot] = target  # before the picture is marked as written
            self.pictures.fill(int(slot), jpeg, window)
        self.when_filled()
        return slots

    def when_filled(self) -> None:
        """Once every picture is written, tells `filling` (once)."""
        if self._filling is None or not self.pictures.images.filled:
            return
        with self._lock:
            done, self._done = self._done, True
        if not done:
            self._filling.filled(self.pictures.images.buffer)


def served(reopen: dict) -> LoaderCache:
    """The cache of a complete persistent file, for a process that only reads it;
    `reopen` holds `persisted.serve_pictures`' arguments and the shard. A one-line
    ValueError when the file is not there, complete and current."""
    options = {k: v for k, v in reopen.items() if k not in ("shard_index", "shard_count", "what")}
    stored, why = persisted.serve_pictures(**options)
    if stored is None:
        raise ValueError(
            f"persist=True with worker processes: the persistent cache of {reopen['what']} in "
            f"{reopen['folder']}: {why}; workers only map a complete file: fill it once with "
            "num_workers=0 (or as_fast_dataset(augment=..., cache=True, persist=True))"
        )
    cache = LoaderCache(
        stored.pictures, reopen["shard_index"], reopen["shard_count"], labels=stored.features
    )
    cache.reopen = reopen
    return cache


def _reopened(reopen: dict) -> LoaderCache:
    return served(reopen)


class _Labels:
    """The targets of a persistent file: a label per slot, in its column (looked up on
    each use: the column moves to the file's mapping once the file is written)."""

    def __init__(self, columns: dict[str, np.ndarray]):
        self.columns = columns

    def __setitem__(self, slot: int, label) -> None:
        self.columns["label"][slot] = label

    def __getitem__(self, slot: int):
        return self.columns["label"][slot]


def reference_sizes(records, indices, decode: DecodeExample) -> tuple[np.ndarray, np.ndarray]:
    """(heights, widths) of the reference pictures of `indices`, from each record's
    JPEG header and the hook's window: reads every record once, decodes nothing."""
    sizes = np.array(
        [reference_box(*_jpeg_and_window(decode, records[int(i)]))[2:] for i in indices], np.int64
    )
    return sizes[:, 0], sizes[:, 1]


def _jpeg_and_window(decode: DecodeExample, record: bytes):
    jpeg, _, window = decode.parse(record)
    return jpeg, window
