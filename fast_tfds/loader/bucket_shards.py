"""The loader's records of shards in a bucket: whole shard objects copied to local files,
in one streamed request each, several at a time, and records served from the copies
(`fast_tfds.cache.shard_copies`, which the tf.data reader copies its shards with too).

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
import threading
from typing import Any

from fast_tfds.cache import opening_copies, remote_files
from fast_tfds.cache.shard_copies import (
    DEFAULT_READ_TIMEOUT_S,
    PARALLEL_COPIES,
    READ_TIMEOUT_ENV,
    BucketReadError,
    gave_nothing,
    read_failed,
    read_timeout_s,
)

# array_record's data source opens its readers so, for random access (no readahead).
READER_OPTIONS = "readahead_buffer_size:0"

log = logging.getLogger("fast_tfds")


def open_reader(local: str):
    """An ArrayRecord reader of a shard's copy (made in the copying thread)."""
    from array_record.python import array_record_module

    return array_record_module.ArrayRecordReader(
        local, options=READER_OPTIONS, file_reader_buffer_size=32768
    )


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
        self.copies = opening_copies.copies(self.files, timeout_s, opener=open_reader)
        self._local()

    def _local(self) -> None:
        self._lock = threading.Lock()
        self._has_gcsfs: bool | None = None

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._local()

    @property
    def folder(self) -> str | None:
        return self.copies.folder

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
        if not self._gcsfs():
            return self.fallback.__getitems__(keys)
        copies = {k: self.copies.start(k) for k in by_shard}  # all asked for before any wait
        out: list = [None] * len(keys)
        for k, wanted in by_shard.items():
            reader = self.copies.wait(k, copies[k])
            positions = [p for p, _ in wanted]
            for (_, i), record in zip(wanted, reader.read(positions), strict=True):
                out[i] = record
        return out

    def _gcsfs(self) -> bool:
        """Whether gcsfs copies the shards in this process (once logged where it cannot)."""
        if self._has_gcsfs is None:
            with self._lock:
                if self._has_gcsfs is None:
                    try:
                        self.copies.filesystem()
                        self._has_gcsfs = True
                    except ImportError:
                        self._has_gcsfs = False
                        log.warning(
                            "fast_tfds: the loader reads the shards in %s one record per "
                            "request: copying whole shard objects needs gcsfs (%s)",
                            os.path.dirname(self.files[0]),
                            remote_files.INSTALL,
                        )
        return self._has_gcsfs


__all__ = [
    "DEFAULT_READ_TIMEOUT_S",
    "PARALLEL_COPIES",
    "READ_TIMEOUT_ENV",
    "BucketReadError",
    "ShardCopies",
    "gave_nothing",
    "read_failed",
    "read_timeout_s",
]
