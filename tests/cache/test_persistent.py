"""The persistent arena's file without TensorFlow: fill, header checks, the key's lock.

A table of fixed columns (`Store`) is filled with a `persisted.FileFill` backing as the
reader fills it (batches written at their rows, in any order), then opened again as
another run would open it. Every byte of the header is flipped in turn: each flip is
caught at open.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

import numpy as np
import pytest

from fast_tfds.cache import housekeeping, persisted, persistent_format
from fast_tfds.cache.persistent_format import FORMAT_VERSION, read_header
from fast_tfds.cache.pictures import FEATURE
from fast_tfds.cache.store import Store

N = 37
KEY = {"dataset": "toy/1/1.0.0", "split": "train", "shards": []}
COLUMNS = {"image": ((5, 6, 3), np.uint8), "label": ((), np.int64)}


def rows() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "image": rng.integers(0, 256, (N, 5, 6, 3), dtype=np.uint8),
        "label": rng.integers(0, 1000, N, dtype=np.int64),
    }


def open_toy(folder: Path, key=KEY, *, read_ahead: bool = False) -> persisted.Stored:
    """The file of `key` opened as the fallback's arena of examples opens it (a table of
    COLUMNS, `fill`, lays a new file out)."""
    return persisted.open_or_plan(folder, key, lambda: (N, read_ahead), what=f"toy {key['split']}")


def fill(
    folder: Path, key=KEY, *, stop_after: int | None = None, read_ahead: bool = False
) -> persisted.Stored:
    """Fills the file of `key` as the reader does: blocks of 8 written out of order.
    `read_ahead`: as over the memory budget, the fill writes the file's mapping."""
    opened = open_toy(folder, key, read_ahead=read_ahead)
    assert not opened.filled and opened.backing is not None
    arena = Store(N, COLUMNS, None, opened.backing)
    data = rows()
    filled = arena.arrays
    starts = list(range(0, N, 8))[::-1]
    for i, start in enumerate(starts):
        if stop_after is not None and i == stop_after:
            return opened
        stop = min(start + 8, N)
        arena.write(np.arange(start, stop), *(data[k][start:stop] for k in arena.keys))
    assert arena.filled
    opened.backing.writing.join(timeout=60)
    if not read_ahead:  # Filled in memory, then served from the file's mapping.
        assert arena.arrays is not filled
        for k in arena.keys:
            np.testing.assert_array_equal(arena.features[k], data[k])
    return opened


def served(folder: Path, key=KEY) -> dict[str, np.ndarray] | None:
    """The rows of the file of `key`, by feature name, if it is served."""
    opened = open_toy(folder, key)
    return {k: opened.backing.rows[FEATURE + k] for k in COLUMNS} if opened.filled else None


@pytest.mark.parametrize("posix_fallocate", [True, False], ids=["posix_fallocate", "without"])
@pytest.mark.parametrize("read_ahead", [False, True], ids=["in memory", "over budget"])
def test_a_filled_file_is_served_with_the_rows_written(
    read_ahead, posix_fallocate, tmp_path, monkeypatch
):
    if not posix_fallocate:  # As on macOS: core.platform's fallback reserves the file.
        monkeypatch.delattr(os, "posix_fallocate", raising=False)
    opened = fill(tmp_path, read_ahead=read_ahead)
    assert type(opened.backing) is persisted.FileFill
    assert opened.backing.reads_ahead is read_ahead
    assert opened.backing.persisted and opened.path.exists()
    got = served(tmp_path)
    assert got is not None
    for k, want in rows().items():
        np.testing.assert_array_equal(got[k], want)
    header = read_header(os.open(opened.path, os.O_RDONLY))
    assert header.layout.key == KEY and header.layout.num_examples == N
    assert all(c.offset % 4096 == 0 for c in header.layout.columns)
    assert [p.name for p in tmp_path.iterdir() if persistent_format.TEMP_MARK in p.name] == []


def test_every_header_byte_flipped_is_caught_and_refilled(tmp_path, caplog):
    path = fill(tmp_path).path
    original = path.read_bytes()
    fd = os.open(path, os.O_RDONLY)
    length = int.from_bytes(original[20:24], "little")
    os.close(fd)
    header_end = 56 + length
    for position in range(header_end):
        damaged = bytearray(original)
        damaged[position] ^= 0x01
        path.write_bytes(bytes(damaged))
        opened = open_toy(tmp_path)
        assert not opened.filled, f"a flipped byte at {position} was not caught"
        assert opened.backing is not None  # refilled
        opened.backing.close()
        path.write_bytes(original)
    assert served(tmp_path) is not None


def test_a_truncated_file_is_refilled(tmp_path, caplog):
    path = fill(tmp_path).path
    size = path.stat().st_size
    os.truncate(path, size - 4096)
    opened = open_toy(tmp_path)
    assert not opened.filled and opened.backing is not None
    assert any("is truncated" in r.getMessage() for r in caplog.records), caplog.text
    opened.backing.close()


def test_another_key_gets_another_file_and_a_renamed_file_is_refused(tmp_path, caplog):
    path = fill(tmp_path).path
    other = {**KEY, "split": "test"}
    # A file renamed to another key's name: the key in its header says so.
    target = tmp_path / persisted.file_name(other)
    assert target != path
    os.replace(path, target)
    opened = open_toy(tmp_path, other)
    assert not opened.filled
    assert any("was made from other inputs" in r.getMessage() for r in caplog.records)
    opened.backing.close()


def test_a_lock_that_fails_otherwise_is_no_holder(tmp_path, monkeypatch, caplog):
    """Only a lock held elsewhere (BlockingIOError) is "another process": any other error
    of `flock` (a filesystem without locks: ENOLCK) propagates, its descriptor closed,
    and the persistent cache says so in its one line instead of naming a holder."""
    lock = tmp_path / "toy.arena-lock"

    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    open_fds = len(os.listdir("/proc/self/fd"))
    with pytest.raises(OSError) as raised:
        housekeeping.take_lock(lock)
    assert raised.value.errno == errno.ENOLCK
    assert len(os.listdir("/proc/self/fd")) == open_fds
    opened = open_toy(tmp_path)
    assert opened.backing is None
    said = [r.getMessage() for r in caplog.records if "persist=True" in r.getMessage()]
    assert len(said) == 1 and os.strerror(errno.ENOLCK) in said[0], said
    assert "another process" not in said[0]


def test_an_unfinished_fill_leaves_nothing_trusted(tmp_path):
    opened = fill(tmp_path, stop_after=2)
    temps = [p for p in tmp_path.iterdir() if persistent_format.TEMP_MARK in p.name]
    assert len(temps) == 1 and not opened.path.exists()
    # While it runs, a second filler finds the key taken and caches in memory.
    second = open_toy(tmp_path)
    assert second.backing is None
    opened.backing.close()
    assert not temps[0].exists() and not opened.path.exists()
    assert fill(tmp_path).backing.persisted


def test_the_format_version_is_in_the_header(tmp_path):
    path = fill(tmp_path).path
    assert int.from_bytes(path.read_bytes()[16:20], "little") == FORMAT_VERSION


@pytest.mark.parametrize("columns", [{"x": ((3,), np.uint8)}, {"x": ((), np.float32)}])
def test_checksums_do_not_depend_on_how_rows_are_grouped(columns):
    from fast_tfds.cache.persistent_format import column_checksum

    shape, dtype = columns["x"]
    data = (np.arange(N * int(np.prod(shape))) * 7919 % 251).astype(dtype).reshape(N, *shape)
    total = 0
    for start in (30, 0, 10, 20):
        total = (total + column_checksum(data[start : start + 10])) % 2**64
    assert total == column_checksum(data)
    flipped = data.copy()
    flipped.reshape(-1).view(np.uint8)[5] ^= 0x10
    assert column_checksum(flipped) != column_checksum(data)


def test_columns_of_their_own_row_counts_planned_only_to_fill(tmp_path):
    """`open_or_plan`: the layout is planned only when filling (here a byte column with a
    row count of its own, beside per-example columns); a good file is served unplanned."""
    key = {**KEY, "kind": "pictures"}
    data = {"bytes": np.arange(1000, dtype=np.uint8) % 251, "label": np.arange(N, dtype=np.int64)}

    def plan():
        return N, False

    opened = persisted.open_or_plan(tmp_path, key, plan, what="toy pictures")
    fill = opened.backing
    assert fill.layout is None  # Laid out as the cache asks for its columns.
    arrays = fill.columns({"bytes": ((1000,), np.uint8), "label": ((N,), np.int64)})
    assert {k: a.shape for k, a in arrays.items()} == {"bytes": (1000,), "label": (N,)}
    for k, a in arrays.items():
        a[...] = data[k]
    fill.filled(arrays, lambda old, new: False)
    fill.writing.join(timeout=60)
    assert fill.persisted
    header = read_header(os.open(opened.path, os.O_RDONLY))
    assert {c.name: c.rows for c in header.layout.columns} == {"bytes": 1000, "label": N}

    def never():
        raise AssertionError("a good file is served without a plan")

    got = persisted.open_or_plan(tmp_path, key, never, what="toy pictures").backing.rows
    for k, want in data.items():
        np.testing.assert_array_equal(got[k], want)


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 4097, 3 * 4096 + 5, 40_001])
def test_a_byte_columns_checksum_is_numpys_sum(size, monkeypatch):
    """Byte columns (the picture store's pixels) are summed by OpenCV in blocks; the
    total is numpy's, whatever the size and the blocks (made small here to cross them)."""
    from fast_tfds.cache import persistent_format

    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
    want = int(data.sum(dtype=np.uint64))
    assert persistent_format.column_checksum(data) == want
    monkeypatch.setattr(persistent_format, "_BYTE_BLOCK", 8192)
    monkeypatch.setattr(persistent_format, "_BYTE_COLUMNS", 64)
    assert persistent_format.column_checksum(data) == want
    assert persistent_format.column_checksum(data.reshape(-1, 1)) == want
