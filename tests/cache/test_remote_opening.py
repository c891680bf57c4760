"""`opening` (`fast_tfds.cache.remote.copies`) with a stand-in for gcsfs: which objects of a
listing are a split's shards, the copies started ahead and taken by the reader of exactly
those files, and dropped otherwise. (Both readers' openings from an emulated bucket are
tests/bucket's.)"""

from __future__ import annotations

import os
import time

import pytest

from fast_tfds.cache.remote.copies import opening, shard_objects, take
from fast_tfds.cache.remote.object_stores import ObjectStore
from tests.cache.test_remote_copies import WAIT_S, FakeBucket

FOLDER = "gs://bucket/data/ds/224/1.0.0"
SHARDS = [f"ds-train.tfrecord-{k:05d}-of-00004" for k in range(4)]
OTHERS = ["dataset_info.json", "features.json", "ds-test.tfrecord-00000-of-00001"]
FILES = tuple(f"{FOLDER}/{n}" for n in SHARDS)


class ListedBucket(FakeBucket):
    """FakeBucket with a listing of FOLDER (gcsfs's detailed `ls`)."""

    def __init__(self, names):
        super().__init__()
        self.names = names
        self.listings = 0

    def ls(self, path, detail=False, refresh=False):
        assert path == FOLDER.removeprefix("gs://") and detail and refresh
        self.listings += 1
        return [{"name": f"{path}/{n}", "type": "file"} for n in self.names]

    def invalidate_cache(self, path=None):
        pass


@pytest.fixture
def bucket(monkeypatch, tmp_path):
    fake = ListedBucket([*reversed(SHARDS), *OTHERS])
    monkeypatch.setattr(ObjectStore, "client", lambda self: fake)
    monkeypatch.setenv("TMPDIR", os.fspath(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # TMPDIR is read again
    return fake


def gone(folder: str) -> bool:
    deadline = time.monotonic() + WAIT_S
    while os.path.exists(folder) and time.monotonic() < deadline:
        time.sleep(0.01)
    return not os.path.exists(folder)


def test_a_splits_shards_are_the_whole_set_in_shard_order():
    names = [*reversed(SHARDS), *OTHERS, "ds-train.array_record-00000-of-00001"]
    assert shard_objects(names, "ds", "train", "tfrecord") == SHARDS
    assert shard_objects(names, "ds", "test", "tfrecord") == [OTHERS[2]]
    assert shard_objects(names, "ds", "train", "array_record") == [names[-1]]
    assert shard_objects(SHARDS[:3], "ds", "train", "tfrecord") == []  # one missing
    other_build = "ds-train.tfrecord-00000-of-00002"
    assert shard_objects([*SHARDS, other_build], "ds", "train", "tfrecord") == []
    assert shard_objects(SHARDS, "d", "train", "tfrecord") == []  # another dataset


def test_the_reader_of_exactly_the_split_takes_the_copies_started_ahead(bucket):
    with opening(FOLDER, "ds", "train", "tfrecord"):
        assert take(FILES[:3]) is None  # other files: not these copies
        copies = take(FILES)
        assert copies is not None and copies.files == FILES
        assert os.path.isdir(copies.folder)  # started while the builder loaded
        assert take(FILES) is None  # taken once
    for k, name in enumerate(FILES):  # still the reader's after the opening
        assert open(copies.wait(k), "rb").read() == name.removeprefix("gs://").encode()
    assert sorted(bucket.started) == sorted(n.removeprefix("gs://") for n in FILES)
    assert bucket.listings == 1
    assert take(FILES) is None  # outside an opening


def test_copies_no_reader_took_are_dropped_with_the_opening(bucket):
    bucket.released = False
    with opening(FOLDER, "ds", "train", "tfrecord"):
        assert take(FILES[1:]) is None  # listed by now: the copies are there
        (folder,) = os.listdir(os.environ["TMPDIR"])
    for name in FILES:
        bucket.release(name.removeprefix("gs://"))
    assert gone(os.path.join(os.environ["TMPDIR"], folder))


def test_an_opening_that_fails_drops_the_copies_its_reader_took(bucket):
    bucket.released = False
    with pytest.raises(ValueError, match="batch_size"):
        with opening(FOLDER, "ds", "train", "tfrecord"):
            copies = take(FILES)
            raise ValueError("batch_size=0: ...")  # what a reader's check raises
    for name in FILES:
        bucket.release(name.removeprefix("gs://"))
    assert gone(copies.folder)


@pytest.mark.parametrize(
    ("folder", "split"),
    [
        (FOLDER, "train[:50%]"),  # a slice: maybe a few of the shards
        (FOLDER, "train+test"),
        ("/local/data/ds/224/1.0.0", "train"),
        (None, "train"),
    ],
)
def test_nothing_is_listed_for_a_slice_or_a_local_build(bucket, folder, split):
    with opening(folder, "ds", split, "tfrecord"):
        assert take(FILES) is None
    assert bucket.listings == 0 and not bucket.started
