"""`fast_tfds.cache.remote.object_stores`, the one seam to a bucket: the one read timeout
(its default, and one line for a bad value on every path that reads it), and the
fingerprints a persistent cache's key holds, from a stand-in for gcsfs's listing. (The
same from an emulated bucket, through both readers, is tests/bucket's.)"""

from __future__ import annotations

import threading

import pytest

from fast_tfds.cache.remote import copies, object_stores
from fast_tfds.cache.remote.object_stores import (
    NotKeyed,
    ObjectStore,
    fingerprints,
    timeout_s,
)

FOLDER = "gs://bucket/data/ds/224/1.0.0"
FILES = [f"{FOLDER}/ds-train.tfrecord-{k:05d}-of-00002" for k in range(2)]
BAD = "FAST_TFDS_BUCKET_READ_TIMEOUT_S={!r}: must be a positive number of seconds"


class Listed:
    """gcsfs's detailed listing of FOLDER: `entries`, or no answer until `answer` is set."""

    def __init__(self, entries):
        self.entries = entries
        self.answer = threading.Event()
        self.answer.set()

    def ls(self, path, detail=False, refresh=False):
        assert path == FOLDER.removeprefix("gs://") and detail and refresh
        self.answer.wait(60)
        return self.entries

    def invalidate_cache(self, path=None):
        pass


def entry(url, **fields):
    return {"name": url.removeprefix("gs://"), "type": "file", **fields}


@pytest.fixture
def listed(monkeypatch):
    fake = Listed(
        [
            entry(FILES[1], size=20, generation="7", crc32c="b"),
            entry(FILES[0], size=10, generation=5, crc32c="a"),
            entry(f"{FOLDER}/dataset_info.json", size=1, generation="1"),
            {"name": f"{FOLDER.removeprefix('gs://')}/sub", "type": "directory"},
        ]
    )
    monkeypatch.setattr(ObjectStore, "client", lambda self: fake)
    return fake


def test_the_read_timeout_is_120_s_unless_set(monkeypatch):
    monkeypatch.delenv("FAST_TFDS_BUCKET_READ_TIMEOUT_S", raising=False)
    assert timeout_s() == object_stores.DEFAULT_TIMEOUT_S == 120
    monkeypatch.setenv("FAST_TFDS_BUCKET_READ_TIMEOUT_S", "")
    assert timeout_s() == 120
    monkeypatch.setenv("FAST_TFDS_BUCKET_READ_TIMEOUT_S", "2.5")
    assert timeout_s() == 2.5


@pytest.mark.parametrize("value", ["soon", "0", "-3", "nan"])
def test_a_bad_read_timeout_is_the_same_one_line_on_every_path(monkeypatch, listed, value):
    """The listing of a persistent cache's key, an opening, and the copies either reader
    reads: each the same ValueError (tests/bucket checks it through both readers)."""
    monkeypatch.setenv("FAST_TFDS_BUCKET_READ_TIMEOUT_S", value)
    message = f"^{BAD.format(value)}$".replace("(", r"\(").replace(")", r"\)")
    with pytest.raises(ValueError, match=message):
        timeout_s()
    with pytest.raises(ValueError, match=message):
        fingerprints(FOLDER, lambda name: True)
    with pytest.raises(ValueError, match=message):
        with copies.opening(FOLDER, "ds", "train", "tfrecord"):
            pass
    with pytest.raises(ValueError, match=message):
        copies.reader_copies(FILES, without="are read otherwise")


def test_fingerprints_are_each_objects_size_generation_and_crc32c(listed):
    found = fingerprints(FOLDER + "/", lambda name: name.startswith("ds-train."))
    assert found == [[FILES[0], 10, "5", "a"], [FILES[1], 20, "7", "b"]]


def test_what_cannot_be_keyed_is_one_line_saying_why(monkeypatch, listed):
    with pytest.raises(
        NotKeyed, match=r"^hdfs:// objects have no metadata a key can use, only gs://, s3://, az://"
    ):
        fingerprints("hdfs://bucket/data", lambda name: True)
    listed.entries = [entry(FILES[0], size=10)]
    with pytest.raises(NotKeyed, match=f"^the bucket gave no generation or size for {FILES[0]}$"):
        fingerprints(FOLDER, lambda name: True)
    monkeypatch.setenv("FAST_TFDS_BUCKET_READ_TIMEOUT_S", "0.2")
    listed.answer.clear()
    with pytest.raises(NotKeyed, match=f"^listing {FOLDER} gave no answer within 0.2 s$"):
        fingerprints(FOLDER, lambda name: True)
    listed.answer.set()


def test_s3_and_azure_fingerprints_are_each_objects_size_and_etag():
    """The fields of s3fs's and adlfs's detailed listings, as moto's server and Azurite
    give them (tests/bucket has the stores themselves)."""
    from fast_tfds.cache.remote.object_stores import STORES

    s3 = {"name": "b/k", "size": 3, "ETag": '"900150983cd24fb0d6963f7d28e17f72"', "type": "file"}
    assert STORES["s3"].fingerprint("s3://b/k", s3) == [
        "s3://b/k",
        3,
        "900150983cd24fb0d6963f7d28e17f72",
    ]
    az = {"name": "c/k", "size": 2, "etag": '"0x26AF1D6409EF220"', "type": "file"}
    assert STORES["az"].fingerprint("az://c/k", az) == ["az://c/k", 2, "0x26AF1D6409EF220"]
    with pytest.raises(NotKeyed, match=r"^the store gave no ETag or size for s3://b/k$"):
        STORES["s3"].fingerprint("s3://b/k", {"name": "b/k", "size": 3})


def test_every_stores_row_pickles_as_itself():
    """The loader's worker processes get the copies of a split's shards pickled, their
    store's row with them (its checksum and digest included)."""
    import pickle

    from fast_tfds.cache.remote.object_stores import STORES

    for store in STORES.values():
        assert pickle.loads(pickle.dumps(store)) == store
