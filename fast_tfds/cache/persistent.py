"""A decoded cache that outlives the process (`persist=True`): its columns in a file.

The first run fills the cache as always (the picture store, or the fallback's arena of
examples), but its columns are a file in the cache folder (`persistent_format` has the
layout); once every row is written, the file is written back, its data checksum
verified, its header written, and only then renamed to its final name. Every later
run, and every concurrent one, maps that file and serves from its first epoch: nothing
is decoded and the shard files are not opened. The page cache holds one copy of the
rows for all of them (each maps the file copy-on-write, and no one writes).

The file's name is a digest of its key, and its header holds the key itself: what the
rows were made from (dataset and version, split and slice, shard files with their sizes
and modification times, or a bucket's objects with their sizes and generations, output
size and dtype, the decoder's version, the features).
The caller makes the key (`fast_tfds.cache.persisted`); this module only compares it,
so a file made from other inputs is never served. The columns' layout is planned only
when this process fills the file (`open_or_plan`).

Safety, in the order things can go wrong:
- Two processes filling the same key: one takes the key's lock file (`flock`), the
  other caches in memory for its run and says so.
- A fill that dies (killed, an exception, a dropped iterator) leaves only a temporary
  file, never trusted; its `flock` dies with its process, and the next run in the
  folder (or `fast-tfds cache clean`) removes it.
- Disk full: the file's blocks are reserved (`posix_fallocate`) before the first row is
  written, so a full disk is found before the fill, never as a crash in the middle
  of it: the run caches in memory instead, with one line.
- A truncated file, a damaged header or another key: found when opening, one line,
  filled again.
- A read-only folder (a team's shared cache): its files are served; a missing or bad
  one is read without persisting, with one line.

No TensorFlow: the Grain loader can use the same files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import mmap
import os
import re
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from pathlib import Path

import numpy as np
from absl import logging

from fast_tfds.cache import disk_rows, housekeeping, memory
from fast_tfds.cache import persistent_format as fmt
from fast_tfds.core import platform

# -- the key and the file's name ---------------------------------------------------


def key_digest(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def file_name(key: dict) -> str:
    """`<dataset>.<split>.<16 hex digits of the key>.arena`: readable, and unique per key."""
    readable = f"{str(key.get('dataset', 'dataset')).replace('/', '-')}.{key.get('split', '')}"
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", readable)
    return f"{slug}.{key_digest(key)[:16]}{fmt.SUFFIX}"


# -- what opening gives ------------------------------------------------------------


@dataclasses.dataclass
class Opened:
    """How a cache gets its rows: a filled file's rows to serve (`rows`), a new file
    to fill (`fill`, the cache's backing), or neither (None, None): the caller caches in
    memory. `why`: why a process that only reads is not served, in a few words."""

    path: Path
    rows: dict[str, np.ndarray] | None = None
    fill: FileFill | None = None
    why: str = ""


def open_or_plan(
    folder: str | os.PathLike | None,
    key: dict,
    plan: Callable[[], tuple[int, dict[str, tuple], bool]] | None,
    *,
    what: str | None,
    names: dict[str, str] | None = None,
) -> Opened:
    """The persistent file of `key` in `folder`: served if a good file is there, else
    filled into a new one if this process may, else neither (one log line says why).

    A good file of `key` is served whatever its columns: the key names everything they
    were made from. `plan()` runs only when this process fills the file, holding the
    key's lock (the picture store's layout takes a pass over the JPEG headers), and
    gives (num_examples, columns, read_ahead): `columns` is {name: (one row's shape,
    dtype[, a row count of the column's own])}; `read_ahead`: the rows exceed the memory
    budget, so served epochs ask for their rows ahead (as `disk_rows` does). The data
    checksum is made once every row is written, so a fill may write in any order.
    `names`: the file's name of each column the cache asks its fill for, where it differs.
    `folder` None: the default cache folder (`disk_rows.default_folder`). `plan` None:
    never a fill, nothing logged (a process that only reads: the loader's workers)."""
    key = json.loads(json.dumps(key))
    folder = Path(disk_rows.default_folder() if folder is None else folder)
    path = folder / file_name(key)
    rows, bad, size = _open_checked(path, key)
    if plan is None:
        return Opened(path, rows=rows, why="" if rows is not None else bad or "is not there")
    if rows is not None:
        logging.info(
            "fast_tfds: serving %s from the persistent cache %s (%s)",
            what,
            path,
            memory.bytes_text(size),
        )
        return Opened(path, rows=rows)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock_fd = os.open(fmt.lock_path(path), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        logging.warning(
            "fast_tfds: persist=True: %s %s, and %s cannot be written (%s): reading %s "
            "without persisting its cache.",
            path.name,
            bad or "is not there",
            folder,
            err.strerror or err,
            what,
        )
        return Opened(path)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = housekeeping.lock_record(fmt.lock_path(path)).get("pid", "?")
        os.close(lock_fd)
        logging.warning(
            "fast_tfds: persist=True: another process (pid %s) is writing the persistent "
            "cache %s; this run caches %s in memory.",
            holder,
            path,
            what,
        )
        return Opened(path)
    try:
        housekeeping.remove_leftovers(folder, fmt.PERSISTENT)
        # Another process may have finished it while this one waited for the lock.
        rows, bad, _ = _open_checked(path, key)
        if rows is not None:
            os.close(lock_fd)
            return Opened(path, rows=rows)
        if bad is not None:
            logging.warning("fast_tfds: the persistent cache %s %s: filling it again.", path, bad)
            path.unlink(missing_ok=True)
        os.ftruncate(lock_fd, 0)
        os.pwrite(lock_fd, json.dumps({"pid": os.getpid()}).encode(), 0)
        num_examples, columns, read_ahead = plan()
        layout = fmt.Layout.plan(key, num_examples, columns)
    except BaseException:
        os.close(lock_fd)
        raise
    return Opened(path, fill=FileFill(path, layout, lock_fd, what, names, reads_ahead=read_ahead))


def _open_checked(path: Path, key: dict) -> tuple[dict[str, np.ndarray] | None, str | None, int]:
    """(rows, None, size) of a good file; (None, why, 0) of a bad one; (None, None, 0) if
    absent. Its columns are whatever the key made them."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None, None, 0
    except OSError as err:
        return None, f"cannot be opened ({err.strerror or err})", 0
    try:
        # Shared: `clean` takes it exclusively, so a file in use is never removed.
        fcntl.flock(fd, fcntl.LOCK_SH)
        size = os.fstat(fd).st_size
        found = fmt.read_header(fd).layout
        if found.file_size != size:
            raise fmt.BadFile(f"is truncated ({size} of {found.file_size} bytes)")
        if found.key != key:
            raise fmt.BadFile("was made from other inputs (its key differs)")
        # Copy-on-write: the arrays are writable for numpy and TensorFlow, and no page is
        # ever written, so every process shares the page cache's one copy.
        region = mmap.mmap(fd, size, access=mmap.ACCESS_COPY)
    except fmt.BadFile as err:
        os.close(fd)
        why = str(err)
        return None, why if why.startswith(("is ", "was ")) else f"cannot be trusted: {why}", 0
    except (OSError, ValueError) as err:
        os.close(fd)
        return None, f"cannot be read ({err})", 0
    weakref.finalize(region, os.close, fd)
    try:  # The last use, for `fast-tfds cache list|clean --older-than`.
        os.utime(path, (time.time(), os.stat(path).st_mtime))
    except OSError:  # A read-only folder.
        pass
    return _views(region, found), None, size


def _views(region: mmap.mmap, layout: fmt.Layout) -> dict[str, np.ndarray]:
    arrays = {}
    for c in layout.columns:
        count = c.rows * int(np.prod(c.shape, dtype=np.int64))
        array = np.frombuffer(region, c.dtype, count=count, offset=c.offset)
        arrays[c.name] = array.reshape((c.rows, *c.shape))
    return arrays


# -- filling a new file ------------------------------------------------------------


class FileFill(memory.Backing):
    """The backing of a cache that fills a new persistent file: its rows in a new
    temporary file, made the persistent cache once the fill has written every row.

    Holds the key's lock from its creation until the file is renamed (or given up).
    If the disk lacks room, or the file cannot be made, the cache gets anonymous
    memory instead (one log line) and nothing is persisted. The data checksum is made
    of the rows once every one is written (a fill writes them in any order).
    `names`: the file's name of each column the cache asks for, where it differs.

    Rows within the memory budget (`reads_ahead` False): the fill writes anonymous
    memory, exactly as the memory arena does, while the file's blocks are reserved; then
    the writing thread writes the rows to the file, reads them back to verify them, and
    once the file is in place the cache serves from its mapping (`replace`), so this
    process too shares the page cache's one copy. Rows over the budget (`reads_ahead`):
    the fill writes the file's mapping, and served epochs read ahead.
    """

    def __init__(
        self, path: Path, layout: fmt.Layout, lock_fd: int, what: str, names=None, *, reads_ahead
    ):
        self.path = path
        self.layout = layout
        self.what = what
        self.names: dict[str, str] = names or {}
        self.reads_ahead = reads_ahead
        self._held = _Held(lock_fd)
        self._lock = threading.Lock()
        self._current: dict[str, np.ndarray] | None = None  # Every column, by the file's names.
        self._given: dict[str, np.ndarray] | None = None  # What the cache was given.
        self._fd: int | None = None
        self._region: mmap.mmap | None = None
        self._announced = False
        self.persisted = False
        self.writing: threading.Thread | None = None  # Writing the filled file out.
        # Its cache dropped before the fill ended: the temporary file and the lock go.
        weakref.finalize(self, self._held.abandon)

    def columns(self, wanted: memory.Wanted) -> dict[str, np.ndarray]:
        """The cache's arrays over a new temporary file (or memory, when there is no
        room for one)."""
        with self._lock:
            self._forget_file()
            if self._held.lock_fd is None:  # Given up earlier: memory from now on.
                return memory.IN_MEMORY.columns(wanted)
            try:
                arrays = self._new_file()
            except OSError as err:
                self._forget_file()
                self._held.release_key()
                logging.warning(
                    "fast_tfds: persist=True: no room for the %s cache of %s in %s (%s): "
                    "caching it in memory for this run only.",
                    memory.bytes_text(self.layout.file_size),
                    self.what,
                    self.path.parent,
                    err.strerror or err,
                )
                return memory.IN_MEMORY.columns(wanted)
            self._current = arrays
            self._given = _named(arrays, self.names, wanted)
        if not self._announced:
            self._announced = True
            logging.warning(
                "fast_tfds: persist=True: writing the decoded cache of %s (%s on disk) to "
                "%s; later runs serve from it. See or remove it with `fast-tfds cache "
                "list|clean %s`.",
                self.what,
                memory.bytes_text(self.layout.file_size),
                self.path,
                self.path.parent,
            )
        return self._given

    def filled(self, arrays: dict[str, np.ndarray], replace: memory.Replace) -> None:
        """Every row is written: the file is written back, verified, given its header
        and renamed in a thread of its own, so the epoch that filled it ends without
        waiting for the disk (the rows are served from the mapping meanwhile). The
        thread is not a daemon: a process that ends normally finishes the file first."""
        if arrays is not self._given or self._fd is None:
            return
        self.writing = threading.Thread(
            target=self._finish, args=(arrays, replace), name="fast_tfds persist", daemon=False
        )
        self.writing.start()

    def _finish(self, given: dict[str, np.ndarray], replace: memory.Replace) -> None:
        """Write back, verify, header, rename. A failure leaves the rows served from
        this process and nothing persisted (one line)."""
        # Background work: the epoch that filled the store goes on serving it (a shuffled
        # first epoch fills, then serves), and its batches come first. Summing and writing
        # a split's pixels takes seconds of CPU on a busy machine.
        platform.lower_this_threads_priority()
        with self._lock:
            if given is not self._given or self._fd is None:
                return
            try:
                self._persist(
                    self._current, lambda new: replace(given, _named(new, self.names, given))
                )
            except (OSError, fmt.BadFile) as err:
                logging.warning(
                    "fast_tfds: persist=True: the cache of %s could not be written to %s "
                    "(%s): it stays in memory for this run only.",
                    self.what,
                    self.path,
                    err,
                )
                self._held.drop_temp()
            finally:
                self._held.release_key()

    def _new_file(self) -> dict[str, np.ndarray]:
        """A new temporary file beside the final one, locked and with every block
        reserved (its descriptor in `_fd`); the arrays the fill writes: the file's mapping,
        or memory within the budget."""
        temp = self.path.with_name(
            f"{self.path.name}{fmt.TEMP_MARK}{os.getpid()}-{uuid.uuid4().hex[:12]}"
        )
        fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        self._held.temp, self._fd = temp, fd
        # Held while the fill runs: a temporary file whose lock is free is a leftover.
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        # Every block reserved now: a full disk is an error here, not a SIGBUS mid-fill.
        platform.preallocate(fd, self.layout.file_size)
        if not self.reads_ahead:
            return {
                c.name: memory.allocate_in_memory((c.rows, *c.shape), c.dtype)
                for c in self.layout.columns
            }
        self._region = mmap.mmap(fd, self.layout.file_size, flags=mmap.MAP_SHARED)
        return _views(self._region, self.layout)

    def _persist(self, arrays: dict[str, np.ndarray], swap) -> None:
        """Makes `arrays` (every column of the file) the persistent file: rows in memory
        are written to it and read back to verify them, and then served from the file's
        mapping (`swap(new)`); a mapping's rows are written back once, so later epochs
        find clean pages, which the kernel can drop cheaply under a memory limit (and an
        I/O error shows here, not later)."""
        fd, layout = self._fd, self.layout
        sums = {name: fmt.column_checksum(a) for name, a in arrays.items()}
        if self.reads_ahead:
            self._region.flush()
        else:
            for c in layout.columns:
                _pwrite_all(fd, arrays[c.name], c.offset)
        os.pwrite(fd, layout.header(sums), 0)
        os.fsync(fd)
        check = fmt.read_header(fd)
        if check.checksums != sums or check.layout.key != layout.key:
            raise fmt.BadFile("its header did not read back as written")
        for c in () if self.reads_ahead else layout.columns:
            if _file_checksum(fd, c) != sums[c.name]:
                raise fmt.BadFile(f"its {c.name} rows did not read back as written")
        os.rename(self._held.temp, self.path)
        _fsync_folder(self.path.parent)
        self._held.temp = None
        # From now on a reader like any other: shared, so `clean` leaves it alone.
        fcntl.flock(fd, fcntl.LOCK_SH)
        self.persisted = True
        if self.reads_ahead:
            memory.read_randomly(self._region)
            return
        self._region = mmap.mmap(fd, layout.file_size, access=mmap.ACCESS_COPY)
        swap(_views(self._region, layout))
        # The filled memory goes once nothing else holds it: the mapping serves now.
        self._current = self._given = None

    def _forget_file(self) -> None:
        """Forgets the current file; a temporary one is removed (the mapping stays
        valid for the rows still held)."""
        self._held.drop_temp()
        if self._region is not None and self._fd is not None:
            # The descriptor (and its lock) goes with the last view of the rows.
            weakref.finalize(self._region, _close_fd, self._fd)
        elif self._fd is not None:
            _close_fd(self._fd)
        self._region = self._fd = None
        self._current = self._given = None

    def close(self) -> None:
        """Gives up an unfinished fill: its temporary file goes, and the key's lock."""
        with self._lock:
            if not self.persisted:
                self._forget_file()
            self._held.release_key()


def _pwrite_all(fd: int, array: np.ndarray, offset: int) -> None:
    data = memoryview(np.ascontiguousarray(array)).cast("B")
    while data:
        written = os.pwrite(fd, data[: 1 << 30], offset)
        data, offset = data[written:], offset + written


def _file_checksum(fd: int, column) -> int:
    """The checksum of a column's rows as the file holds them, read back in chunks."""
    row_bytes = column.nbytes // max(column.rows, 1)
    per_chunk = max(1, (16 << 20) // max(row_bytes, 1))
    total = 0
    for start in range(0, column.rows, per_chunk):
        n = min(per_chunk, column.rows - start)
        data = os.pread(fd, n * row_bytes, column.offset + start * row_bytes)
        if len(data) != n * row_bytes:
            raise fmt.BadFile("shorter than its header says")
        rows = np.frombuffer(data, column.dtype).reshape((n, *column.shape))
        total = fmt.add(total, fmt.column_checksum(rows))
    return total


class ServedFile(memory.Backing):
    """The backing of a cache served from a complete persistent file: its `rows` (by the
    file's names; `names`: the file's name of each column the cache asks for, where it
    differs), read ahead when they exceed the memory budget (`reads_ahead`)."""

    def __init__(self, rows: dict[str, np.ndarray], names=None, *, reads_ahead: bool = False):
        self.rows = rows
        self.names: dict[str, str] = names or {}
        self.reads_ahead = reads_ahead

    def columns(self, wanted: memory.Wanted) -> dict[str, np.ndarray]:
        """The file's columns `wanted`; a ValueError if they are not of that layout."""
        given = _named(self.rows, self.names, wanted)
        found = {k: (a.shape, a.dtype) for k, a in given.items()}
        expected = {k: (tuple(shape), np.dtype(dtype)) for k, (shape, dtype) in wanted.items()}
        if found != expected:
            raise ValueError(f"the persistent file holds {found}, not {expected}")
        return given

    def filled(self, arrays: dict[str, np.ndarray], replace: memory.Replace) -> None:
        pass  # Complete from the start.


def _named(file: dict[str, np.ndarray], names: dict[str, str], wanted) -> dict[str, np.ndarray]:
    """The file's columns `wanted` (names as the cache asks for them; `names`: the file's
    name of each, where it differs)."""
    return {name: file[names.get(name, name)] for name in wanted}


@dataclasses.dataclass
class _Held:
    """What an unfinished fill holds: the key's lock and its temporary file."""

    lock_fd: int | None
    temp: Path | None = None

    def drop_temp(self) -> None:
        """Removes the temporary file (a mapping of it keeps its rows readable)."""
        if self.temp is not None:
            self.temp.unlink(missing_ok=True)
            self.temp = None

    def release_key(self) -> None:
        if self.lock_fd is not None:
            _close_fd(self.lock_fd)
            self.lock_fd = None

    def abandon(self) -> None:
        """A `FileFill` gone before its file was made visible: nothing of it stays."""
        self.drop_temp()
        self.release_key()


def _close_fd(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def _fsync_folder(folder: Path) -> None:
    """Makes the rename durable; a folder that cannot be synced is left as it is."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
