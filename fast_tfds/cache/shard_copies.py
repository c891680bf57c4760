"""Whole objects of a bucket (`gs://`) copied to local files: how both back ends read the
shards of a build in a bucket.

A copy is one streamed GET of the whole object (gcsfs, the `[gcs]` extra) into a
temporary folder, renamed into place once complete (a reader never opens half a file).
Copies run `PARALLEL_COPIES` at a time, in the order they were asked for (the order the
reader will open the shards), each once per process; a reader asks for every shard it will
read at once and then waits for the one it opens. Copies asked for *ahead* (`start(k,
ahead=True)`: as a dataset is opened, before its reader knows its order, see
`opening_copies`) run only when no copy a reader asked for waits: a reader's order
comes first. The copies stay for the life of the
object that made them (`ObjectCopies`: removed when it is collected, or at exit), so a
later epoch that reads the shards again reads local files; they take the shards' size on
the temporary folder's disk (TMPDIR).

A wait for a copy is bounded by `timeout_s` *without progress*: a copy whose bytes keep
coming is waited for, a bucket that gives nothing for that long ends the read with one
line naming the object (`BucketReadError`), and so does a copy that fails (the object
missing, a connection gcsfs gave up on, no room on the disk). gcsfs and the readers'
own GCS clients retry for minutes, so without this bound a bucket that went away
mid-epoch would look like a hang.

Nothing here imports TensorFlow: the loader opens its ArrayRecord readers on the copies
(`opener`), the tf.data reader opens the copies' paths.
"""

from __future__ import annotations

import collections
import errno
import logging
import os
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from fast_tfds.cache import remote_files

# Copies at a time, per process: enough to keep a bucket's latency hidden, few enough
# that one slow copy does not starve the reads of the shards it holds.
PARALLEL_COPIES = 16
FOLDER_PREFIX = "fast_tfds-shards-"

# How long a read from a bucket may wait without progress before it gives up. A healthy
# bucket answers in well under a second.
READ_TIMEOUT_ENV = remote_files.TIMEOUT_ENV
DEFAULT_READ_TIMEOUT_S = 120.0

log = logging.getLogger("fast_tfds")


class BucketReadError(RuntimeError):
    """A shard in an object store could not be read (one line: the object, what the
    store said, and what to do)."""


def read_timeout_s() -> float:
    """FAST_TFDS_BUCKET_READ_TIMEOUT_S, else 120 s; a one-line ValueError for a bad value."""
    value = os.environ.get(READ_TIMEOUT_ENV, "")
    try:
        seconds = float(value) if value else DEFAULT_READ_TIMEOUT_S
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ValueError(f"{READ_TIMEOUT_ENV}={value!r}: must be a positive number of seconds")
    return seconds


def gave_nothing(path: str, timeout_s: float) -> BucketReadError:
    return BucketReadError(
        f"{path}: the bucket gave no records within {timeout_s:g} s (it is unreachable or "
        f"too slow); check that it can be read from here (`gcloud storage ls -l {path}`), "
        f"or allow a slow bucket more time with {READ_TIMEOUT_ENV}=SECONDS"
    )


def read_failed(path: str, said: str) -> BucketReadError:
    return BucketReadError(
        f"{path}: reading it from the bucket failed ({said}); check that the object exists "
        f"and can be read from here (`gcloud storage ls -l {path}`); a build copied in part "
        "needs copying again, whole"
    )


def no_room(path: str, folder: str) -> BucketReadError:
    return BucketReadError(
        f"{path}: no room for its local copy in {folder} (the disk is full); the copies of "
        "a split's shards take the shards' size there: free that much, or set TMPDIR to a "
        "folder on a larger disk"
    )


def said_of(error: BaseException) -> str:
    """An error as a few words on one line (what a one-line message quotes)."""
    return " ".join(f"{type(error).__name__}: {error}".split())[:500]


class CopiesClosed(Exception):
    """Raised in a copy's download when its `ObjectCopies` was closed (it stops there)."""


class _Copy:
    """One object's copy: started once per process, waited for by its readers."""

    def __init__(self):
        self.done = threading.Event()
        self.value: Any = None  # the local path, or what `opener` made of it
        self.error: BucketReadError | None = None


class ObjectCopies:
    """Local copies of `files` (gs:// urls), made on demand: `start(k)` asks for file k's
    copy (at once, or after those asked for before it), `wait(k)` gives its local path
    (or what `opener(path)` made of it, in the copying thread) once it is there, or
    raises `BucketReadError` within the bounded time.

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
        self.timeout_s = timeout_s
        self.opener = opener
        self.folder: str | None = None
        self._owner = os.getpid()
        self._local()

    def _local(self) -> None:
        """What each process has of its own: its copies in flight, its client."""
        self._lock = threading.Lock()
        self._copies: dict[int, _Copy] = {}
        self._queue: collections.deque[int] = collections.deque()
        self._ahead: collections.deque[int] = collections.deque()  # after `_queue`
        self._workers = 0
        self._closed = False
        self._remover: weakref.finalize | None = None
        self._progress = time.monotonic()  # the last byte any copy received
        self._fs = None

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

    def filesystem(self):
        """gcsfs's client of this process; ImportError where gcsfs is not installed."""
        if self._fs is None:
            with self._lock:
                if self._fs is None:
                    self._fs = remote_files.filesystem()
        return self._fs

    def ensure_folder(self) -> str:
        with self._lock:
            if self._closed:
                raise CopiesClosed(f"the copies of {len(self.files)} objects were dropped")
            if self.folder is None:
                self.folder = tempfile.mkdtemp(prefix=FOLDER_PREFIX)
                self._remover = weakref.finalize(self, _remove, self.folder, self._owner)
            return self.folder

    def start(self, k: int, *, ahead: bool = False) -> _Copy:
        """File k's copy, asked for once: it starts when fewer than PARALLEL_COPIES run,
        after every copy asked for before it. `ahead`: after every copy asked for without
        it, too (one asked for ahead, then by a reader, moves to the reader's turn)."""
        with self._lock:
            copy = self._copies.get(k)
            if copy is not None and not ahead and k in self._ahead:
                self._ahead.remove(k)
                self._queue.append(k)
            if copy is None and self._closed:
                copy = self._copies[k] = _Copy()
                copy.error = read_failed(self.files[k], "its copies were dropped")
                copy.done.set()
            if copy is None:
                self._progress = time.monotonic()  # a wait starts now, not at the last copy
                copy = self._copies[k] = _Copy()
                (self._ahead if ahead else self._queue).append(k)
                if self._workers < PARALLEL_COPIES:
                    self._workers += 1
                    # Daemon threads: a copy the bucket never answers does not hold up
                    # the exit. They end when nothing is left to copy.
                    threading.Thread(
                        target=self._work, daemon=True, name="fast_tfds-shard-copy"
                    ).start()
        return copy

    def wait(self, k: int, copy: _Copy | None = None) -> Any:
        """File k's local path (or what `opener` made of it), its copy started if it was
        not; BucketReadError once no copy has made progress for `timeout_s`, or where
        the copy failed."""
        copy = copy or self.start(k)
        while not copy.done.is_set():
            left = self._progress + self.timeout_s - time.monotonic()
            if left <= 0:
                raise gave_nothing(self.files[k], self.timeout_s) from None
            copy.done.wait(min(left, 1.0))
        if copy.error is not None:
            raise copy.error
        return copy.value

    def close(self) -> None:
        """Drops the copies (those no reader took, see `opening_copies`): the queued ones
        never start, one in flight stops at its next piece, and the folder goes now."""
        with self._lock:
            self._closed = True
            dropped = [*self._queue, *self._ahead]
            self._queue.clear()
            self._ahead.clear()
        for k in dropped:
            copy = self._copies[k]
            copy.error = read_failed(self.files[k], "its copies were dropped")
            copy.done.set()
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
            _remove(self.folder, self._owner)

    def _copy(self, k: int, copy: _Copy) -> None:
        path = self.files[k]
        try:
            local = os.path.join(self.ensure_folder(), f"{k:05d}-{os.path.basename(path)}")
            self._progress = time.monotonic()
            if not os.path.exists(local):  # another process's copy, complete
                partial = f"{local}.{os.getpid()}.{threading.get_ident()}.partial"
                try:
                    self.filesystem().get_file(
                        path.removeprefix(remote_files.SCHEME),
                        partial,
                        callback=_progress(self),
                        concurrency=1,  # one streamed GET, with no metadata request
                    )
                    os.replace(partial, local)
                finally:
                    if os.path.exists(partial):
                        os.remove(partial)
            copy.value = local if self.opener is None else self.opener(local)
        except OSError as error:
            if error.errno == errno.ENOSPC:
                copy.error = no_room(path, self.folder or tempfile.gettempdir())
            else:
                copy.error = read_failed(path, said_of(error))
        except BaseException as error:  # noqa: BLE001  (raised in the readers)
            copy.error = read_failed(path, said_of(error))
        finally:
            copy.done.set()


def _progress(copies: ObjectCopies):
    """gcsfs's download callback: each piece of a copy that arrives is progress."""
    from fsspec.callbacks import Callback

    class Progress(Callback):
        def relative_update(self, inc=1):
            if copies._closed:
                raise CopiesClosed("dropped")  # gcsfs stops the download here
            copies._progress = time.monotonic()

    return Progress()


def _remove(folder: str, owner: int) -> None:
    # A forked worker inherits this finalizer: only the process that made the folder
    # removes it.
    if os.getpid() == owner:
        shutil.rmtree(folder, ignore_errors=True)
