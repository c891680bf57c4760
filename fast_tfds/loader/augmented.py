"""The loader's batches with `augment=` or `cache=True`: whole batches made at once.

Each element carries its epoch and its example index (its position in the split as
read), which Grain's index arithmetic gives exactly (`tag`): the dataset is indexed
across epochs, `epoch * len(split) + example`, and shuffling or slicing a shard
keep that. Windows drawn from (seed, epoch, example) are then the same however the
batches are made (threads, worker processes) and after `set_state`, which only
moves the position.

Without a cache, each JPEG is decoded by the shared decoder with its window (the
hook's, e.g. Stanford Dogs' box, with the augmentation's crop inside it), chosen
before decoding so that the decoder picks its DCT scale for the part kept; then
flipped and jittered. With `cache=True` the first time an example comes its
picture is decoded once into a `PictureCache` (at the cache resolution, aspect
kept, within the hook's window), with its label; from then on its record is not
even read (`IndexedRecords`), and its batches are cut from the cache.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from fast_tfds.augment import step
from fast_tfds.augment.progressive import ProgressiveResize
from fast_tfds.augment.spec import Augment
from fast_tfds.cache import persisted
from fast_tfds.cache import pictures as store
from fast_tfds.loader.examples import DecodeExample, stored_size


@dataclasses.dataclass(frozen=True)
class Tag:
    """`map_with_index` of the records: (epoch, example index, record)."""

    num_examples: int

    def __call__(self, position: int, element: tuple[int, Any]) -> tuple[int, int, Any]:
        index, record = element
        return position // self.num_examples, index, record


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


@dataclasses.dataclass
class AugmentedBatches:
    """Grain's `batch_fn`: [(epoch, index, record)] -> (images [B, H, W, 3] uint8, targets)."""

    decode: DecodeExample
    augment: Augment | None
    seed: int
    cache: LoaderCache | None = None
    sizes: ProgressiveResize | None = None  # each epoch's size, else decode.image_size
    with_index: bool = False  # (images, targets, indices) batches
    pad: Any = None  # `padding.Pad`: what an example of index -1 holds

    def __call__(self, elements: Sequence[tuple[int, int, Any]]):
        epochs = {int(epoch) for epoch, _, _ in elements}
        if len(epochs) != 1:  # Grain batches each epoch apart; anything else is a bug.
            raise RuntimeError(f"a batch spans epochs {sorted(epochs)}")
        (epoch,) = epochs
        indices = np.array([index for _, index, _ in elements], np.int64)
        # Padding (index -1) ends a host's unshuffled share: the real examples lead.
        real = int(np.count_nonzero(indices >= 0))
        size = self.decode.image_size if self.sizes is None else self.sizes.size(epoch)
        out = np.empty((len(elements), *size, 3), np.uint8)
        out[real:] = 0
        records = [r for _, _, r in elements[:real]]
        targets = []
        if real and self.cache is None:
            targets = self._decode_into(epoch, indices[:real], records, out[:real])
        elif real:
            targets = self._serve_into(epoch, indices[:real], records, out[:real])
        if real < len(elements):
            targets += [self.pad.target] * (len(elements) - real)
        if self.with_index:
            return out, stack(targets), indices
        return out, stack(targets)

    def _decode_into(self, epoch: int, indices, records, out) -> list:
        parsed = [self.decode.parse(record) for record in records]
        boxes = np.array([_reference(jpeg, window) for jpeg, _, window in parsed], np.int64)
        jpegs = [jpeg for jpeg, _, _ in parsed]
        step.decode_into(jpegs, boxes, self.augment, self.seed, epoch, indices, out)
        return [target for _, target, _ in parsed]

    def _serve_into(self, epoch: int, indices, records, out) -> list:
        cache = self.cache
        slots = np.array([cache.slot(int(i)) for i in indices], np.int64)
        for slot, record in zip(slots, records, strict=True):
            if record is None or cache.pictures.images.written[slot]:
                continue
            jpeg, target, window = self.decode.parse(record)
            cache.targets[slot] = target  # before the picture is marked as written
            cache.pictures.fill(int(slot), jpeg, window)
        cache.when_filled()
        step.serve_into(cache.pictures, slots, self.augment, self.seed, epoch, indices, out)
        return [cache.targets[slot] for slot in slots]


def _reference(jpeg: bytes, window) -> tuple[int, int, int, int]:
    """(top, left, height, width) of the picture windows are drawn in: the hook's
    window of the stored image, or all of it."""
    height, width = stored_size(jpeg)
    return window(height, width) if window is not None else (0, 0, height, width)


def reference_sizes(records, indices, decode: DecodeExample) -> tuple[np.ndarray, np.ndarray]:
    """(heights, widths) of the reference pictures of `indices`, from each record's
    JPEG header and the hook's window: reads every record once, decodes nothing."""
    sizes = np.array(
        [_reference(*_jpeg_and_window(decode, records[int(i)]))[2:] for i in indices], np.int64
    )
    return sizes[:, 0], sizes[:, 1]


def _jpeg_and_window(decode: DecodeExample, record: bytes):
    jpeg, _, window = decode.parse(record)
    return jpeg, window


def stack(targets: list):
    """What Grain's default batching makes of the targets: arrays stacked, dicts by key."""
    first = targets[0]
    if isinstance(first, dict):
        return {key: np.stack([t[key] for t in targets]) for key in first}
    return np.stack(targets)
