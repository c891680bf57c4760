"""`persist=True` for the augmentation cache, in both back ends: the pictures at the cache
resolution and each example's kept features (its label) in one persistent file
(`fast_tfds.cache.persistent`), written once and mapped by every later and concurrent
run, of either back end, which then serves from its first epoch.

The file's columns:

    pictures           uint8, the store's buffer (`pictures.PictureCache`), one row per byte
    reference_heights  int64 per slot: the size windows are drawn in (stored picture,
    reference_widths   or the hook's window of it), so a served run needs no header pass
    feature/<name>     one row per slot, each kept feature (fixed shape, numeric)

The key is the same from the tf.data reader and the Grain loader for the same read
(`key`): what the pixels and features are made from, never the augmentation (the
cache holds unaugmented pictures, so a train and an eval recipe of one cache
resolution share a file). The two back ends read different shard files (TFRecord and
ArrayRecord files of one build), so the key fingerprints every shard file of the split
in the version folder, in every format; a slot holds the same example in both. Shards
in a bucket (gs://) are fingerprinted by their objects' metadata (`remote.object_stores`), so
a local file also serves a build read from a bucket. No TensorFlow.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from absl import logging

from fast_tfds.cache import fingerprint, persistent, placement
from fast_tfds.cache import pictures as store
from fast_tfds.cache.memory import Backing
from fast_tfds.cache.pictures import HEIGHTS, PICTURES, WIDTHS
from fast_tfds.cache.remote import object_stores
from fast_tfds.core import jpeg_blocks

KIND = "pictures"
FEATURE = "feature/"


@dataclasses.dataclass(frozen=True)
class Origin:
    """What a read's cache is made from, as both back ends name it.

    Attributes:
      dataset: the full name, name/config/version.
      split: the split or slice as asked ('train[:80%]'); slots are numbered in it.
      shard_files: the split's shard files as one back end reads them (TFRecord or
        ArrayRecord): their folder and names lead to the files of every format.
      hook: what the dataset's hook changes in pixels or targets
        (`DatasetHook.persist_identity`), {} for nothing; None: the targets are more
        than the label, which a persistent file does not keep.
    """

    dataset: str
    split: str
    shard_files: tuple[str, ...]
    hook: dict | None


def example_ranges(index) -> list[list[int]]:
    """The slot -> example mapping `index` as [start, stop, step] runs: [[0, n, 1]] for a
    whole split, [[k, k + m * c, c]] for every c-th example from k; the same list for the
    same mapping whichever back end made it."""
    index = np.asarray(index, np.int64).reshape(-1)
    steps = np.diff(index)
    changes = np.flatnonzero(steps[1:] != steps[:-1]) + 1  # where a new step begins
    runs, i, n = [], 0, len(index)
    while i < n:
        if i == n - 1:
            runs.append([int(index[i]), int(index[i]) + 1, 1])
            break
        step = int(steps[i])
        k = np.searchsorted(changes, i, side="right")
        last = int(changes[k]) if k < len(changes) else n - 1
        runs.append([int(index[i]), int(index[last]) + step, step])
        i = last + 1
    return runs


def split_files(shard_files: Sequence[str], what: str | None = None) -> list[list] | None:
    """The fingerprints (`fingerprint.in_folder`) of every file of the split(s) of
    `shard_files` in their folder, in every format (`<dataset>-<split>.<format>-<shard>`).
    None when they cannot be fingerprinted; with `what` (the dataset's name), that is said
    in one log line, with why and that the cache stays in memory.
    """
    stems: dict[str, set[str]] = {}
    for filename in shard_files:
        folder, name = os.path.split(os.fspath(filename))
        stems.setdefault(folder, set()).add(name.split(".", 1)[0] + ".")
    found: list[list] = []
    for folder, starts in sorted(stems.items()):
        starts = tuple(sorted(starts))
        try:
            files = fingerprint.in_folder(folder, lambda name, s=starts: name.startswith(s))
        except object_stores.NotKeyed as why:
            _not_keyed(what, f"the shard files of {what} are in a bucket, and {why}")
            return None
        if not files and not object_stores.is_remote(folder):
            _not_keyed(
                what,
                f"the shard files of {what} are not local files ({folder or '.'}), so a "
                "persistent cache could not tell when they change",
            )
            return None
        found += files
    return found or None


def _not_keyed(what: str | None, why: str) -> None:
    if what is not None:
        logging.warning("fast_tfds: persist=True: %s: caching in memory only.", why)


def not_kept(features: dict[str, tuple]) -> str | None:
    """Why `features` ({name: (shape, dtype)}) cannot go in a persistent file, or None."""
    for name, (shape, dtype) in sorted(features.items()):
        if np.dtype(dtype).kind not in "biuf" or None in tuple(shape):
            return f"{name!r} is not a fixed-size number"
    return None


def key(
    origin: Origin,
    slot_examples,
    output_size: tuple[int, int] | None,
    shorter_side: int | None,
    features: dict[str, tuple],
    *,
    pictures: bool = True,
    decoder: str | None = None,
) -> dict | None:
    """The file's key, or None when its shard files cannot be fingerprinted (one log line).

    The one key of every persistent cache, of both back ends, plain and augmented: what
    the stored pictures and kept features are made from. `shorter_side` None is the
    layout without a crop (each picture exactly the output size: fixed rows), which a
    plain read, an `Augment(crop=None)` read and the loader's plain cache share; any
    crop of one cache resolution shares one file. `pictures` False: a store of decoded
    examples only (every column a feature, the images among them: a transform's output,
    or a tf.data service's). `decoder`: what decoded the pictures, by default our
    decoder with its version, read when called: a new decoder never serves old pixels.
    """
    shards = split_files(origin.shard_files, what=origin.dataset)
    if shards is None:
        return None
    made = {
        "kind": KIND,
        "dataset": origin.dataset,
        "split": origin.split,
        "examples": example_ranges(slot_examples),
        "shards": shards,
        "image_size": None if output_size is None else [int(s) for s in output_size],
        "shorter_side": None if shorter_side is None else int(shorter_side),
        "features": {
            name: [[int(s) for s in shape], np.dtype(dtype).str]
            for name, (shape, dtype) in sorted(features.items())
        },
        "hook": origin.hook,
        "decoder": decoder or f"fast_tfds.core.jpeg_blocks {jpeg_blocks.DECODER_VERSION}",
    }
    if not pictures:  # Only then: the keys of picture stores stay those of before.
        made["pictures"] = False
    return made


@dataclasses.dataclass
class Stored:
    """A cache's persistent file: its `backing` (a `persistent.ServedFile`, every column
    written: `filled`; or a `persistent.FileFill` being filled) and, of a picture store, the
    reference sizes per slot its layout is made from (None for the arena's rows)."""

    backing: Backing
    filled: bool
    path: Path
    heights: np.ndarray | None = None
    widths: np.ndarray | None = None


def open_pictures(
    origin: Origin,
    slot_examples,
    *,
    output_size: tuple[int, int],
    shorter_side: int | None,
    features: dict[str, tuple],
    folder: str | os.PathLike | None,
    sizes: Callable[[], tuple[np.ndarray, np.ndarray]] | None = None,
    budget: int | None = None,
    what: str | None = None,
) -> tuple[Stored | None, str]:
    """The store of `slot_examples` from its persistent file in `folder`, or a new file to
    fill: (stored, ""); (None, why) when this run caches as without persist (one log line
    said why: strings or nested targets, shards not local, another process filling, a
    read-only folder).

    `sizes()` gives the reference (heights, widths) per slot; it runs only to fill.
    `sizes` None: only a complete file is served, never a fill, and nothing is logged (a
    process that only reads); `why` then says why not, in a few words.
    `folder` None: the default cache folder (`persistent.open_or_plan`).
    """
    made, why = _keyed(origin, slot_examples, output_size, shorter_side, features, what)
    if made is None:
        return None, why
    n = len(np.asarray(slot_examples).reshape(-1))
    planned: dict[str, np.ndarray] = {}

    def plan():
        heights, widths = (np.asarray(a, np.int64).reshape(-1) for a in sizes())
        nbytes = store.PictureSizes(heights, widths, output_size, shorter_side).nbytes
        need = nbytes + n * _row_bytes(features)
        planned.update(heights=heights, widths=widths)
        return n, _picture_columns(nbytes, features), not placement.fits_in_memory(need, budget)

    opened = persistent.open_or_plan(
        folder, made, None if sizes is None else plan, what=what, names=_file_names(features)
    )
    if opened.rows is not None:
        rows = opened.rows
        backing = persistent.ServedFile(rows, _file_names(features))
        return Stored(backing, True, opened.path, rows[HEIGHTS], rows[WIDTHS]), ""
    if opened.fill is None:
        return None, opened.why and f"{opened.path.name} {opened.why}"
    return Stored(opened.fill, False, opened.path, planned["heights"], planned["widths"]), ""


def _keyed(origin, slot_examples, output_size, shorter_side, features, what=None):
    """(the key of a picture store's file, "") or (None, why not, in a few words); with
    `what` (a read that would fill the file), why not is also said in one log line."""
    if origin.hook is None:
        if what is not None:
            logging.warning(
                "fast_tfds: persist=True: the targets of %s are more than the label, which a "
                "persistent cache does not keep: caching %s in memory for this run only.",
                what,
                what,
            )
        return None, "cannot hold targets beyond the label"
    reason = not_kept(features)
    if reason is not None:
        if what is not None:
            logging.warning(
                "fast_tfds: persist=True: %s, so the examples of %s cannot be kept in a "
                "persistent cache: cached in memory for this run only (as_supervised=True "
                "keeps only the label).",
                reason,
                what,
            )
        return None, f"cannot hold these features ({reason})"
    made = key(origin, slot_examples, output_size, shorter_side, features)
    return made, "" if made is not None else "cannot be keyed (the shard files are not local)"


def _file_names(features) -> dict[str, str]:
    """The file's name of each kept feature (the store's other columns keep theirs)."""
    return {k: FEATURE + k for k in features}


# -- the arena's rows in the same file ---------------------------------------------


def open_rows(
    origin: Origin,
    slot_examples,
    *,
    output_size: tuple[int, int] | None,
    features: dict[str, tuple],
    folder: str | os.PathLike | None,
    budget: int | None,
    what: str,
    decoder: str | None = None,
) -> Stored | None:
    """The rows of an arena of examples of `slot_examples` (decoded elsewhere: a
    transform, the tf.data service), each column of `features` ({name: (shape,
    dtype)}) a kept feature of the one kind of file, keyed with pictures=False. None
    when this run caches as without persist (one log line said why)."""
    if origin.hook is None or not_kept(features) is not None:
        return None  # The arena holds nothing a picture store could not.
    made = key(origin, slot_examples, output_size, None, features, pictures=False, decoder=decoder)
    if made is None:
        return None
    n = len(np.asarray(slot_examples).reshape(-1))
    columns = _feature_columns(features)
    over = not placement.fits_in_memory(n * _row_bytes(features), budget)
    opened = persistent.open_or_plan(
        folder,
        made,
        lambda: (n, columns, over),
        what=what,
        names=(names := _file_names(features)),
    )
    if opened.rows is not None:
        if any(name not in opened.rows for name in names.values()):
            return None  # The key names the layout; a mismatch is a damaged file.
        return Stored(
            persistent.ServedFile(opened.rows, names, reads_ahead=over), True, opened.path
        )
    return None if opened.fill is None else Stored(opened.fill, False, opened.path)


def _row_bytes(features: dict[str, tuple]) -> int:
    return sum(
        int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        for shape, dtype in features.values()
    )


def _feature_columns(features: dict[str, tuple]) -> dict[str, tuple]:
    return {FEATURE + k: (tuple(shape), dtype) for k, (shape, dtype) in features.items()}


def _picture_columns(nbytes: int, features: dict[str, tuple]) -> dict[str, tuple]:
    """The file's columns: the pictures' bytes, their reference sizes, the features."""
    return {
        PICTURES: ((), np.uint8, nbytes),
        HEIGHTS: ((), np.int64),
        WIDTHS: ((), np.int64),
        **_feature_columns(features),
    }
