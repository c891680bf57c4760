"""Whole objects of a bucket copied to local files: how both back ends read the shards of
a build in an object store (`object_stores`).

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
"""

from __future__ import annotations

import bisect
import collections
import errno
import itertools
import os
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from fast_tfds.cache.remote.object_stores import (
    NoAnswer,
    said_of,
    store_of,
    transferred,
    waited,
)

# Copies at a time, per process: enough to keep a bucket's latency hidden, few enough
# that one slow copy does not starve the reads of the shards it holds.
PARALLEL_COPIES = 16
FOLDER_PREFIX = "fast_tfds-shards-"


class CopiesClosed(Exception):
    """Raised in a copy's download when its `ObjectCopies` was closed (it stops there)."""


class ObjectCopies:
    """Local copies of `files` (urls of objects in one store), made on demand: `start(k)`
    asks for file k's copy (at once, or after those asked for before it), `wait(k)` gives
    its local path (or what `opener(path)` made of it, in the copying thread) once it is
    there, or raises `BucketReadError` within the bounded time.

    Picklable: a worker process gets the folder's name and shares the copies made there
    (each process copies what it does not find complete); only the process that made
    the folder removes it.
    """

    def __init__(
        self,
        files,
        timeout_s: float,
        opener: Callable[[str], Any] | None = None,
    ):
        self.files = tuple(files)
        store = store_of(self.files[0]) if self.files else None
        if store is None:
            raise ValueError(f"no object store here holds {self.files[:1]}")
        self.store = store
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
        """A piece of a copy arrived: progress (`transferred`, the download's callback)."""
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
                try:
                    self.store.get_file(self.store.key(path), partial, transferred(self._piece))
                    os.replace(partial, local)
                finally:
                    if os.path.exists(partial):
                        os.remove(partial)
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

    @property
    def folder(self) -> str | None:
        return self.copies.folder

    def __len__(self) -> int:
        return self.ends[-1] if self.ends else 0

    def __repr__(self) -> str:
        return f"ShardCopies({len(self.copies.files)} objects, folder={self.folder!r})"

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
