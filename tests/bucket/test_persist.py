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
import re
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


def own_copy(bucket, local: Path, prefix: str, request) -> str:
    """`local` uploaded under a prefix of this test's own, named after `prefix`: the store is
    the run's, read by the other xdist workers meanwhile, and a test here uploads a shard
    again (a new version, the same examples), which would change what a persisted read of
    theirs is keyed by."""
    own = f"{prefix}-{re.sub(r'[^A-Za-z0-9_-]+', '-', request.node.name)}"
    bucket.upload(local, own)
    return own


def run(bucket, plan) -> tuple[dict, str, dict[str, list[str]]]:
    """({name: outputs}, stderr, {kind: the shard objects it read}) of one child's reads
    (`reads.PERSIST`, in a new process as a next run is): the proxy's log is reset before
    each read, so that each read's requests are its own."""
    child = reads.start(bucket, reads.PERSIST, **reads.persisting(*plan))
    taken, asked = "", {}
    for kind, *_ in plan:
        bucket.proxy.reset()
        child.stdin.write("\n")
        child.stdin.flush()
        taken += child.until(f"DONE {kind}\n")
        asked[kind] = shard_reads(bucket)
    child.stdin.close()
    return reads.outputs_of(child, read=taken), child.stderr_text(), asked


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


def test_the_next_run_serves_from_the_local_file_and_a_rewritten_object_refills_it(
    bucket, tmp_path, request
):
    """Every kind of read, each with a file of its own, in the same three runs."""
    next_run_and_rewrite(bucket, list(CASES), tmp_path, request)


@pytest.mark.parametrize("store", ["s3", "az"], indirect=True)
def test_persist_from_s3_and_azure_serves_the_next_run_and_refills_a_rewritten_object(
    store, tmp_path, request
):
    """The same over S3 and Azure, keyed by each object's size and ETag: a new process
    serves from the file; an object the store says was rewritten is read again."""
    next_run_and_rewrite(store, ["tf-plain", "loader"], tmp_path, request)


def next_run_and_rewrite(bucket, kinds: list[str], tmp_path: Path, request) -> None:
    """Three runs, each a new process reading each of `kinds` into a cache folder of its
    own: the first fills a file, the next serves from it, and after each kind's shard is
    uploaded again, the last fills a new one."""
    locals_ = {kind: request.getfixturevalue(CASES[kind][1]) for kind in kinds}
    own = {}  # {prefix: the prefix of this test's own copy of the build under it}
    for kind in kinds:
        if CASES[kind][0] not in own:
            own[CASES[kind][0]] = own_copy(bucket, locals_[kind], CASES[kind][0], request)
    prefixes = {kind: own[CASES[kind][0]] for kind in kinds}
    caches = {kind: tmp_path / kind for kind in kinds}
    for cache in caches.values():
        cache.mkdir()

    def plan(with_local: bool):
        return [
            (
                kind,
                bucket.url(prefixes[kind]),
                caches[kind],
                locals_[kind] if with_local else None,
            )
            for kind in kinds
        ]

    filled, stderr, asked = run(bucket, plan(True))
    assert "caching in memory only" not in stderr, stderr[-3000:]
    made = {}
    for kind in kinds:
        for epoch in range(2):
            assert same(filled[f"{kind}:gs{epoch}"], filled[f"{kind}:local{epoch}"]), (kind, epoch)
        assert asked[kind], f"{kind}: the first run reads the shards from the bucket"
        (made[kind],) = files(caches[kind])

    served, stderr, asked = run(bucket, plan(False))
    for kind in kinds:
        assert asked[kind] == [], f"{kind}: the next run read shard bytes from the bucket"
        for epoch in range(2):
            assert same(served[f"{kind}:gs{epoch}"], filled[f"{kind}:local{epoch}"]), (kind, epoch)
        assert files(caches[kind]) == [made[kind]], kind

    # The same bytes uploaded again, as the store's new version (GCS: a new generation;
    # S3: a multipart ETag; Azure: a new ETag), so a new key and a new fill.
    rewritten = {}
    for kind in kinds:
        shard = CASES[kind][2]
        name = f"{prefixes[kind]}/{shard}"
        if name not in rewritten.values():
            before = bucket.version(name)
            assert bucket.rewrite(name, (locals_[kind] / shard).read_bytes()) != before
        rewritten[kind] = name
    refilled, stderr, asked = run(bucket, plan(False))
    for kind in kinds:
        assert rewritten[kind] in asked[kind], f"{kind}: the rewritten shard was not read again"
        for epoch in range(2):
            assert same(refilled[f"{kind}:gs{epoch}"], filled[f"{kind}:local{epoch}"]), (
                kind,
                epoch,
            )
        assert len(files(caches[kind])) == 2 and made[kind] in files(caches[kind]), kind


def test_a_file_filled_by_as_fast_dataset_serves_the_loader_from_the_bucket(
    bucket, cats_both_formats_dir, tmp_path, request
):
    """One key for both back ends: the objects of every format in the folder."""
    cache = tmp_path / "cache"
    cache.mkdir()
    url = bucket.url(own_copy(bucket, cats_both_formats_dir, BOTH, request))
    filled, stderr, _ = run(bucket, [("tf-augment", url, cache, cats_both_formats_dir)])
    assert same(filled["tf-augment:gs0"], filled["tf-augment:local0"]), stderr[-3000:]
    (made,) = files(cache)
    served, stderr, asked = run(bucket, [("loader-augment", url, cache, cats_both_formats_dir)])
    assert files(cache) == [made], stderr[-3000:]
    assert asked["loader-augment"] == [], "the loader read shard bytes from the bucket"
    # The loader's own draws of the same pictures, from the file and from memory.
    assert same(served["loader-augment:gs0"], served["loader-augment:local0"])


def test_without_gcsfs_persist_says_how_to_get_it_and_caches_in_memory(bucket, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    child = reads.start(
        bucket,
        BLOCK_PACKAGES + reads.PERSIST,
        args=["gcsfs"],
        **reads.persisting(("tf-augment", bucket.url(TFRECORD), cache, None)),
    )
    child.stdin.close()
    found = reads.outputs_of(child)
    stderr = child.stderr_text()
    warned = [line for line in stderr.splitlines() if "caching in memory only" in line]
    assert len(warned) == 1 and "pip install 'fast-image-tfds[gcs]'" in warned[0], stderr[-3000:]
    assert found["tf-augment:gs0"] and files(cache) == []
