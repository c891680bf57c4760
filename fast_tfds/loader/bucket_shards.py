"""The loader's records of shards in a bucket: whole shard objects copied to local files,
in one streamed request each, several at a time, and records served from the copies.

array_record's own GCS client reads a shuffled epoch one record per request (the files
are written with one record per chunk, `group_size:1`, for random access, so its
readahead does not apply): at 20 ms per request an epoch of 3,016 records was 3,166
requests and 68 images/s against 1,929 from a local copy (docs/buckets.md). Here the first
read of any record of a shard starts that shard's copy, a GET streamed to a local file
(gcsfs, the `[gcs]` extra), at most `PARALLEL_COPIES` of them at a time, and every read of
the shard waits for its copy and is then a local array_record read. A shuffled epoch
touches every shard within its first batch, so the whole split is asked for at once:
one request per shard object, the bytes the local epoch would read from disk.

The copies live in a temporary folder that the process which made the source removes
when the source is collected, or at exit; worker processes (`num_workers>0`) get the
folder's name in the pickled source and share its copies (a copy is renamed into place
once complete, so a reader never opens half a file). Their size is the split's
ArrayRecord files' (on the temporary folder's disk: TMPDIR).

A wait for a copy is bounded by `timeout_s` *without progress*: a copy whose bytes keep
coming is waited for, a bucket that gives nothing for that long ends the read with one
line naming the object (`BucketReadError`), as the per-record reads do. A process
without gcsfs reads as before, record by record through array_record's client (`records`).
"""

from __future__ import annotations

import bisect
import itertools
import logging
import os
import shutil
import tempfile
import threading
import time
import weakref
from typing import Any

from fast_tfds.cache import remote_files

# Shard copies at a time, per process: enough to keep a bucket's latency hidden, few
# enough that one slow copy does not starve the reads of the shards it holds.
PARALLEL_COPIES = 16
# array_record's data source opens its readers so, for random access (no readahead).
READER_OPTIONS = "readahead_buffer_size:0"

log = logging.getLogger("fast_tfds")


# How long a read of records from a bucket may wait without progress before the loader
# gives up on it. array_record's GCS client retries a failing read for up to 15 minutes,
# with no setting to shorten that, and gcsfs retries too: a bucket that went away
# mid-epoch would look like a hang. A healthy bucket answers in well under a second.
READ_TIMEOUT_ENV = "FAST_TFDS_BUCKET_READ_TIMEOUT_S"
DEFAULT_READ_TIMEOUT_S = 120.0


class BucketReadError(RuntimeError):
    """A record of a shard in an object store could not be read (one line: the object,
    what the store said, and what to do)."""


def read_timeout_s() -> float:
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


class _Copy:
    """One shard object's copy: started once per process, waited for by its readers."""

    def __init__(self):
        self.done = threading.Event()
        self.reader: Any = None
        self.error: str | None = None  # what the bucket (or the disk) said


class ShardCopies:
    """A random-access source of a split's records (len(), [i], __getitems__) in shard
    objects of a bucket, read from local copies of the whole objects.

    `files`, `skips`, `counts`: TFDS's file instructions (the objects, the first record
    of each taken and how many), in the split's record order. `fallback`: array_record's
    source over the same objects (bounded, `array_records.BucketRecords`), read where
    gcsfs is not installed.
    """

    def __init__(self, files, skips, counts, timeout_s: float, fallback: Any = None):
        self.files = tuple(files)
        self.skips = tuple(int(s) for s in skips)
        self.counts = tuple(int(c) for c in counts)
        self.ends = tuple(itertools.accumulate(self.counts))
        self.timeout_s = timeout_s
        self.fallback = fallback
        self.folder: str | None = None
        self._owner = os.getpid()
        self._local()

    def _local(self) -> None:
        """What each process has of its own: its copies in flight, its readers."""
        self._lock = threading.Lock()
        self._copies: dict[int, _Copy] = {}
        self._slots = threading.Semaphore(PARALLEL_COPIES)
        self._progress = time.monotonic()  # the last byte any copy received
        self._fs = None

    def __getstate__(self):
        # Worker processes share the copies: the folder exists before they do.
        self._ensure_folder()
        state = {k: v for k, v in self.__dict__.items() if not k.startswith("_")}
        state["_owner"] = self._owner
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._local()

    def __len__(self) -> int:
        return self.ends[-1] if self.ends else 0

    def __repr__(self) -> str:
        return f"ShardCopies({len(self.files)} objects, folder={self.folder!r})"

    def file_of(self, key: int) -> str:
        return self.files[min(bisect.bisect_right(self.ends, key), len(self.files) - 1)]

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
        if self._fs_or_none() is None:
            return self.fallback.__getitems__(keys)
        copies = {k: self._start(k) for k in by_shard}  # all asked for before any wait
        out: list = [None] * len(keys)
        for k, wanted in by_shard.items():
            reader = self._wait(k, copies[k])
            positions = [p for p, _ in wanted]
            for (_, i), record in zip(wanted, reader.read(positions), strict=True):
                out[i] = record
        return out

    # The copies.

    def _fs_or_none(self):
        """gcsfs's client of this process; None (once logged) where gcsfs is missing."""
        if self._fs is None:
            with self._lock:
                if self._fs is None:
                    try:
                        self._fs = remote_files.filesystem()
                    except ImportError:
                        self._fs = False
                        log.warning(
                            "fast_tfds: the loader reads the shards in %s one record per "
                            "request: copying whole shard objects needs gcsfs (%s)",
                            os.path.dirname(self.files[0]),
                            remote_files.INSTALL,
                        )
        return self._fs or None

    def _ensure_folder(self) -> str:
        with self._lock:
            if self.folder is None:
                self.folder = tempfile.mkdtemp(prefix="fast_tfds-shards-")
                weakref.finalize(self, _remove, self.folder, self._owner)
            return self.folder

    def _start(self, k: int) -> _Copy:
        with self._lock:
            copy = self._copies.get(k)
            if copy is None:
                self._progress = time.monotonic()  # a wait starts now, not at the last copy
                copy = self._copies[k] = _Copy()
                thread = threading.Thread(
                    target=self._copy, args=(k, copy), daemon=True, name="fast_tfds-shard-copy"
                )
                thread.start()
        return copy

    def _copy(self, k: int, copy: _Copy) -> None:
        # A daemon thread: a copy the bucket never answers does not hold up the exit.
        from array_record.python import array_record_module

        path = self.files[k]
        local = os.path.join(self._ensure_folder(), f"{k:05d}-{os.path.basename(path)}")
        try:
            with self._slots:
                self._progress = time.monotonic()
                if not os.path.exists(local):  # another process's copy, complete
                    partial = f"{local}.{os.getpid()}.{threading.get_ident()}.partial"
                    try:
                        self._fs.get_file(
                            path.removeprefix(remote_files.SCHEME),
                            partial,
                            callback=_progress(self),
                            concurrency=1,  # one streamed GET, with no metadata request
                        )
                        os.replace(partial, local)
                    finally:
                        if os.path.exists(partial):
                            os.remove(partial)
            copy.reader = array_record_module.ArrayRecordReader(
                local, options=READER_OPTIONS, file_reader_buffer_size=32768
            )
        except BaseException as error:  # noqa: BLE001  (raised in the readers)
            copy.error = " ".join(f"{type(error).__name__}: {error}".split())[:500]
        finally:
            copy.done.set()

    def _wait(self, k: int, copy: _Copy):
        while not copy.done.is_set():
            left = self._progress + self.timeout_s - time.monotonic()
            if left <= 0:
                raise gave_nothing(self.files[k], self.timeout_s) from None
            copy.done.wait(min(left, 1.0))
        if copy.error is not None:
            raise read_failed(self.files[k], copy.error) from None
        return copy.reader


def _progress(copies: ShardCopies):
    """gcsfs's download callback: each piece of a copy that arrives is progress."""
    from fsspec.callbacks import Callback

    class Progress(Callback):
        def relative_update(self, inc=1):
            copies._progress = time.monotonic()

    return Progress()


def _remove(folder: str, owner: int) -> None:
    # A forked worker inherits this finalizer: only the process that made the folder
    # removes it.
    if os.getpid() == owner:
        shutil.rmtree(folder, ignore_errors=True)
