"""The loader's picture store: the one module that wires the caches of `fast_tfds.cache`
(store, placement, persistence) into the Grain loader.

With `cache=True` the first time an example comes, its picture is decoded once into the
shard's picture store (`fast_tfds.cache.store.Store`: at the cache resolution, aspect
kept, within the hook's window; exactly the output size without a crop), with its
target; from then on its record is not even read (`padding.Share`), and its batches
are cut from the store by the serving step (`fast_tfds.augment.step`, as in the
tf.data reader). With `persist=True` the store is a persistent file under the one key
of every cache (`fast_tfds.cache.persisted`), which the tf.data reader shares; worker
processes only map a complete file (`served`).
"""

from __future__ import annotations

import numpy as np
from absl import logging

from fast_tfds.augment import step
from fast_tfds.cache import disk_rows, persisted
from fast_tfds.cache import pictures as store
from fast_tfds.cache import store as stores
from fast_tfds.loader.array_records import SplitSource
from fast_tfds.loader.examples import DecodeExample, reference_box
from fast_tfds.loader.options import AUTO, LoaderOptions


def make_cache(
    source: SplitSource,
    decode: DecodeExample,
    options: LoaderOptions,
    persist_identity: dict | None,
) -> stores.Store | None:
    """The shard's picture store: from its persistent file, a new file to fill, or memory
    (disk rows over the budget); None without a cache: cache=False, or "auto" with
    workers and no complete persisted file."""
    if not options.caches:
        return None
    # "auto" with worker processes serves a persisted file if there is one.
    looks_for_file = options.cache == AUTO and options.num_workers > 0
    size = decode.image_size
    crops = options.augment is not None and options.augment.crop is not None
    shorter_side = store.shorter_side(crops, options.cache_shorter_side, size)
    shard = range(options.shard_index, len(source), options.shard_count)
    what = f"{source.dataset} {source.split} (loader cache)"
    folder = options.cache_dir or disk_rows.default_folder()
    origin = persisted.Origin(
        dataset=source.dataset,
        split=source.split,
        shard_files=source.shard_files,
        hook=persist_identity,
    )
    common = {
        "slot_examples": np.arange(shard.start, shard.stop, shard.step),
        "output_size": size,
        "shorter_side": shorter_side,
        "features": _features(persist_identity),
    }
    # Workers map a complete file; none fills it (persist=True needs one, "auto" looks).
    if options.num_workers and (options.persist or looks_for_file):
        return served(
            {
                **common,
                "origin": origin,
                "folder": folder,
                "what": what,
                "shard_index": options.shard_index,
                "shard_count": options.shard_count,
            },
            required=options.persist,
        )
    return stores.open_store(
        **common,
        slot_of=_slot_of(options.shard_index, options.shard_count),
        stored_size=source.stored_size if decode.parts is None else None,
        header_sizes=lambda: reference_sizes(source.records, shard, decode),
        origin=origin if options.persist else None,
        folder=folder,
        budget=options.cache_budget,
        what=what,
    )


def _features(persist_identity: dict | None) -> dict[str, tuple]:
    """The store's one feature: the label, or where the dataset's hook makes the targets
    more than the label (None), targets of any kind (a persistent file keeps only the
    label)."""
    return {"label": ((), np.int64)} if persist_identity is not None else {TARGET: ((), object)}


# The feature that holds each slot's target where it is more than the label.
TARGET = "target"


def _slot_of(shard_index: int, shard_count: int):
    """Slot s of a shard's store holds example `shard_index + s * shard_count` of the split."""
    return lambda indices: (indices - shard_index) // shard_count


def fill(cache: stores.Store, indices, records, decode: DecodeExample) -> np.ndarray:
    """Writes the examples `indices` that the store does not hold yet from their
    `records` (None for one it holds: not read); returns their slots."""
    parsed = [(None, None, None) if record is None else decode.parse(record) for record in records]
    jpegs, values, windows = zip(*parsed, strict=True) if parsed else ((), (), ())
    (name,) = cache.keys  # The store's one feature (`_features`).
    return cache.put_many(indices, jpegs, windows, {name: values}, step.decode_error)


def targets(cache: stores.Store, slots) -> list:
    """The targets of `slots`, as the records' parse gave them."""
    (name,) = cache.keys
    column = cache.features[name]
    return [column[int(slot)] for slot in slots]


def served(reopen: dict, required: bool = True) -> stores.Store | None:
    """The store of a complete persistent file, for a process that only reads it;
    `reopen` holds the arguments of `persisted.open_file` and the shard. A one-line
    ValueError when the file is not there, complete and current, if `required`
    (persist=True); else (cache="auto") None, with one log line."""
    options = {k: v for k, v in reopen.items() if k not in ("shard_index", "shard_count", "what")}
    stored, why = persisted.open_file(**options)
    if stored is None and not required:
        logging.info(
            "fast_tfds: cache='auto' with worker processes: no persisted cache of %s in %s "
            "(%s); reading without a cache (fill one with num_workers=0, persist=True)",
            reopen["what"],
            reopen["folder"],
            why,
        )
        return None
    if stored is None:
        raise ValueError(
            f"persist=True with worker processes: the persistent cache of {reopen['what']} in "
            f"{reopen['folder']}: {why}; workers only map a complete file: fill it once with "
            "num_workers=0 (or as_fast_dataset(augment=..., cache=True, persist=True))"
        )
    cache = stores.file_store(
        stored, reopen["features"], _slot_of(reopen["shard_index"], reopen["shard_count"])
    )
    # Pickled to worker processes: the file is mapped again there (the page cache
    # shares it); any other store lives in its process only.
    cache.reopen = (served, (reopen,))
    return cache


def reference_sizes(records, indices, decode: DecodeExample) -> tuple[np.ndarray, np.ndarray]:
    """(heights, widths) of the reference pictures of `indices`, from each record's
    JPEG header and the hook's window: reads every record once, decodes nothing."""
    heights, widths = np.zeros(len(indices), np.int64), np.zeros(len(indices), np.int64)
    for slot, i in enumerate(indices):
        jpeg, _, window = decode.parse(records[int(i)])
        heights[slot], widths[slot] = reference_box(jpeg, window)[2:]
    return heights, widths
