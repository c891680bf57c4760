"""`persist=True` with `augment=`: the augmentation cache's pictures and labels in one
persistent file, across real processes and across the two back ends. A later run, of
either back end, serves every example exactly once per epoch from the file, decoding
nothing and reading no shard (they are zeroed), with the windows and pixels of the run
that filled it; a killed fill, a full disk, a damaged file, a rebuilt dataset, two fills
at once and a read-only folder each end in the right pixels and one clear line;
`fast-tfds cache list|clean` show and remove the file, never one in use; the loader's
worker processes map a complete file and never fill one.

The build holds TFRecord and ArrayRecord files side by side (`tfds convert_format`), as
a folder that serves both back ends does. What each epoch must be comes from this
process's own in-memory cache (persist=False) of the same seed: (pixel digest, label)
pairs, counted. Every wait on a child process has a timeout (`tests/children.py`).
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tensorflow as tf

import cats_vs_dogs_fast
from fast_tfds import Augment
from fast_tfds.cache import persistent_format
from tests.children import TIMEOUT_S, Child
from tests.helpers import child_env
from tests.pairs import Output, Truth, digest
from tests.reliability.test_persistent_cache import (
    COUNT_DECODES,
    fast_tfds_cache,
    line_with,
    read_only_mount,
)

pytest.importorskip("grain")

SEED = 7
EPOCHS = 2
# "plain": no augment=, the plain read, whose arena is the picture store at the output size.
AUGMENTS = {"rrc": Augment(), "none": Augment(crop=None, flip=False), "plain": None}

# argv: back end ("tf" or "loader"), data_dir, cache_dir, epochs, augment (a key of
# AUGMENTS), mode ("run", or "pause": after the first batch print "paused" and wait for
# a line on stdin), seed, the loader's worker processes. One JSON line per epoch: its
# (digest, label) pairs and the calls to the decoder so far (this process's).
_CHILD = (
    textwrap.dedent(
        """
    import hashlib, json, sys
    import numpy as np
    """
    )
    + COUNT_DECODES
    + textwrap.dedent(
        """
    import cats_vs_dogs_fast
    from fast_tfds import Augment

    backend, data_dir, cache_dir, epochs, crop, mode, seed, workers = sys.argv[1:9]
    augment = {"rrc": Augment(), "none": Augment(crop=None, flip=False), "plain": None}[crop]
    common = dict(data_dir=data_dir, download_and_prepare=False, batch_size=8, seed=int(seed),
                  augment=augment, cache=True, persist=True, cache_dir=cache_dir)
    if backend == "tf":
        import tensorflow as tf
        ds = cats_vs_dogs_fast.as_fast_dataset("train", dtype=tf.uint8, **common)
        def batches():
            for images, labels in ds:
                yield images.numpy(), labels.numpy()
    else:
        loader = cats_vs_dogs_fast.as_fast_loader(
            "train", num_threads=2, num_workers=int(workers), **common)
        def batches():
            yield from loader
    for epoch in range(int(epochs)):
        pairs = []
        for i, (images, labels) in enumerate(batches()):
            for image, label in zip(images, labels):
                pairs.append([hashlib.sha1(np.ascontiguousarray(image).tobytes()).hexdigest(),
                              int(label)])
            if epoch == 0 and i == 0 and mode == "pause":
                print("paused", flush=True)
                sys.stdin.readline()
        print(json.dumps({"epoch": epoch, "pairs": pairs, "decoded": calls[0]}), flush=True)
    """
    )
)


def version_dir(data_dir: Path) -> Path:
    return data_dir / "cats_vs_dogs_fast" / "224" / "1.0.0"


@pytest.fixture
def data_dir(cats_both_formats_dir, tmp_path) -> Path:
    """The test's own copy of the build (times kept): it may change its shards."""
    copy = tmp_path / "data"
    shutil.copytree(cats_both_formats_dir / "cats_vs_dogs_fast", copy / "cats_vs_dogs_fast")
    return copy


@pytest.fixture(scope="module")
def expected(cats_both_formats_dir) -> dict[str, list[collections.Counter]]:
    """Per augment: each epoch's (digest, label) pairs from an in-memory cache of the
    same seed in this process (persist=False)."""
    out = {}
    for name, augment in AUGMENTS.items():
        ds = cats_vs_dogs_fast.as_fast_dataset(
            "train",
            data_dir=cats_both_formats_dir,
            download_and_prepare=False,
            batch_size=8,
            seed=SEED,
            dtype=tf.uint8,
            augment=augment,
            cache=True,
        )
        out[name] = [
            collections.Counter(
                (digest(image), int(label))
                for images, labels in ds
                for image, label in zip(images.numpy(), labels.numpy(), strict=True)
            )
            for _ in range(EPOCHS)
        ]
    return out


def run(
    backend, data_dir, cache, *, epochs=EPOCHS, augment="rrc", workers=0, fails=False
) -> tuple[list[dict], str]:
    """A reader in a child process: (its epochs as printed, its stderr)."""
    child = start(
        backend, data_dir, cache, epochs=epochs, augment=augment, mode="run", workers=workers
    )
    out, err = child.communicate(timeout=TIMEOUT_S)
    assert (child.returncode != 0) == fails, err[-3000:]
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")], err


def start(
    backend, data_dir, cache, *, epochs=EPOCHS, augment="rrc", mode="pause", workers=0
) -> Child:
    args = [backend, data_dir, cache, str(epochs), augment, mode, str(SEED), str(workers)]
    return Child(
        [sys.executable, "-c", _CHILD, *map(os.fspath, args)],
        stdin=subprocess.PIPE,
        env=child_env(),
    )


def counted(epoch: dict) -> collections.Counter:
    return collections.Counter(tuple(pair) for pair in epoch["pairs"])


def picture_files(cache: Path) -> list[Path]:
    return sorted(cache.glob(f"*{persistent_format.SUFFIX}"))


def temp_files(cache: Path) -> list[Path]:
    return sorted(p for p in cache.iterdir() if persistent_format.TEMP_MARK in p.name)


def lines(stderr: str, text: str) -> list[str]:
    return [line for line in stderr.splitlines() if text in line]


def zero_the_shards(data_dir: Path) -> None:
    """Every shard file of both formats overwritten with zeros of its size, its times kept:
    the key still matches, and any record read now would fail to parse."""
    shards = sorted(version_dir(data_dir).glob("*-train.*"))
    assert len(shards) >= 4
    for shard in shards:
        stat = shard.stat()
        shard.write_bytes(bytes(stat.st_size))
        os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def fill(backend, data_dir, cache, want, augment="rrc") -> Path:
    """Fills the file in a child process (its epochs checked): the file."""
    epochs, stderr = run(backend, data_dir, cache, augment=augment)
    assert [counted(e) for e in epochs] == want
    assert epochs[0]["decoded"] > 0
    assert len(lines(stderr, "persist=True: writing the decoded cache")) == 1, stderr
    (path,) = picture_files(cache)
    return path


# -- the tests ---------------------------------------------------------------------


@pytest.mark.parametrize("augment", list(AUGMENTS))
def test_a_second_process_serves_every_example_once_from_the_file_without_decoding(
    cats_both_formats_dir, data_dir, tmp_path, expected, augment
):
    want = expected[augment]
    assert want[0] != want[1] or augment != "rrc"  # new windows every epoch
    cache = tmp_path / "cache"
    path = fill("tf", data_dir, cache, want, augment)
    zero_the_shards(data_dir)
    epochs, stderr = run("tf", data_dir, cache, augment=augment)
    assert [counted(e) for e in epochs] == want
    assert [e["decoded"] for e in epochs] == [0, 0]
    assert not lines(stderr, "fast_tfds: persist=True"), stderr
    assert picture_files(cache) == [path] and not temp_files(cache)
    if augment != "rrc":  # The stored pixels: each example once, with its own label.
        truth = Truth.of(cats_both_formats_dir)  # this test's copy is zeroed now
        for epoch in epochs:
            truth.check([Output(d, label) for d, label in epoch["pairs"]])


@pytest.mark.parametrize("filler, server", [("tf", "loader"), ("loader", "tf")])
def test_either_back_end_serves_the_file_the_other_filled(
    data_dir, tmp_path, expected, filler, server
):
    want = expected["rrc"]
    cache = tmp_path / "cache"
    path = fill(filler, data_dir, cache, want)
    zero_the_shards(data_dir)
    epochs, stderr = run(server, data_dir, cache)
    assert [counted(e) for e in epochs] == want  # the same windows, pixels and labels
    assert [e["decoded"] for e in epochs] == [0, 0]
    assert not lines(stderr, "fast_tfds: persist=True"), stderr
    assert picture_files(cache) == [path]


@pytest.mark.parametrize(
    "filler, filled, server, served",
    [("tf", "plain", "loader", "plain"), ("loader", "plain", "tf", "none")],
)
def test_plain_and_uncropped_reads_of_either_back_end_share_one_file(
    data_dir, tmp_path, expected, filler, filled, server, served
):
    # One key for every persistent cache: the tf.data arena of a plain read, the loader's
    # plain cache and an Augment(crop=None) read all store the pictures at the output
    # size, so whichever fills the file, the others serve it without decoding.
    want = expected["none"]
    assert expected["plain"] == want  # the same pixels and labels, read either way
    cache = tmp_path / "cache"
    path = fill(filler, data_dir, cache, want, filled)
    zero_the_shards(data_dir)
    epochs, stderr = run(server, data_dir, cache, augment=served)
    assert [counted(e) for e in epochs] == want
    assert [e["decoded"] for e in epochs] == [0, 0]
    assert not lines(stderr, "fast_tfds: persist=True"), stderr
    assert picture_files(cache) == [path]


@pytest.mark.parametrize("damage", ["truncated", "header byte flipped"])
def test_a_damaged_file_is_found_at_open_said_in_one_line_and_refilled(
    data_dir, tmp_path, expected, damage
):
    want = expected["rrc"]
    cache = tmp_path / "cache"
    path = fill("loader", data_dir, cache, want)
    data = bytearray(path.read_bytes())
    if damage == "truncated":
        path.write_bytes(bytes(data[: len(data) - 1000]))
        said = "is truncated"
    else:
        data[100] ^= 0x04  # in the JSON of the header
        path.write_bytes(bytes(data))
        said = "cannot be trusted: damaged header"
    epochs, stderr = run("tf", data_dir, cache)
    assert [counted(e) for e in epochs] == want
    assert len(lines(stderr, said)) == 1 and len(lines(stderr, "filling it again")) == 1, stderr
    assert epochs[0]["decoded"] > 0
    assert picture_files(cache) == [path] and path.stat().st_size == len(data)
    epochs, _ = run("loader", data_dir, cache, epochs=1)
    assert counted(epochs[0]) == want[0] and epochs[0]["decoded"] == 0


def test_a_rebuilt_dataset_gets_a_new_key_even_for_the_other_format(data_dir, tmp_path, expected):
    want = expected["rrc"]
    cache = tmp_path / "cache"
    old = fill("tf", data_dir, cache, want)
    # An ArrayRecord shard rewritten (a new modification time): the tf.data reader does not
    # read it, and still its file no longer matches the build.
    shard = sorted(version_dir(data_dir).glob("*.array_record-*"))[0]
    stat = shard.stat()
    shard.write_bytes(shard.read_bytes())
    os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    epochs, stderr = run("tf", data_dir, cache)
    assert [counted(e) for e in epochs] == want
    assert epochs[0]["decoded"] > 0
    assert len(lines(stderr, "writing the decoded cache")) == 1, stderr
    assert len(picture_files(cache)) == 2 and old.exists()
    listed = fast_tfds_cache("list", cache)
    assert line_with(listed, old).startswith(
        "persistent, stale (its dataset was rebuilt or removed)"
    )
    cleaned = fast_tfds_cache("clean", cache)
    assert f"removed  {old} (stale, " in cleaned and not old.exists(), cleaned


def test_two_fills_at_once_one_writes_the_other_caches_in_memory(data_dir, tmp_path, expected):
    want = expected["rrc"]
    cache = tmp_path / "cache"
    first = start("tf", data_dir, cache)
    try:
        assert (
            first.line(timeout=TIMEOUT_S).strip() == "paused"
        )  # it holds the key's lock, mid-fill
        epochs, stderr = run("loader", data_dir, cache)
        assert [counted(e) for e in epochs] == want
        said = lines(stderr, "another process (pid ")
        assert len(said) == 1 and f"pid {first.pid})" in said[0], stderr
        assert picture_files(cache) == []
        out, err = first.communicate("go\n", timeout=TIMEOUT_S)
        assert first.returncode == 0, err[-3000:]
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(timeout=TIMEOUT_S)
    printed = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [counted(e) for e in printed] == want
    assert len(picture_files(cache)) == 1 and not temp_files(cache)


def test_a_read_only_folder_is_served_without_writing(data_dir, tmp_path, expected):
    want = expected["rrc"]
    team = tmp_path / "team"
    fill("tf", data_dir, team, want)
    mounted = tmp_path / "mounted"
    read_only_mount(team, mounted)
    try:
        before = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in team.iterdir())
        epochs, stderr = run("loader", data_dir, mounted)
        assert [counted(e) for e in epochs] == want
        assert [e["decoded"] for e in epochs] == [0, 0]
        assert not lines(stderr, "fast_tfds: persist=True"), stderr
        after = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in team.iterdir())
        assert after == before
    finally:
        subprocess.run(["umount", os.fspath(mounted)], timeout=60, check=True)


def test_cache_list_and_clean_show_and_remove_picture_files_never_one_in_use(
    data_dir, tmp_path, expected
):
    want = expected["rrc"]
    cache = tmp_path / "cache"
    path = fill("loader", data_dir, cache, want)
    line = line_with(fast_tfds_cache("list", cache), path)
    assert line.startswith("persistent ") and " cats_vs_dogs_fast/224/1.0.0 train " in line
    reader = start("tf", data_dir, cache)  # serves from the file, holds it
    try:
        assert reader.line(timeout=TIMEOUT_S).strip() == "paused"
        assert line_with(fast_tfds_cache("list", cache), path).startswith("persistent, in use ")
        cleaned = fast_tfds_cache("clean", cache, "--all")
        assert f"kept     {path} (in use by a running process)" in cleaned, cleaned
        assert path.exists()
        out, err = reader.communicate("go\n", timeout=TIMEOUT_S)
        assert reader.returncode == 0, err[-3000:]
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait(timeout=TIMEOUT_S)
    printed = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [counted(e) for e in printed] == want and printed[-1]["decoded"] == 0
    cleaned = fast_tfds_cache("clean", cache, "--all")
    assert f"removed  {path} (--all, " in cleaned and not path.exists(), cleaned


def test_loader_workers_map_a_complete_file_and_never_fill_one(data_dir, tmp_path, expected):
    want = expected["rrc"]
    cache = tmp_path / "cache"
    _, stderr = run("loader", data_dir, cache, workers=2, fails=True)
    said = lines(stderr, "ValueError: persist=True with worker processes")
    assert len(said) == 1 and "is not there; workers only map a complete file" in said[0]
    assert not picture_files(cache)
    path = fill("tf", data_dir, cache, want)
    zero_the_shards(data_dir)  # a worker that read a record would fail
    epochs, stderr = run("loader", data_dir, cache, workers=2)
    assert [counted(e) for e in epochs] == want
    assert [e["decoded"] for e in epochs] == [0, 0]  # this process's; its workers read none
    assert not lines(stderr, "fast_tfds: persist=True"), stderr
    assert picture_files(cache) == [path] and not temp_files(cache)


def test_a_fill_killed_midway_leaves_nothing_trusted_and_the_next_run_fills(
    data_dir, tmp_path, expected
):
    want = expected["rrc"]
    cache = tmp_path / "cache"
    child = start("tf", data_dir, cache)
    try:
        assert child.line(timeout=TIMEOUT_S).strip() == "paused"  # mid-fill
    finally:
        child.kill()
        child.wait(timeout=TIMEOUT_S)
    assert picture_files(cache) == []
    (left,) = temp_files(cache)  # its lock died with it
    epochs, stderr = run("loader", data_dir, cache)
    assert [counted(e) for e in epochs] == want and epochs[0]["decoded"] > 0
    assert not left.exists() and not temp_files(cache) and len(picture_files(cache)) == 1
    epochs, _ = run("tf", data_dir, cache, epochs=1)
    assert counted(epochs[0]) == want[0] and epochs[0]["decoded"] == 0


def test_a_disk_too_small_caches_in_memory_with_one_line(data_dir, tmp_path, expected):
    cache = tmp_path / "small"
    cache.mkdir()
    # The pictures take about 8 MiB: a 2 MiB file system cannot hold them.
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", os.fspath(cache)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        epochs, stderr = run("loader", data_dir, cache)
        assert [counted(e) for e in epochs] == expected["rrc"]
        said = lines(stderr, "persist=True: no room for the ")
        assert len(said) == 1 and "caching it in memory for this run only" in said[0], stderr
        assert picture_files(cache) == [] and temp_files(cache) == []
    finally:
        subprocess.run(["umount", os.fspath(cache)], timeout=60, check=True)
