"""Whole objects of a store copied to local files: how both back ends read a build in an
object store (`object_stores`): its shards, those a reader asks for and those started as
the dataset is opened, and its metadata, for the builder.

A copy is one streamed GET of the whole object (the store's client: gcsfs, s3fs, adlfs)
into a temporary folder, renamed into place once complete (a reader never opens half a
file). Copies run `PARALLEL_COPIES` at a time, in the order they were asked for (the
order the reader will open the shards), each once per process; a reader asks for every
shard it will read at once and then waits for the one it opens. Copies asked for *ahead*
(`start(k, ahead=True)`: as a dataset is opened, before its reader knows its order, see
`opening`) run only when no copy a reader asked for waits: a reader's order comes first.
The copies stay for the life of the object that made them (`ObjectCopies`: removed when
it is collected, or at exit), so a later epoch that reads the shards again reads local
files; they take the shards' size on the temporary folder's disk (TMPDIR).

A wait for a copy is bounded by `timeout_s` *without progress*: a copy whose bytes keep
coming is waited for, a bucket that gives nothing for that long ends the read with one
line naming the object (`BucketReadError`), and so does a copy that fails (the object
missing, a connection the client gave up on, no room on the disk).

The tf.data reader opens the copies' paths; the loader reads records from them at random
(`ShardCopies`), through ArrayRecord readers it opens on them (`opener`). Nothing here
imports TensorFlow or array_record.

The copies a reader reads (`reader_copies`) include those started as the dataset is
opened, while its builder loads (`opening`). Opening a build in a bucket first loads its
builder: TFDS reads the metadata through etils, whose first access to a bucket checks
whether it is a zonal one (an import and a call of Google's storage control client, once
per bucket and process), then reads dataset_info.json and lists the folder, a request at
a time. Only then does the reader know the split's shard files and ask for their copies,
which the first batch waits for. Yet the shards' names are in the version folder's
listing: within `opening`, a background thread lists the folder (one request) and asks
for the copies of the split's shard objects ahead (`ObjectCopies.start(k, ahead=True)`)
while the builder loads.

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
in the store, which the readers copy whole (`ObjectCopies`). TFDS keeps reading gs://
builds itself.

A folder without dataset_info.json is not built, or not published yet: a publisher
uploads the metadata last, so a reader never opens a half-published build.
"""

from __future__ import annotations

import atexit
import bisect
import collections
import contextlib
import contextvars
import errno
import itertools
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

from fast_tfds.cache.remote.object_stores import (
    PARALLEL_COPIES,
    NoAnswer,
    ObjectStore,
    in_thread,
    said_of,
    store_of,
    timeout_s,
    waited,
    within,
)

FOLDER_PREFIX = "fast_tfds-shards-"

# Each download of a copy, as it starts and as it lands, is a DEBUG record of this logger
# whose attribute `PHASE` says which ("started", "landed"): where a first batch waits,
# its timeline (the bucket benchmark's --phases) shows whether it waits for the copies.
timeline = logging.getLogger("fast_tfds.copies")
PHASE = "fast_tfds_copy"


class CopiesClosed(Exception):
    """Raised in a copy's download when its `ObjectCopies` was closed (it stops there)."""


class ObjectCopies:
    """Local copies of `files` (urls of objects in `store`), made on demand: `start(k)`
    asks for file k's copy (at once, or after those asked for before it), `wait(k)` gives
    its local path (or what `opener(path)` made of it, in the copying thread) once it is
    there, or raises `BucketReadError` within the bounded time.

    Picklable: a worker process gets the folder's name and shares the copies made there
    (each process copies what it does not find complete); only the process that made
    the folder removes it.
    """

    def __init__(
        self,
        store: ObjectStore,
        files,
        timeout_s: float,
        opener: Callable[[str], Any] | None = None,
    ):
        self.store = store
        self.files = tuple(files)
        self.timeout_s = timeout_s
        self.opener = opener
        self.folder: str | None = None
        self._owner = os.getpid()
        self._local()

    def _local(self) -> None:
        """What each process has of its own: its copies in flight."""
        self._lock = threading.Lock()
        # Each object's copy, started once per process: its local path (or what `opener`
        # made of it), or the `BucketReadError` that its readers raise.
        self._copies: dict[int, Future] = {}
        self._queue: collections.deque[int] = collections.deque()
        self._ahead: collections.deque[int] = collections.deque()  # after `_queue`
        self._workers = 0
        self._closed = False
        self._remover: weakref.finalize | None = None
        self._progress = time.monotonic()  # the last byte any copy received

    def __getstate__(self):
        # Worker processes share the copies: the folder exists before they do.
        self.ensure_folder()
        state = {k: v for k, v in self.__dict__.items() if not k.startswith("_")}
        state["_owner"] = self._owner
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._local()

    def __repr__(self) -> str:
        return f"ObjectCopies({len(self.files)} objects, folder={self.folder!r})"

    def ensure_folder(self) -> str:
        with self._lock:
            if self._closed:
                raise CopiesClosed(f"the copies of {len(self.files)} objects were dropped")
            if self.folder is None:
                self.folder = tempfile.mkdtemp(prefix=FOLDER_PREFIX)
                self._remover = weakref.finalize(self, remove_owned, self.folder, self._owner)
            return self.folder

    def start(self, k: int, *, ahead: bool = False) -> Future:
        """File k's copy, asked for once: it starts when fewer than PARALLEL_COPIES run,
        after every copy asked for before it. `ahead`: after every copy asked for without
        it, too (one asked for ahead, then by a reader, moves to the reader's turn)."""
        with self._lock:
            copy = self._copies.get(k)
            if copy is not None and not ahead and k in self._ahead:
                self._ahead.remove(k)
                self._queue.append(k)
            if copy is None:
                self._progress = time.monotonic()  # a wait starts now, not at the last copy
                copy = self._copies[k] = Future()
                (self._ahead if ahead else self._queue).append(k)
                if self._workers < PARALLEL_COPIES:
                    self._workers += 1
                    # Daemon threads: a copy the bucket never answers does not hold up
                    # the exit. They end when nothing is left to copy.
                    threading.Thread(
                        target=self._work, daemon=True, name="fast_tfds-shard-copy"
                    ).start()
        return copy

    def wait(self, k: int, copy: Future | None = None) -> Any:
        """File k's local path (or what `opener` made of it), its copy started if it was
        not; BucketReadError once no copy has made progress for `timeout_s`, or where
        the copy failed."""
        try:
            return waited(copy or self.start(k), self.timeout_s, lambda: self._progress)
        except NoAnswer:
            raise self.store.gave_nothing(self.files[k], self.timeout_s) from None

    def close(self) -> None:
        """Drops the copies (those no reader took, see `opening`): the queued ones, and any
        asked for later, never start (`_copy`), one in flight stops at its next piece, and
        the folder goes now."""
        self._closed = True
        if self._remover is not None:
            self._remover()

    def _work(self) -> None:
        while True:
            with self._lock:
                queue = self._queue or self._ahead
                if not queue:
                    self._workers -= 1
                    last_after_close = self._closed and self._workers == 0
                    break
                k = queue.popleft()
                copy = self._copies[k]
            self._copy(k, copy)
        if last_after_close and self.folder is not None:
            # What a copy in flight wrote after `close` removed the folder's files.
            remove_owned(self.folder, self._owner)

    def _piece(self) -> None:
        """A piece of a copy arrived: progress (`ObjectStore.get_file`'s `piece`)."""
        if self._closed:
            raise CopiesClosed("dropped")  # the client stops the download here
        self._progress = time.monotonic()

    def _copy(self, k: int, copy: Future) -> None:
        path = self.files[k]
        if self._closed:  # its turn came after `close`: never started
            copy.set_exception(self.store.read_failed(path, "its copies were dropped"))
            return
        try:
            local = os.path.join(self.ensure_folder(), f"{k:05d}-{os.path.basename(path)}")
            self._progress = time.monotonic()
            if not os.path.exists(local):  # another process's copy, complete
                partial = f"{local}.{os.getpid()}.{threading.get_ident()}.partial"
                timeline.debug("copying %s", path, extra={PHASE: "started"})
                try:
                    self.store.get_file(self.store.key(path), partial, self._piece)
                    os.replace(partial, local)
                finally:
                    if os.path.exists(partial):
                        os.remove(partial)
                timeline.debug("copied %s", path, extra={PHASE: "landed"})
            copy.set_result(local if self.opener is None else self.opener(local))
        except BaseException as error:  # noqa: BLE001  (raised in the readers)
            if isinstance(error, OSError) and error.errno == errno.ENOSPC:
                copy.set_exception(self.store.no_room(path, self.folder or tempfile.gettempdir()))
            else:
                copy.set_exception(self.store.read_failed(path, said_of(error)))


def remove_owned(folder: str, owner: int) -> None:
    """Removes `folder` in process `owner` only: a forked worker inherits the finalizers
    of its parent's folders (the copies', the metadata's), which are not its own."""
    if os.getpid() == owner:
        shutil.rmtree(folder, ignore_errors=True)


class ShardCopies:
    """The loader's random-access source of a split's records (len(), [i],
    __getitems__) in shard objects of a bucket, read from `copies` of the whole objects,
    each opened by the copies' `opener` (an ArrayRecord reader).

    array_record's own GCS client reads a shuffled epoch one record per request (the
    files are written with one record per chunk, `group_size:1`, for random access, so
    its readahead does not apply): at 20 ms per request an epoch of 3,016 records was
    3,166 requests and 68 images/s against 1,929 from a local copy (docs/buckets.md).
    Here the first read of any record of a shard starts that shard's copy, and every read
    of the shard waits for it and is then a local read. A shuffled epoch touches every
    shard within its first batch, so the whole split is asked for at once: one request
    per shard object, the bytes the local epoch would read from disk.

    `skips`, `counts`: TFDS's file instructions for `copies.files` (the first record of
    each taken and how many), in the split's record order. Picklable: worker processes
    (`num_workers>0`) share the copies' folder.
    """

    def __init__(self, copies: ObjectCopies, skips, counts):
        self.copies = copies
        self.skips = tuple(int(s) for s in skips)
        self.counts = tuple(int(c) for c in counts)
        self.ends = tuple(itertools.accumulate(self.counts))

    def __len__(self) -> int:
        return self.ends[-1] if self.ends else 0

    def __repr__(self) -> str:
        return f"ShardCopies({len(self.copies.files)} objects, folder={self.copies.folder!r})"

    def __getitem__(self, key):
        return self.__getitems__([key])[0]

    def __getitems__(self, keys):
        keys = [int(k) for k in keys]
        by_shard: dict[int, list[tuple[int, int]]] = {}
        for i, key in enumerate(keys):
            if not 0 <= key < len(self):
                raise IndexError(f"record {key} of {len(self)}")
            k = bisect.bisect_right(self.ends, key)
            position = key - (self.ends[k] - self.counts[k]) + self.skips[k]
            by_shard.setdefault(k, []).append((position, i))
        copies = {k: self.copies.start(k) for k in by_shard}  # all asked for before any wait
        out: list = [None] * len(keys)
        for k, wanted in by_shard.items():
            reader = self.copies.wait(k, copies[k])
            positions = [p for p, _ in wanted]
            for (_, i), record in zip(wanted, reader.read(positions), strict=True):
                out[i] = record
        return out


log = logging.getLogger("fast_tfds")

# The shard files of a version folder, as TFDS names them (`NAME-SPLIT.FORMAT-00003-of-
# 00016`, group 1 the part before the numbers; five digits each, so that the names sort
# in shard order): every other file is metadata that TFDS may read to open the build
# (features.json, *.labels.txt, metadata.json, ...), copied for the builder.
SHARD = re.compile(r"(.+)-\d{5}-of-\d{5}")
INFO = "dataset_info.json"  # a build is published once this is there
PREFIX = "fast_tfds-metadata-"

# The copies ahead of the opening under way in this thread (the reader takes them in the
# same call): a Future of the `ObjectCopies` of the split's shard objects (None where the
# listing names none), made in a background thread while the builder loads; None once a
# reader took them.
_OPENING: contextvars.ContextVar[Future | None] = contextvars.ContextVar(
    "fast_tfds_opening_copies", default=None
)
# What `reader_copies` has told this process it cannot copy (once per reader's way round it).
_TOLD: set[str] = set()


def shard_objects(names, dataset: str, split: str, file_format: str) -> list[str]:
    """The names among `names` of the shards of `split`, in shard order, as TFDS's default
    template names them (`SHARD`: `dataset-split.format-00000-of-00016`); [] unless every
    shard of one such set is there, and nothing else of the split."""
    prefix = f"{dataset}-{split}.{file_format}"
    shards = sorted(n for n in names if (m := SHARD.fullmatch(n)) and m[1] == prefix)
    whole = [f"{prefix}-{k:05d}-of-{len(shards):05d}" for k in range(len(shards))]
    return shards if shards == whole else []


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
        copies = ObjectCopies(store, [f"{folder}/{n}" for n in names], timeout, opener)
        copies.ensure_folder()  # there once the reader has taken them
        for k in range(len(names)):
            copies.start(k, ahead=True)
        return copies

    started = in_thread(ahead, "fast_tfds-opening-copies")
    token = _OPENING.set(started)
    failed = True
    try:
        yield
        failed = False
    finally:
        keep = _OPENING.get() is None and not failed  # taken (`take`), and not failed
        _OPENING.reset(token)
        ended.set()

        def drop(ahead: Future) -> None:
            # Once the copies are made (now, or when the listing ends): those no reader
            # will read go, the queued copies never start, the ones in flight stop at
            # their next piece, and the folder goes.
            if not keep and not ahead.exception() and ahead.result() is not None:
                ahead.result().close()

        started.add_done_callback(drop)


def take(files) -> ObjectCopies | None:
    """The copies started ahead for exactly `files` (urls, in order) by the opening under
    way in this thread, now the caller's to keep (and close with its reader); None where
    there are none."""
    started = _OPENING.get()
    if started is None:
        return None
    # The listing is one request, which the builder's loading (several, after etils'
    # check) has covered; where it has not, the copies ahead are worth the wait. A
    # bucket that gives it nothing in the read timeout would not give the reader's own
    # copies anything either.
    try:
        copies = waited(started, timeout_s())
    except Exception as error:  # noqa: BLE001  (the reader makes its own copies)
        log.debug("fast_tfds: no shard copies ahead for %s: %r", files[:1], error)
        return None
    if copies is None or copies.files != tuple(files):
        return None
    _OPENING.set(None)  # taken: the opening leaves them to the reader
    return copies


def reader_copies(
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
    return take(files) or ObjectCopies(store, files, timeout_s(), opener=opener)


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
    # All in one call: the client copies them at once, so the builder waits one round trip
    # for its metadata, not one per file (while the shards' copies take the store's time).
    names = sorted(metadata)
    store.client().get(
        [metadata[n]["name"] for n in names], [os.path.join(local, n) for n in names]
    )
    return local
