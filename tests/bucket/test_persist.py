"""`persist=True` with the shards in a bucket (emulated): the first run fills a local
decoded file, keyed by the objects' metadata (size, generation, CRC32C); the next run, in
a new process, serves from it without reading a byte of any shard object; an object
uploaded again (a new generation) makes the next run fill a new file, never serve the
old one. Both back ends, one key: a file filled by `as_fast_dataset` serves the loader.

What each read must give is the same read of the local copy in memory (persist=False,
the same seed), in the same child: (pixels, label) pairs, as multisets. Shard reads are
counted at the proxy (`Proxy.media_reads`).
"""

from __future__ import annotations

import collections
import os
from pathlib import Path

import pytest

from tests.bucket import reads
from tests.bucket.conftest import ARRAY_RECORD, TFRECORD
from tests.helpers import BLOCK_PACKAGES

pytest.importorskip("grain")

BOTH = "both"  # a build with TFRecord and ArrayRecord files side by side
VERSION = "cats_vs_dogs_fast/224/1.0.0"
SHARD = f"{VERSION}/cats_vs_dogs_fast-train.{{}}-00003-of-00016"
SHARD_MARKS = (".tfrecord-", ".array_record-")


@pytest.fixture(scope="module")
def bucket(bucket, cats_both_formats_dir):
    """The shared bucket, with the both-formats build under gs://BUCKET/both too. (A test
    here uploads a shard again with the same bytes: a new generation, the same examples.)"""
    bucket.upload(cats_both_formats_dir, BOTH)
    return bucket


def run(bucket, kind: str, prefix: str, cache: Path, local: Path | None = None, **env):
    """({name: outputs}, stderr) of one child's read (`PERSIST`), the proxy's log reset first."""
    bucket.proxy.reset()
    extra = {"LOCAL_DIR": os.fspath(local)} if local is not None else {}
    return reads.run(
        bucket,
        reads.PERSIST,
        KIND=kind,
        DATA_DIR=bucket.url(prefix),
        CACHE_DIR=os.fspath(cache),
        **extra,
        **env,
    )


def shard_reads(bucket) -> list[str]:
    """The shard objects whose bytes the bucket gave since the last reset."""
    return [r.object for r in bucket.proxy.media_reads() if any(m in r.object for m in SHARD_MARKS)]


def files(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.arena"))


def same(got, expected) -> bool:
    return len(got) == len(expected) > 0 and collections.Counter(got) == collections.Counter(
        expected
    )


CASES = {
    # kind: (prefix in the bucket, local copy, the shard object rewritten)
    "tf-augment": (TFRECORD, "cats_data_dir", SHARD.format("tfrecord")),
    "tf-plain": (TFRECORD, "cats_data_dir", SHARD.format("tfrecord")),
    "loader": (ARRAY_RECORD, "cats_array_record_dir", SHARD.format("array_record")),
    "loader-augment": (ARRAY_RECORD, "cats_array_record_dir", SHARD.format("array_record")),
}


@pytest.mark.parametrize("kind", list(CASES))
def test_the_next_run_serves_from_the_local_file_and_a_rewritten_object_refills_it(
    bucket, kind, tmp_path, request
):
    next_run_and_rewrite(bucket, kind, tmp_path, request)


@pytest.mark.parametrize("store", ["s3", "az"], indirect=True)
@pytest.mark.parametrize("kind", ["tf-plain", "loader"])
def test_persist_from_s3_and_azure_serves_the_next_run_and_refills_a_rewritten_object(
    store, kind, tmp_path, request
):
    """The same over S3 and Azure, keyed by each object's size and ETag: a new process
    serves from the file; an object the store says was rewritten is read again."""
    next_run_and_rewrite(store, kind, tmp_path, request)


def next_run_and_rewrite(bucket, kind: str, tmp_path: Path, request) -> None:
    prefix, local_fixture, rewritten = CASES[kind]
    local = request.getfixturevalue(local_fixture)
    cache = tmp_path / "cache"
    cache.mkdir()

    filled, stderr = run(bucket, kind, prefix, cache, local=local)
    assert "caching in memory only" not in stderr, stderr[-3000:]
    for epoch in range(2):
        assert same(filled[f"gs{epoch}"], filled[f"local{epoch}"]), f"epoch {epoch}"
    assert shard_reads(bucket), "the first run reads the shards from the bucket"
    (made,) = files(cache)

    served, stderr = run(bucket, kind, prefix, cache)
    assert shard_reads(bucket) == [], "the next run read shard bytes from the bucket"
    for epoch in range(2):
        assert same(served[f"gs{epoch}"], filled[f"local{epoch}"]), f"epoch {epoch}"
    assert files(cache) == [made]

    # The same bytes uploaded again, as the store's new version (GCS: a new generation;
    # S3: a multipart ETag; Azure: a new ETag), so a new key and a new fill.
    name = f"{prefix}/{rewritten}"
    before = bucket.version(name)
    assert bucket.rewrite(name, (local / rewritten).read_bytes()) != before
    refilled, stderr = run(bucket, kind, prefix, cache)
    assert name in shard_reads(bucket), "the rewritten shard was not read again"
    for epoch in range(2):
        assert same(refilled[f"gs{epoch}"], filled[f"local{epoch}"]), f"epoch {epoch}"
    assert len(files(cache)) == 2 and made in files(cache)


def test_a_file_filled_by_as_fast_dataset_serves_the_loader_from_the_bucket(
    bucket, cats_both_formats_dir, tmp_path
):
    """One key for both back ends: the objects of every format in the folder."""
    cache = tmp_path / "cache"
    cache.mkdir()
    filled, stderr = run(bucket, "tf-augment", BOTH, cache, local=cats_both_formats_dir)
    assert same(filled["gs0"], filled["local0"]), stderr[-3000:]
    (made,) = files(cache)
    served, stderr = run(bucket, "loader-augment", BOTH, cache, local=cats_both_formats_dir)
    assert files(cache) == [made], stderr[-3000:]
    assert shard_reads(bucket) == [], "the loader read shard bytes from the bucket"
    # The loader's own draws of the same pictures, from the file and from memory.
    assert same(served["gs0"], served["local0"])


def test_without_gcsfs_persist_says_how_to_get_it_and_caches_in_memory(bucket, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    child = reads.start(
        bucket,
        BLOCK_PACKAGES + reads.PERSIST,
        args=["gcsfs"],
        KIND="tf-augment",
        DATA_DIR=bucket.url(TFRECORD),
        CACHE_DIR=os.fspath(cache),
    )
    child.stdin.close()
    found = reads.outputs_of(child)
    stderr = child.stderr_text()
    warned = [line for line in stderr.splitlines() if "caching in memory only" in line]
    assert len(warned) == 1 and "pip install 'fast-image-tfds[gcs]'" in warned[0], stderr[-3000:]
    assert found["gs0"] and files(cache) == []
