"""What identifies a build's shard files (`fingerprint`), pinned where a user has it on disk.

A persistent file's key and name and a file cache's name made from a fixed build are the
values the code before `fingerprint` made, so every file already on disk keeps its meaning;
and a persistent file that code wrote (`data/`) is served, not filled again. The build
sits at a relative path with fixed sizes and modification times, so that the key (which
names the files) is the same in every run. A bucket's folder is its listing exactly as
gcsfs gives it.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import types
from pathlib import Path

import fsspec
import numpy as np
import pytest

from fast_tfds.cache import fingerprint, housekeeping, persisted
from fast_tfds.cache.store import Store
from fast_tfds.core import jpeg_blocks

DATA = Path(__file__).parent / "data"
MTIME_NS = 1_700_000_000_123_456_789
# The decoder's version the pinned keys were made with: a new decoder rightly changes
# every key, which is not what these pins are about.
DECODER_VERSION = 1
DATASET, SPLIT = "toy/1/1.0.0", "train"
TRAIN = [
    f"toy-train.{fmt}-0000{i}-of-00002" for fmt in ("array_record", "tfrecord") for i in (0, 1)
]
BUCKET_FOLDER = "gs://toy-bucket/data/toy/1/1.0.0"
SIZE, SHORTER_SIDE, N = (16, 16), 18, 3
FEATURES = {"label": ((), np.int64)}

# -- the values the code before `fingerprint` made ----------------------------------
# Computed once at main 49a2ecc (before this module's `fingerprint` existed) from this
# module's build, `key`, `RecordedBucket` and `PINNED_ROWS`; that run also wrote the file in
# data/ (`persisted.open_file` filled with `pinned_pictures` and the labels).

LOCAL_NAME = "toy-1-1.0.0.train.8960b4e1ab2b4d73.arena"
LOCAL_DIGEST = "8960b4e1ab2b4d739034b279c3178a83080a1f6aaa4fa29870e7859d72953c6a"
BUCKET_NAME = "toy-1-1.0.0.train.f3338838616ba3ec.arena"
BUCKET_DIGEST = "f3338838616ba3ecf5e10c69e531584253da0d8e141e4ba4e85197ce28353878"
FILE_CACHE_PREFIX = "cache/run.toy-1-1.0.0.train.a6a4581117a2ed87"


@pytest.fixture
def build(tmp_path, monkeypatch) -> Path:
    """The fixed build, as `build/` in the current folder: one split in two formats, and
    another split."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(jpeg_blocks, "DECODER_VERSION", DECODER_VERSION)
    folder = Path("build")
    folder.mkdir()
    for i, name in enumerate(TRAIN):
        write(folder / name, b"x" * (10 + i))
    write(folder / "toy-test.tfrecord-00000-of-00001", b"y")
    write(folder / "dataset_info.json", b"{}")
    return folder


def write(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    os.utime(path, ns=(MTIME_NS, MTIME_NS))


def origin(folder: str) -> persisted.Origin:
    files = tuple(f"{folder}/toy-train.tfrecord-0000{i}-of-00002" for i in (0, 1))
    return persisted.Origin(DATASET, SPLIT, files, {})


def key(folder: str) -> dict | None:
    return persisted.key(origin(folder), np.arange(N), SIZE, SHORTER_SIDE, FEATURES)


# -- a bucket's listing, as gcsfs gives it -------------------------------------------


def _object(name: str, size: int, generation: str, crc32c: str) -> dict:
    """One object of gcsfs's detailed listing (`GCSFileSystem._process_object`)."""
    return {
        "kind": "storage#object",
        "id": f"toy-bucket/data/toy/1/1.0.0/{name}/{generation}",
        "name": f"toy-bucket/data/toy/1/1.0.0/{name}",
        "bucket": "toy-bucket",
        "generation": generation,
        "metageneration": "1",
        "contentType": "application/octet-stream",
        "storageClass": "STANDARD",
        "size": size,
        "md5Hash": "1B2M2Y8AsgTpgAmY7PhCfg==",
        "crc32c": crc32c,
        "etag": "CMDy6pXLp4IDEAE=",
        "timeCreated": "2023-11-14T22:13:20.123Z",
        "updated": "2023-11-14T22:13:20.123Z",
        "type": "file",
    }


LISTING = [
    *(_object(name, 10 + i, f"170000000012345{i}", f"AAAAA{i}==") for i, name in enumerate(TRAIN)),
    _object("toy-test.tfrecord-00000-of-00001", 1, "1700000000123460", "BBBBBB=="),
    _object("dataset_info.json", 2, "1700000000123461", "CCCCCC=="),
    {
        "bucket": "toy-bucket",
        "name": "toy-bucket/data/toy/1/1.0.0/extra",
        "size": 0,
        "storageClass": "DIRECTORY",
        "type": "directory",
    },
]


class RecordedBucket(fsspec.AbstractFileSystem):
    """gcsfs's place in fsspec's registry: `ls` answers the recorded listing."""

    def ls(self, path: str, detail: bool = True, **_options) -> list[dict]:
        assert detail and path == BUCKET_FOLDER.removeprefix("gs://"), path
        return [dict(entry) for entry in LISTING]


@pytest.fixture
def bucket(monkeypatch):
    registry = importlib.import_module("fsspec.registry")
    monkeypatch.setitem(registry._registry, "gs", RecordedBucket)


# -- the pins ------------------------------------------------------------------------


def test_a_local_build_keys_and_names_its_persistent_file_as_before(build):
    made = key("build")
    assert made["shards"] == [[f"build/{name}", 10 + i, MTIME_NS] for i, name in enumerate(TRAIN)]
    assert persisted.key_digest(made) == LOCAL_DIGEST
    assert persisted.file_name(made) == LOCAL_NAME


def test_a_bucket_keys_and_names_its_persistent_file_as_before(build, bucket):
    made = key(BUCKET_FOLDER)
    assert made["shards"] == [
        [f"{BUCKET_FOLDER}/{name}", 10 + i, f"170000000012345{i}", f"AAAAA{i}=="]
        for i, name in enumerate(TRAIN)
    ]
    assert persisted.key_digest(made) == BUCKET_DIGEST
    assert persisted.file_name(made) == BUCKET_NAME


def test_a_file_cache_is_named_as_before(build):
    from fast_tfds.cache import tf_file_cache

    # Two shards and a missing one (named "missing"); TensorFlow's stat of a local file
    # gives whole seconds.
    instructions = [
        types.SimpleNamespace(filename=f"build/toy-train.tfrecord-0000{i}-of-00002", skip=i, take=5)
        for i in (0, 1)
    ]
    instructions.append(types.SimpleNamespace(filename="build/gone", skip=0, take=1))
    prefix = tf_file_cache.cache_prefix(
        "cache/run",
        dataset_name=DATASET,
        split=SPLIT,
        instructions=instructions,
        element_spec={"image": "uint8 [16, 16, 3]", "label": "int64 []"},
    )
    assert prefix == FILE_CACHE_PREFIX


def test_a_file_cache_records_its_local_shards_for_staleness(build):
    shards = [f"build/{name}" for name in TRAIN[2:]] + ["build/gone", f"{BUCKET_FOLDER}/x"]
    fd = os.open("record.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        housekeeping.record_cache(fd, DATASET, SPLIT, shards)
    finally:
        os.close(fd)
    record = json.loads(Path("record.lock").read_bytes())
    assert record == {
        "pid": os.getpid(),
        "dataset": DATASET,
        "split": SPLIT,
        "shards": [[f"build/{name}", 12 + i, MTIME_NS] for i, name in enumerate(TRAIN[2:])],
    }


def test_a_persistent_file_written_before_is_served(build):
    (written,) = DATA.glob("*.arena")
    assert written.name == LOCAL_NAME
    shutil.copytree(DATA, "cache")

    def never():
        raise AssertionError("a served file is not filled again")

    opened, _ = persisted.open_file(
        origin("build"),
        np.arange(N),
        output_size=SIZE,
        shorter_side=SHORTER_SIDE,
        features=FEATURES,
        sizes=never,
        folder="cache",
        budget=None,
        what="toy train",
    )
    assert opened is not None and opened.filled
    assert isinstance(opened.backing, persisted.ServedFile)
    assert opened.path == Path("cache") / LOCAL_NAME
    pictures = opened.pictures
    assert (pictures.output_size, pictures.shorter_side) == (SIZE, SHORTER_SIDE)
    served = Store(N, FEATURES, None, opened.backing, pictures=pictures, filled=opened.filled)
    heights, widths, labels = PINNED_ROWS
    np.testing.assert_array_equal(served.pictures.reference_heights, heights)
    np.testing.assert_array_equal(served.pictures.reference_widths, widths)
    images = served.pictures
    for slot, picture in enumerate(pinned_pictures([images.image(i).shape for i in range(N)])):
        np.testing.assert_array_equal(images.image(slot), picture)
    np.testing.assert_array_equal(served.features["label"], labels)


# What the pinned file holds: the reference heights and widths, the labels; and pictures.
PINNED_ROWS = (np.array([20, 24, 18]), np.array([18, 30, 22]), np.array([7, 8, 9]))


def pinned_pictures(shapes) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.integers(0, 256, shape, dtype=np.uint8) for shape in shapes]


# -- the fingerprint itself ------------------------------------------------------------


def test_a_missing_file_has_no_fingerprint_and_a_changed_one_is_told(build):
    paths = [f"build/{name}" for name in TRAIN[:2]] + ["build/gone"]
    found = fingerprint.of(paths)
    assert found == {path: [path, 10 + i, MTIME_NS] for i, path in enumerate(paths[:2])}
    recorded = [*found.values(), [f"{BUCKET_FOLDER}/x", 1, "1", "A=="]]  # never looked at
    assert not fingerprint.changed(recorded)
    write(Path(paths[0]), b"x" * 11)  # another size
    assert fingerprint.changed(recorded)
    write(Path(paths[0]), b"x" * 10)
    os.utime(paths[1], ns=(MTIME_NS, MTIME_NS + 1))  # another time
    assert fingerprint.changed(recorded)
    os.utime(paths[1], ns=(MTIME_NS, MTIME_NS))
    assert not fingerprint.changed(recorded)
    os.remove(paths[1])  # gone
    assert fingerprint.changed(recorded)
