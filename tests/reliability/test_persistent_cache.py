"""`persist=True` across real processes: a later run serves every (image, label) pair of
the split from the file, without decoding and without reading a shard; a killed fill,
a full disk, a damaged or stale file, two fills at once and a read-only folder each end
in the right pairs and one clear line; `fast-tfds cache list|clean` show and remove the
files, never one in use.

Each test works on its own copy of the tiny build, and compares with TFDS's own reader
(`builder.as_dataset`) of that copy: pairs of (pixel digest, label), counted, per epoch.
Every wait on a child process has a timeout.
"""

from __future__ import annotations

import collections
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import tensorflow_datasets as tfds

from fast_tfds.cache import persistent_format
from tests.helpers import child_env
from tests.read.reading import digest

TIMEOUT = 300
BATCH = 8

# Child-script lines that count this process's calls to our decoder in `calls[0]`.
COUNT_DECODES = textwrap.dedent(
    """
    from fast_tfds.core import jpeg_blocks

    calls = [0]
    def counted(fn):
        def wrapper(*args, **kwargs):
            calls[0] += 1
            return fn(*args, **kwargs)
        return wrapper
    for name in ("decode_jpeg_block_into", "decode_resized_block_into", "decode_jpeg_block",
                 "decode_resized_block", "decode_resized_into"):
        setattr(jpeg_blocks, name, counted(getattr(jpeg_blocks, name)))
    """
)

# argv: data_dir, cache_dir, epochs, then "run", "pause" (after the first batch, print
# "paused" and wait for a line on stdin) or "kill" (SIGKILL itself after the first batch).
# Prints one JSON line per epoch: its pairs and the decoder's calls so far.
_READER = (
    textwrap.dedent(
        """
    import hashlib, json, os, signal, sys
    import numpy as np
    import tensorflow as tf
    import cats_vs_dogs_fast
    """
    )
    + COUNT_DECODES
    + textwrap.dedent(
        """

    data_dir, cache_dir, epochs, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    ds = cats_vs_dogs_fast.as_fast_dataset(
        "train", data_dir=data_dir, download_and_prepare=False, batch_size=8,
        dtype=tf.uint8, persist=True, cache_dir=cache_dir)
    for epoch in range(epochs):
        pairs = []
        for i, (images, labels) in enumerate(ds):
            for image, label in zip(images.numpy(), labels.numpy()):
                pairs.append([hashlib.sha1(np.ascontiguousarray(image).tobytes()).hexdigest(),
                              int(label)])
            if epoch == 0 and i == 0 and mode == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if epoch == 0 and i == 0 and mode == "pause":
                print("paused", flush=True)
                sys.stdin.readline()
        print(json.dumps({"epoch": epoch, "pairs": pairs, "decoded": calls[0]}), flush=True)
    """
    )
)


@pytest.fixture
def data_dir(cats_data_dir, tmp_path) -> Path:
    """A copy of the tiny build (config 224), times kept: each test may change its shards."""
    copy = tmp_path / "data"
    shutil.copytree(cats_data_dir / "cats_vs_dogs_fast" / "224", copy / "cats_vs_dogs_fast" / "224")
    return copy


@pytest.fixture(scope="module")
def shared(cats_data_dir, tmp_path_factory) -> tuple[Path, Path, collections.Counter]:
    """(data_dir, cache, truth): a copy of the build that no test changes, and its
    persistent file, filled once; tests that change the file work on a copy of it."""
    root = tmp_path_factory.mktemp("persist-shared")
    data = root / "data"
    shutil.copytree(cats_data_dir / "cats_vs_dogs_fast" / "224", data / "cats_vs_dogs_fast" / "224")
    expected, cache = truth(data), root / "cache"
    fill(data, cache, expected)
    return data, cache, expected


def copy_of(cache: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A test's own copy of the shared cache folder: (folder, its file)."""
    mine = tmp_path / "cache"
    shutil.copytree(cache, mine)
    (path,) = arena_files(mine)
    return mine, path


def truth(data_dir: Path) -> collections.Counter:
    """(pixel digest, label) of every example, counted, through TFDS's own reader."""
    builder = tfds.builder("cats_vs_dogs_fast", config="224", data_dir=data_dir)
    return collections.Counter(
        (digest(ex["image"].numpy()), int(ex["label"])) for ex in builder.as_dataset("train")
    )


def run_reader(data_dir, cache, epochs=2, mode="run", *, hide=(), **env) -> tuple[list[dict], str]:
    """A reader in a child process: (its epochs as printed, its stderr). `hide`: names
    of `os` functions the child runs without (as on a platform that lacks them)."""
    script = "".join(f"import os; del os.{name}\n" for name in hide) + _READER
    done = subprocess.run(
        [sys.executable, "-c", script, os.fspath(data_dir), os.fspath(cache), str(epochs), mode],
        capture_output=True,
        text=True,
        env=child_env(**env),
        timeout=TIMEOUT,
    )
    if mode == "kill":
        assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]
        return [], done.stderr
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines()], done.stderr


def counted(epoch: dict) -> collections.Counter:
    return collections.Counter(tuple(pair) for pair in epoch["pairs"])


def arena_files(cache: Path) -> list[Path]:
    return sorted(cache.glob(f"*{persistent_format.SUFFIX}"))


def temp_files(cache: Path) -> list[Path]:
    return sorted(p for p in cache.iterdir() if persistent_format.TEMP_MARK in p.name)


def log_lines(stderr: str, text: str) -> list[str]:
    return [line for line in stderr.splitlines() if text in line]


def fill(data_dir, cache, expected):
    """Fills the file in one process (2 epochs, both checked): (the file, its stderr)."""
    epochs, stderr = run_reader(data_dir, cache)
    assert [counted(e) for e in epochs] == [expected, expected]
    assert len(log_lines(stderr, "persist=True: writing the decoded cache")) == 1, stderr
    (path,) = arena_files(cache)
    return path, stderr


class LineReader:
    """A child's stdout, read line by line with a timeout (a stalled child fails the test)."""

    def __init__(self, child: subprocess.Popen):
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, args=(child.stdout,), daemon=True).start()

    def _pump(self, stream) -> None:
        for line in stream:
            self.lines.put(line)
        self.lines.put("")

    def next(self, timeout: float = TIMEOUT) -> str:
        return self.lines.get(timeout=timeout).strip()


def start_reader(data_dir, cache, epochs=2, mode="pause") -> tuple[subprocess.Popen, LineReader]:
    child = subprocess.Popen(
        [sys.executable, "-c", _READER, os.fspath(data_dir), os.fspath(cache), str(epochs), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    return child, LineReader(child)


def finish(child: subprocess.Popen, reader: LineReader, epochs: int) -> tuple[list[dict], str]:
    child.stdin.write("go\n")
    child.stdin.flush()
    printed = [json.loads(reader.next()) for _ in range(epochs)]
    child.stdin.close()
    child.wait(timeout=TIMEOUT)
    stderr = child.stderr.read()
    assert child.returncode == 0, stderr[-3000:]
    return printed, stderr


# -- the tests ---------------------------------------------------------------------


def test_a_second_process_serves_every_pair_from_the_file_without_decoding(data_dir, tmp_path):
    expected = truth(data_dir)
    cache = tmp_path / "cache"
    path, _ = fill(data_dir, cache, expected)
    # The shards overwritten with zeros of the same size, their times restored: the
    # key still matches, and any record read now would fail to parse or decode.
    shards = sorted((data_dir / "cats_vs_dogs_fast" / "224").rglob("*.tfrecord*"))
    assert shards
    for shard in shards:
        stat = shard.stat()
        shard.write_bytes(bytes(stat.st_size))
        os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    epochs, stderr = run_reader(data_dir, cache, epochs=3)
    assert [counted(e) for e in epochs] == [expected] * 3
    assert [e["decoded"] for e in epochs] == [0, 0, 0]
    assert not log_lines(stderr, "writing the decoded cache"), stderr
    assert arena_files(cache) == [path] and not temp_files(cache)


def test_a_fill_killed_midway_leaves_nothing_trusted_and_the_next_run_fills(data_dir, tmp_path):
    expected = truth(data_dir)
    cache = tmp_path / "cache"
    run_reader(data_dir, cache, mode="kill")
    assert arena_files(cache) == []
    (left,) = temp_files(cache)  # Its lock died with it.
    epochs, stderr = run_reader(data_dir, cache)
    assert [counted(e) for e in epochs] == [expected, expected]
    assert epochs[0]["decoded"] > 0
    assert not left.exists() and not temp_files(cache) and len(arena_files(cache)) == 1
    epochs, _ = run_reader(data_dir, cache, epochs=1)
    assert counted(epochs[0]) == expected and epochs[0]["decoded"] == 0


# Without posix_fallocate (macOS), core.platform's fallback finds the too-small disk.
@pytest.mark.parametrize("hide", [(), ("posix_fallocate",)], ids=["posix_fallocate", "without"])
def test_a_disk_too_small_caches_in_memory_with_one_line(data_dir, tmp_path, hide):
    cache = tmp_path / "small"
    cache.mkdir()
    # The tiny build's cache takes about 8 MiB: a 2 MiB file system cannot hold it.
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", os.fspath(cache)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        (cache / "filler").write_bytes(b"x" * 4096)  # the disk holds other files too
        expected = truth(data_dir)
        epochs, stderr = run_reader(data_dir, cache, hide=hide)
        assert [counted(e) for e in epochs] == [expected, expected]
        lines = log_lines(stderr, "persist=True: no room for the ")
        assert len(lines) == 1 and "caching it in memory for this run only" in lines[0], stderr
        assert arena_files(cache) == [] and temp_files(cache) == []
        assert (cache / "filler").read_bytes() == b"x" * 4096
    finally:
        subprocess.run(["umount", os.fspath(cache)], timeout=60, check=True)


@pytest.mark.parametrize("damage", ["truncated", "header byte flipped"])
def test_a_damaged_file_is_found_at_open_said_in_one_line_and_refilled(damage, shared, tmp_path):
    data_dir, shared_cache, expected = shared
    cache, path = copy_of(shared_cache, tmp_path)
    data = bytearray(path.read_bytes())
    if damage == "truncated":
        path.write_bytes(bytes(data[: len(data) - 1000]))
        said = "is truncated"
    else:
        data[100] ^= 0x04  # in the JSON of the header
        path.write_bytes(bytes(data))
        said = "cannot be trusted: damaged header"
    epochs, stderr = run_reader(data_dir, cache)
    assert [counted(e) for e in epochs] == [expected, expected]
    assert len(log_lines(stderr, said)) == 1 and "filling it again" in stderr, stderr
    assert epochs[0]["decoded"] > 0
    assert arena_files(cache) == [path] and path.stat().st_size == len(data)
    epochs, _ = run_reader(data_dir, cache, epochs=1)
    assert counted(epochs[0]) == expected and epochs[0]["decoded"] == 0


def test_a_rebuilt_dataset_never_gets_the_old_pixels(data_dir, tmp_path):
    expected = truth(data_dir)
    cache = tmp_path / "cache"
    old, _ = fill(data_dir, cache, expected)
    # "Rebuilt": one shard rewritten with the same records, so a new modification time.
    shard = sorted((data_dir / "cats_vs_dogs_fast" / "224").rglob("*.tfrecord*"))[0]
    content = shard.read_bytes()
    stat = shard.stat()
    shard.write_bytes(content)
    os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    epochs, stderr = run_reader(data_dir, cache)
    assert [counted(e) for e in epochs] == [expected, expected]
    assert epochs[0]["decoded"] > 0  # filled again, not served from the old file
    assert len(log_lines(stderr, "writing the decoded cache")) == 1, stderr
    assert len(arena_files(cache)) == 2 and old.exists()
    listed = fast_tfds_cache("list", cache)
    assert "persistent, stale (its dataset was rebuilt or removed)" in line_with(listed, old)
    cleaned = fast_tfds_cache("clean", cache)
    assert f"removed  {old} (stale, " in cleaned and not old.exists(), cleaned
    assert len(arena_files(cache)) == 1


def test_two_fills_at_once_one_writes_the_other_caches_in_memory(data_dir, tmp_path):
    expected = truth(data_dir)
    cache = tmp_path / "cache"
    first, first_out = start_reader(data_dir, cache)
    try:
        assert first_out.next() == "paused"  # it holds the key's lock, mid-fill
        epochs, stderr = run_reader(data_dir, cache)
        assert [counted(e) for e in epochs] == [expected, expected]
        lines = log_lines(stderr, "another process (pid ")
        assert len(lines) == 1 and f"pid {first.pid})" in lines[0], stderr
        assert "this run caches" in lines[0] and arena_files(cache) == []
        printed, _ = finish(first, first_out, 2)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(timeout=TIMEOUT)
    assert [counted(e) for e in printed] == [expected, expected]
    assert len(arena_files(cache)) == 1 and not temp_files(cache)
    epochs, _ = run_reader(data_dir, cache, epochs=1)
    assert counted(epochs[0]) == expected and epochs[0]["decoded"] == 0


def read_only_mount(source: Path, target: Path) -> None:
    target.mkdir()
    steps = (
        ["mount", "--bind", os.fspath(source), os.fspath(target)],
        ["mount", "-o", "remount,bind,ro", os.fspath(target)],
    )
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            if step is steps[1]:
                subprocess.run(["umount", os.fspath(target)], timeout=60)
            pytest.skip(f"cannot make a read-only bind mount here: {done.stderr.strip()}")


def test_a_read_only_folder_is_served_without_writing_and_a_missing_file_is_read(shared, tmp_path):
    data_dir, team, expected = shared
    mounted, empty = tmp_path / "mounted", tmp_path / "empty-ro"
    (tmp_path / "empty").mkdir()
    read_only_mount(team, mounted)
    try:
        before = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in team.iterdir())
        epochs, stderr = run_reader(data_dir, mounted)
        assert [counted(e) for e in epochs] == [expected, expected]
        assert [e["decoded"] for e in epochs] == [0, 0]
        assert not log_lines(stderr, "fast_tfds: persist=True"), stderr
        after = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in team.iterdir())
        assert after == before

        read_only_mount(tmp_path / "empty", empty)
        try:
            epochs, stderr = run_reader(data_dir, empty)
            assert [counted(e) for e in epochs] == [expected, expected]
            lines = log_lines(stderr, "cannot be written (Read-only file system)")
            assert len(lines) == 1 and "without persisting" in lines[0], stderr
            assert list(empty.iterdir()) == []
        finally:
            subprocess.run(["umount", os.fspath(empty)], timeout=60, check=True)
    finally:
        subprocess.run(["umount", os.fspath(mounted)], timeout=60, check=True)


def fast_tfds_cache(*args) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "fast_tfds.cli", "cache", *map(os.fspath, args)],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def line_with(output: str, path: Path) -> str:
    lines = [line for line in output.splitlines() if line.endswith(f"  {path}")]
    assert len(lines) == 1, output
    return lines[0]


def test_cache_list_and_clean_show_and_remove_persistent_caches_never_one_in_use(shared, tmp_path):
    data_dir, shared_cache, expected = shared
    cache, path = copy_of(shared_cache, tmp_path)
    size = path.stat().st_blocks * 512
    listed = fast_tfds_cache("list", cache)
    line = line_with(listed, path)
    assert line.startswith("persistent ") and " cats_vs_dogs_fast/224/1.0.0 train " in line
    assert f"{size / 2**20:,.1f} MiB" in line and " ago " in line, line
    assert f"1 persistent cache(s), {size / 2**20:,.1f} MiB in {cache}" in listed

    reader, out = start_reader(data_dir, cache)  # serves from the file, holds it
    try:
        assert out.next() == "paused"
        listed = fast_tfds_cache("list", cache)
        assert line_with(listed, path).startswith("persistent, in use ")
        cleaned = fast_tfds_cache("clean", cache, "--all")
        assert f"kept     {path} (in use by a running process)" in cleaned, cleaned
        assert path.exists()
        printed, _ = finish(reader, out, 2)
        assert [counted(e) for e in printed] == [expected, expected]
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait(timeout=TIMEOUT)
    cleaned = fast_tfds_cache("clean", cache, "--older-than", "1d")
    assert "Removed 0 persistent cache(s)" in cleaned and path.exists(), cleaned
    dry = fast_tfds_cache("clean", cache, "--all", "--dry-run")
    assert f"would remove {path} (--all, " in dry and path.exists(), dry
    cleaned = fast_tfds_cache("clean", cache, "--all")
    assert f"removed  {path} (--all, " in cleaned and not path.exists(), cleaned
    assert os.fspath(path) not in fast_tfds_cache("list", cache)
