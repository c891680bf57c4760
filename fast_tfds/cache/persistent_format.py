"""The file of a persistent arena: a checked header, then each column's rows, page-aligned.

    offset 0    MAGIC (16 bytes), FORMAT_VERSION (u32), length of the JSON (u32),
                sha256 of the JSON (32 bytes), the JSON
    the JSON    {"key": what the rows were made from, "num_examples", "columns": [{name,
                rows, shape (one row's), dtype, offset, nbytes}], "file_size",
                "data_checksum": {column: 16 hex digits}, "made": time.time()}
    offsets     each column's rows, [rows, *shape], at a page boundary

A column has one row per example (an arena's features), unless it says otherwise: the
augmentation cache's pictures are one column of bytes (`rows` = their total), since each
picture has a size of its own (`fast_tfds.cache.persisted`).

Everything a reader trusts is in the header and checked before a byte of the rows is
used: the magic and version, the header's own checksum (a flipped byte), the file's size
(a truncated file), and the key (a file of other inputs). The data checksum is a sum of the
rows' machine words (mod 2^64), so batches written in any order, by several threads,
add up to the same value; the writer computes it during the fill and checks it against
the written rows before the file is made visible. No TensorFlow: the Grain loader reads
the same files.

The files in a folder, their names, what each holds, whether a process uses it, and
removing them: each is one `housekeeping.Entry` of the kind `PERSISTENT` (`fast-tfds
cache list|clean`, and a fill's leftovers).

    <dataset>.<split>.<16 hex digits of the key>.arena        a complete file
    <...>.arena-lock                                          the key's lock (who fills it)
    <...>.arena.arena-tmp-<pid>-<random>                      a fill in progress, or left

A process that maps a file holds a shared `flock` on it, and a fill an exclusive one on
its temporary file; `clean` takes the exclusive lock before removing, so a file in use is
never removed.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import mmap
import os
import struct
import time
from pathlib import Path

import numpy as np

from fast_tfds.cache import fingerprint, housekeeping

MAGIC = b"FAST_TFDS_ARENA\0"
# Bump when the layout of the file changes; a file of another version is refilled.
# 2: each column has a row count of its own.
# 3: rows are addressed by example index (before: in the order the fill ran).
FORMAT_VERSION = 3
_FIXED = struct.Struct("<16sII32s")  # magic, version, JSON length, sha256 of the JSON
_MAX_JSON = 1 << 24  # A length beyond this is a damaged header, not a big one.
# The names of a complete file, its key's lock and a fill's temporary file (above).
SUFFIX = ".arena"
LOCK_SUFFIX = ".arena-lock"
TEMP_MARK = ".arena-tmp-"


class BadFile(ValueError):
    """A file that cannot be trusted; the message says why, in a few words."""


@dataclasses.dataclass(frozen=True)
class ColumnLayout:
    name: str
    shape: tuple[int, ...]  # One row's.
    dtype: np.dtype
    offset: int
    nbytes: int
    rows: int


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where everything is in a file of `num_examples` rows of `columns`."""

    key: dict
    num_examples: int
    columns: tuple[ColumnLayout, ...]
    file_size: int
    made: float

    @classmethod
    def plan(cls, key: dict, num_examples: int, columns: dict[str, tuple]) -> Layout:
        """The layout for `columns` ({name: (shape, dtype)}, the shape's first dimension
        the column's rows: one per example, or a count of the column's own, as the picture
        store's bytes), names sorted."""
        made = time.time()
        # The header's length does not depend on the checksum's value (fixed width).
        placed, offset = [], 0
        for name in sorted(columns):
            (rows, *shape), dtype = columns[name]
            dtype = np.dtype(dtype)
            nbytes = int(rows) * int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            shape = tuple(int(s) for s in shape)
            placed.append(ColumnLayout(name, shape, dtype, offset, nbytes, int(rows)))
            offset = _page_up(offset + nbytes)
        draft = cls(key, num_examples, tuple(placed), 0, made)
        start = _page_up(len(draft.header({c.name: 0 for c in placed})))
        moved = tuple(dataclasses.replace(c, offset=c.offset + start) for c in placed)
        return cls(key, num_examples, moved, start + max(offset, 1), made)

    def header(self, checksums: dict[str, int]) -> bytes:
        columns = [{**vars(c), "shape": list(c.shape), "dtype": c.dtype.str} for c in self.columns]
        record = {
            **dataclasses.asdict(self),
            "columns": columns,
            "data_checksum": {c.name: f"{checksums.get(c.name, 0):016x}" for c in self.columns},
        }
        text = json.dumps(record, sort_keys=True).encode()
        digest = hashlib.sha256(text).digest()
        return _FIXED.pack(MAGIC, FORMAT_VERSION, len(text), digest) + text


@dataclasses.dataclass(frozen=True)
class Header:
    """A header read back and checked: the layout and the checksums it promises."""

    layout: Layout
    checksums: dict[str, int]


def read_header(fd: int) -> Header:
    """The header of the file open at `fd`, checked; raises BadFile saying what is wrong."""
    fixed = os.pread(fd, _FIXED.size, 0)
    if len(fixed) < _FIXED.size:
        raise BadFile("shorter than a header")
    magic, version, length, digest = _FIXED.unpack(fixed)
    if magic != MAGIC:
        raise BadFile("not a fast_tfds arena file (wrong magic bytes)")
    if version != FORMAT_VERSION:
        raise BadFile(f"format version {version}, this fast_tfds reads {FORMAT_VERSION}")
    if length > _MAX_JSON:
        raise BadFile("damaged header (its length is implausible)")
    text = os.pread(fd, length, _FIXED.size)
    if len(text) != length or hashlib.sha256(text).digest() != digest:
        raise BadFile("damaged header (its checksum does not match)")
    try:
        record = json.loads(text)
        checksums = {k: int(v, 16) for k, v in record.pop("data_checksum").items()}
        columns = tuple(
            ColumnLayout(**{**c, "shape": tuple(c["shape"]), "dtype": np.dtype(c["dtype"])})
            for c in record.pop("columns")
        )
        layout = Layout(**record, columns=columns)
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise BadFile(f"damaged header ({err})") from None
    return Header(layout, checksums)


def column_checksum(rows: np.ndarray) -> int:
    """The sum, mod 2^64, of the machine words of whole rows ([n, ...], C-contiguous).

    Words as wide as the row's size allows (8, 4, 2 or 1 bytes), so that rows summed
    in any grouping give the same total. Any single flipped bit changes it.
    """
    if rows.size == 0:
        return 0
    row_bytes = rows.nbytes // len(rows)
    word = next(w for w in (8, 4, 2, 1) if row_bytes % w == 0)
    words = np.ascontiguousarray(rows).reshape(-1).view(f"<u{word}")
    if word == 1:
        return _byte_sum(words)
    return int(words.sum(dtype=np.uint64))


# Bytes per OpenCV sum: exact in its float64 total (2^28 * 255 < 2^53).
_BYTE_BLOCK = 1 << 28
_BYTE_COLUMNS = 1 << 12


def _byte_sum(data: np.ndarray) -> int:
    """The sum of uint8 `data` mod 2^64, as numpy's `sum(dtype=uint64)` gives it, by
    OpenCV: the picture store's byte column (a gigabyte or more) is summed twice when its
    file is written, in a thread beside the epoch, and numpy widens every byte to 64 bits
    first (about 3.4 GB/s here, against 12 GB/s)."""
    import cv2  # noqa: PLC0415  (the package's own dependency; only a byte column needs it)

    total = 0
    for start in range(0, data.size, _BYTE_BLOCK):
        part = data[start : start + _BYTE_BLOCK]
        body = len(part) - len(part) % _BYTE_COLUMNS
        if body:
            total += int(cv2.sumElems(part[:body].reshape(-1, _BYTE_COLUMNS))[0])
        total += int(part[body:].sum(dtype=np.uint64))
    return total & 0xFFFF_FFFF_FFFF_FFFF


def _page_up(n: int) -> int:
    return -(-n // mmap.PAGESIZE) * mmap.PAGESIZE


# -- the files in a folder ---------------------------------------------------------


def lock_path(path: Path) -> Path:
    """The key's lock file of the persistent arena at `path`."""
    return path.with_name(path.name.removesuffix(SUFFIX) + LOCK_SUFFIX)


def _entries(folder: str, names: list[str]) -> list[housekeeping.Entry]:
    """The persistent arenas and fill leftovers among `names`."""
    paths = [Path(folder) / name for name in names if name.endswith(SUFFIX) or TEMP_MARK in name]
    return [entry for entry in map(_describe, paths) if entry is not None]


PERSISTENT = housekeeping.Kind("persistent cache", _entries)


def _describe(path: Path) -> housekeeping.Entry | None:
    """A complete file (damaged or stale, maybe), or a fill's temporary file: being
    written, or left by a fill that stopped."""
    temp = TEMP_MARK in path.name
    try:
        stat = path.stat()
        key, problem = ({}, None) if temp else _key_of(path, stat.st_size)
    except OSError:
        return None
    # Mapped by a running process (a shared lock), or filled (exclusive).
    held = housekeeping.holder(path, readers_too=True, recorded=False)
    state = "persistent, in use" if held else "persistent"
    spent = None
    if temp:
        spent = housekeeping.UNFINISHED
        state = f"persistent, {'being written' if held else f'{spent} (left by a stopped fill)'}"
    elif problem:
        spent, state = "damaged", f"{state}, damaged ({problem})"
    elif fingerprint.changed(key.get("shards") or ()):
        spent, state = "stale", f"{state}, stale (its dataset was rebuilt or removed)"
    return housekeeping.Entry(
        where=str(path),
        what=f"{key.get('dataset') or '?'} {key.get('split') or '?'}",
        size=stat.st_blocks * 512,
        last_used=stat.st_mtime if temp else max(stat.st_atime, stat.st_mtime),
        state=state,
        holder=held,
        spent=spent,
        remove=functools.partial(_remove, path),
    )


def _key_of(path: Path, size: int) -> tuple[dict, str | None]:
    """(the key a complete file's header holds, None), or ({}, what is wrong with it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        layout = read_header(fd).layout
    except BadFile as err:
        return {}, str(err)
    finally:
        os.close(fd)
    return layout.key, None if layout.file_size == size else "truncated"


def _remove(path: Path) -> str | None:
    """Removes a persistent arena (and its lock file) unless a process uses it (then: why
    it is kept). The exclusive lock is taken first, so a reader that opens it meanwhile
    waits and then finds it gone."""
    kept = housekeeping.remove_unless_locked(path, [path])
    lock = lock_path(path)
    if kept is None and path.name.endswith(SUFFIX) and housekeeping.holder(lock) is None:
        lock.unlink(missing_ok=True)
    return kept
