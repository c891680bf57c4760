"""Opening a build in an object store: its metadata copied to a local folder, from which
TFDS loads its builder (`copy_metadata`), and the copies a reader reads (`copies`), those
started as the dataset is opened, while its builder loads (`opening`) included.

Opening a build in a bucket first loads its builder: TFDS reads the metadata through
etils, whose first access to a bucket checks whether it is a zonal one (an import and a
call of Google's storage control client, once per bucket and process), then reads
dataset_info.json and lists the folder, a request at a time. Only then does the reader
know the split's shard files and ask for their copies, which the first batch waits for.
Yet the shards' names are in the version folder's listing: within `opening`, a
background thread lists the folder (one request) and asks for the copies of the split's
shard objects ahead (`ObjectCopies.start(k, ahead=True)`) while the builder loads.

A reader that then reads exactly those objects, in that order (the split's file
instructions), takes the copies (`take`): its own order goes first for the copies not yet
started. What no reader took when the opening ends (a read of other files), and what a
reader took where the opening then failed, is dropped (`ObjectCopies.close`): the queued
copies never start, the ones in flight stop at their next piece, and the folder goes. The
listing only names objects; the reader's instructions (from the metadata) decide what is
read, so a listing that differs (another build in the folder, an object missing) only
means no copies ahead.

The readers ask for this only where a read surely reads every shard of the split (a
whole split, not a persisted cache that may already hold it, ...): `read.reader` and
`loader` decide.

The metadata, for the builder (`core.builder_lookup.load_builder`): TFDS reads a version
folder through etils, which reads a bucket through TensorFlow's file systems: gs:// only
(TensorFlow's S3 support left for tensorflow-io, which does not load on TensorFlow 2.18+;
it never read Azure), and switching etils to fsspec (EPATH_USE_TF) is process-wide. For
the stores TensorFlow cannot read, the metadata (a few small files: dataset_info.json,
features.json, a label file) is copied through the store's fsspec client into a temporary
folder, the builder is loaded from that copy, and its splits then name the shard objects
in the store, which the readers copy whole (`copies`). TFDS keeps reading gs:// builds
itself.

A folder without dataset_info.json is not built, or not published yet: a publisher
uploads the metadata last, so a reader never opens a half-published build.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import dataclasses
import logging
import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

from fast_tfds.cache.remote.copies import ObjectCopies, remove_owned
from fast_tfds.cache.remote.object_stores import (
    NoAnswer,
    ObjectStore,
    in_thread,
    said_of,
    store_of,
    timeout_s,
    waited,
    within,
)

log = logging.getLogger("fast_tfds")

# The opening under way in this thread (the reader takes its copies in the same call).
_OPENING: contextvars.ContextVar[_Opening | None] = contextvars.ContextVar(
    "fast_tfds_opening_copies", default=None
)
# What `copies` has told this process it cannot copy (once per reader's way round it).
_TOLD: set[str] = set()


def shard_objects(names, dataset: str, split: str, file_format: str) -> list[str]:
    """The names among `names` of the shards of `split`, in shard order, as TFDS's default
    template names them (`dataset-split.format-00000-of-00016`); [] unless every shard of
    one such set is there, and nothing else of the split."""
    pattern = re.compile(
        rf"{re.escape(dataset)}-{re.escape(split)}\.{re.escape(file_format)}-(\d+)-of-(\d+)"
    )
    found = [(m, n) for n in names if (m := pattern.fullmatch(n))]
    totals = {int(m[2]) for m, _ in found}
    if len(totals) != 1 or sorted(int(m[1]) for m, _ in found) != list(range(totals.pop())):
        return []
    return [n for _, n in sorted(found, key=lambda f: int(f[0][1]))]


@dataclasses.dataclass
class _Opening:
    """One opening's copies ahead: `ahead`, a Future of the `ObjectCopies` of the split's
    shard objects (None where the listing names none), made in a background thread while
    the builder loads, and whether a reader took them."""

    ahead: Future
    timeout_s: float
    taken: bool = False


@contextlib.contextmanager
def opening(
    folder: str | None,
    dataset: str,
    split: Any,
    file_format: str,
    opener: Callable[[str], Any] | None = None,
) -> Iterator[None]:
    """Within: the shard objects of `split` (a split's name) in version folder `folder`
    (in an object store) are listed and copied ahead, for the reader that `take`s them;
    on exit, the copies no reader took are dropped, and where the opening raised, the
    taken ones too. Nothing is started where `folder` is not in a store, `split` is not
    a plain split name, or the store's client is not installed (the reader then reads
    without copies); a bad read timeout is the one-line ValueError of `timeout_s`."""
    plain = isinstance(split, str) and re.fullmatch(r"\w+", split)
    store = store_of(str(folder)) if folder is not None and plain else None
    if store is None or not store.installed():
        yield
        return
    folder = str(folder).rstrip("/")
    timeout, ended = timeout_s(), threading.Event()

    def ahead() -> ObjectCopies | None:
        # Imports the client here, not in the opening call.
        names = shard_objects(store.listing(folder), dataset, str(split), file_format)
        if not names or ended.is_set():
            return None
        copies = ObjectCopies([f"{folder}/{n}" for n in names], timeout, opener)
        copies.ensure_folder()  # there once the reader has taken them
        for k in range(len(names)):
            copies.start(k, ahead=True)
        return copies

    started = _Opening(in_thread(ahead, "fast_tfds-opening-copies"), timeout)
    token = _OPENING.set(started)
    failed = True
    try:
        yield
        failed = False
    finally:
        _OPENING.reset(token)
        ended.set()
        keep = started.taken and not failed

        def drop(ahead: Future) -> None:
            # Once the copies are made (now, or when the listing ends): those no reader
            # will read go, the queued copies never start, the ones in flight stop at
            # their next piece, and the folder goes.
            if not keep and not ahead.exception() and ahead.result() is not None:
                ahead.result().close()

        started.ahead.add_done_callback(drop)


def take(files) -> ObjectCopies | None:
    """The copies started ahead for exactly `files` (urls, in order) by the opening under
    way in this thread, now the caller's to keep (and close with its reader); None where
    there are none."""
    started = _OPENING.get()
    if started is None or started.taken:
        return None
    # The listing is one request, which the builder's loading (several, after etils'
    # check) has covered; where it has not, the copies ahead are worth the wait. A
    # bucket that gives it nothing in the read timeout would not give the reader's own
    # copies anything either.
    try:
        copies = waited(started.ahead, started.timeout_s)
    except Exception as error:  # noqa: BLE001  (the reader makes its own copies)
        log.debug("fast_tfds: no shard copies ahead for %s: %r", files[:1], error)
        return None
    started.taken = copies is not None and copies.files == tuple(files)
    return copies if started.taken else None


def copies(
    files, *, without: str, opener: Callable[[str], Any] | None = None
) -> ObjectCopies | None:
    """The copies of `files` a reader reads: those the opening under way started ahead for
    exactly these files (`take`), else new ones. None where `files` are not objects in a
    store, or where its client is not installed: the reader then reads the shards as
    `without` says ("are read one record per request"), which the log says once per
    process, with what to install."""
    files = tuple(files)
    store = store_of(files[0]) if files else None
    if store is None:
        return None
    if not store.installed():
        if without not in _TOLD:
            _TOLD.add(without)
            log.warning(
                "fast_tfds: the shards in %s %s: copying whole shard objects needs %s (%s)",
                os.path.dirname(files[0]),
                without,
                store.package,
                store.install,
            )
        return None
    return take(files) or ObjectCopies(files, timeout_s(), opener=opener)


# The shard files of a version folder, as TFDS names them
# (`NAME-SPLIT.FORMAT-00003-of-00016`): every other file is metadata that TFDS may read to
# open the build (features.json, *.labels.txt, metadata.json, ...), copied here.
SHARD = re.compile(r".+-\d{5}-of-\d{5}")
INFO = "dataset_info.json"  # a build is published once this is there
PREFIX = "fast_tfds-metadata-"


class NotPublished(FileNotFoundError):
    """The folder in the store holds no build's metadata (one line)."""


def copy_metadata(folder: str) -> str | None:
    """A local folder holding the metadata files of version folder `folder` (a url), for
    `tfds.builder_from_directory`; removed when the process ends. None where `folder` is
    not in a store, or in one TensorFlow reads (gs://): TFDS reads it itself there, as it
    always has (through TensorFlow, or gcsfs with EPATH_USE_TF=false), and a slow listing
    is the persistent cache's to tell, not a failed opening. An ImportError naming the
    extra where the client is missing; `NotPublished` where the folder has no
    dataset_info.json; a one-line `BucketReadError` where the store does not answer."""
    store = store_of(folder)
    if store is None or store.tensorflow_reads:
        return None
    if not store.installed():  # and TensorFlow cannot read the store either
        raise ImportError(
            f"{folder}: reading {store.scheme}:// needs {store.package}, which is not "
            f"installed (`{store.install}`)"
        )
    folder = folder.rstrip("/")
    timeout = timeout_s()
    try:
        return within(lambda: _copy_metadata(store, folder), timeout, "fast_tfds-metadata-copy")
    except NoAnswer:
        raise store.gave_nothing(f"{folder}/{INFO}", timeout) from None
    except (NotPublished, ImportError):
        raise
    except Exception as error:  # noqa: BLE001  (one line naming the folder)
        raise store.read_failed(f"{folder}/{INFO}", said_of(error)) from None


def _copy_metadata(store: ObjectStore, folder: str) -> str:
    try:
        listed = store.listing(folder)
    except FileNotFoundError:
        listed = {}
    metadata = {n: entry for n, entry in listed.items() if not SHARD.fullmatch(n)}
    if INFO not in metadata:
        raise NotPublished(f"{folder} has no {INFO}")
    local = tempfile.mkdtemp(prefix=PREFIX)
    atexit.register(remove_owned, local, os.getpid())  # the builder reads it while it lives
    client = store.client()
    for name, entry in metadata.items():
        client.get_file(entry["name"], os.path.join(local, name))
    return local
